// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** A shared receive queue (ibv_srq). Thread-safe. */
public interface SharedReceiveQueue extends AutoCloseable {
    /** {@return the PD} */
    ProtectionDomain pd();

    /** {@return the number of requests it holds} */
    int maxWr();

    /** {@return scatter entries per request} */
    int maxSge();

    /** {@return the armed limit (0 = disarmed)} */
    int limit();

    /**
     * Arms the limit event (ibv_modify_srq with IBV_SRQ_LIMIT): SRQ_LIMIT_REACHED fires once when the
     * number of posted requests drops below {@code limit}; then the limit is 0 until re-armed.
     *
     * @param limit the low watermark, 0 to disarm
     */
    void armLimit(int limit);

    /**
     * Posts one receive request.
     *
     * @param wr the request
     * @return true if posted; false with {@link RecvWorkRequest#postError()} set
     */
    boolean postRecv(RecvWorkRequest wr);

    /**
     * Posts several.
     *
     * @param wrs   requests
     * @param count how many
     * @return how many were posted
     */
    default int postRecv(RecvWorkRequest[] wrs, int count) {
        for (int i = 0; i < count; i++) {
            if (!postRecv(wrs[i])) {
                return i;
            }
        }
        return count;
    }

    /**
     * ibv_destroy_srq.
     *
     * @throws VerbsException EBUSY while QPs use it
     */
    @Override
    void close();
}
