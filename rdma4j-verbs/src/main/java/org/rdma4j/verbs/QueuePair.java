package org.rdma4j.verbs;

/**
 * A queue pair (ibv_qp). Posting is thread-safe. Control calls throw {@link VerbsException}; the
 * data path returns counts and completion statuses.
 */
public interface QueuePair extends AutoCloseable {
    /** @return the QP number (24 bits) */
    int qpNum();

    /** @return the transport type */
    QpType type();

    /** @return the PD */
    ProtectionDomain pd();

    /** @return the granted capabilities */
    QpCapabilities cap();

    /** @return the current state */
    QpState state();

    /**
     * ibv_modify_qp with the attributes set on {@code attrs}. Either everything is applied or nothing.
     *
     * @param attrs next state and attributes
     * @throws VerbsException EINVAL for an invalid transition, a missing required attribute or one not
     *                        allowed on this transition
     */
    void modify(QpAttributes attrs);

    /** @return ibv_query_qp: all attributes, with the full mask */
    QpAttributes query();

    /**
     * Posts one send request.
     *
     * @param wr the request (copied)
     * @return true if posted; false with {@link SendWorkRequest#postError()} set otherwise
     */
    boolean postSend(SendWorkRequest wr);

    /**
     * Posts a chain of send requests (ibv_post_send). Requests before the first refused one are posted.
     *
     * @param wrs   requests (copied)
     * @param count how many of {@code wrs} to post
     * @return how many were posted; if less than count, {@code wrs[result].postError()} says why
     */
    int postSend(SendWorkRequest[] wrs, int count);

    /**
     * Posts one receive request.
     *
     * @param wr the request (copied)
     * @return true if posted; false with {@link RecvWorkRequest#postError()} set otherwise
     */
    boolean postRecv(RecvWorkRequest wr);

    /**
     * Posts a chain of receive requests (ibv_post_recv).
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

    /** ibv_destroy_qp. */
    @Override
    void close();
}
