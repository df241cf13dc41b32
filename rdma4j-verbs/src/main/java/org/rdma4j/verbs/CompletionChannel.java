// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.time.Duration;

/**
 * A completion channel (ibv_comp_channel): delivers one event per armed CQ that receives a
 * completion. Thread-safe.
 */
public interface CompletionChannel extends AutoCloseable {
    /**
     * Waits for a CQ event (ibv_get_cq_event). The CQ must be re-armed with
     * {@link CompletionQueue#reqNotify} to get another.
     *
     * @param timeout how long to wait; zero polls
     * @return the CQ that has a new completion, or null on timeout
     * @throws VerbsException EINVAL if the channel is closed, also when that happens while the thread waits,
     *                        and when the last CQ on the channel is closed while it waits (no event can come)
     */
    CompletionQueue getCqEvent(Duration timeout);

    /**
     * ibv_destroy_comp_channel.
     *
     * @throws VerbsException EBUSY while CQs use it
     */
    @Override
    void close();
}
