// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A completion queue (ibv_cq). Polling is thread-safe; completions come out in the order they were
 * generated for each work queue.
 */
public interface CompletionQueue extends AutoCloseable {
    /** {@return the number of entries the CQ holds (at least what was asked)} */
    int capacity();

    /** {@return the completion channel, or null} */
    CompletionChannel channel();

    /**
     * Polls up to {@code max} completions into {@code wcs[0..)} (ibv_poll_cq).
     *
     * @param wcs reusable completion objects
     * @param max how many to take at most
     * @return how many were filled in (0 if none)
     * @throws VerbsException EINVAL if the CQ is closed (as {@link #reqNotify} on it does)
     */
    int poll(WorkCompletion[] wcs, int max);

    /**
     * Polls one completion.
     *
     * @param wc filled in when a completion is available
     * @return true if one was taken
     * @throws VerbsException EINVAL if the CQ is closed
     */
    boolean poll(WorkCompletion wc);

    /**
     * Arms the CQ for one event on its channel (ibv_req_notify_cq).
     *
     * @param solicitedOnly only for solicited receives and for errors
     */
    void reqNotify(boolean solicitedOnly);

    /**
     * Acknowledges CQ events taken from the channel (ibv_ack_cq_events).
     *
     * @param count how many
     */
    void ackEvents(int count);

    /**
     * ibv_resize_cq.
     *
     * @param cqe minimum new size; must hold the completions now queued
     */
    void resize(int cqe);

    /**
     * ibv_destroy_cq.
     *
     * @throws VerbsException EBUSY while QPs or SRQs use it
     */
    @Override
    void close();
}
