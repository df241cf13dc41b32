// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A queue pair (ibv_qp). Posting is thread-safe. Control calls throw {@link VerbsException}; the
 * data path returns counts and completion statuses.
 */
public interface QueuePair extends AutoCloseable {
    /** The destination QP number of a multicast send (IB_MULTICAST_QPN; rxe_rcv takes it as "deliver to the group"). */
    int MULTICAST_QPN = 0xFF_FFFF;

    /** {@return the QP number (24 bits)} */
    int qpNum();

    /** {@return the transport type} */
    QpType type();

    /** {@return the PD} */
    ProtectionDomain pd();

    /** {@return the granted capabilities} */
    QpCapabilities cap();

    /** {@return the current state} */
    QpState state();

    /**
     * ibv_modify_qp with the attributes set on {@code attrs}. Either everything is applied or nothing.
     *
     * @param attrs next state and attributes
     * @throws VerbsException EINVAL for an invalid transition, a missing required attribute or one not
     *                        allowed on this transition
     */
    void modify(QpAttributes attrs);

    /** {@return ibv_query_qp: all attributes, with the full mask} */
    QpAttributes query();

    /**
     * Posts one send request.
     *
     * @param wr the request (copied)
     * @return true if posted; false with {@link SendWorkRequest#postError()} and
     *         {@link SendWorkRequest#postErrorMessage()} set otherwise
     */
    boolean postSend(SendWorkRequest wr);

    /**
     * Posts a chain of send requests (ibv_post_send). Requests before the first refused one are posted.
     *
     * @param wrs   requests (copied)
     * @param count how many of {@code wrs} to post
     * @return how many were posted; if less than count, {@code wrs[result].postError()} and
     *         {@code postErrorMessage()} say why
     */
    int postSend(SendWorkRequest[] wrs, int count);

    /**
     * Posts one receive request.
     *
     * @param wr the request (copied)
     * @return true if posted; false with {@link RecvWorkRequest#postError()} and
     *         {@link RecvWorkRequest#postErrorMessage()} set otherwise
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

    /**
     * ibv_attach_mcast: makes this UD QP receive the packets sent to a multicast group (a send to the
     * group GID with remote QPN {@link #MULTICAST_QPN}; every attached QP of every device that joined
     * receives a copy, the sending QP included when it is attached, as rxe's rxe_rcv_mcast_pkt delivers
     * to every QP on the group's list). A QP may join several groups; attaching twice is a no-op
     * (rxe_attach_mcg). While attached, the QP cannot be destroyed (ib_destroy_qp_user: EBUSY).
     *
     * @param mgid a multicast GID: ff00::/8, or IPv4-mapped 224.0.0.0/4 (rdma_is_multicast_addr)
     * @param mlid the multicast LID; ignored on RoCE ports (0)
     * @throws VerbsException EINVAL if the QP is not UD or the GID is not multicast (ib_attach_mcast);
     *                        ENOMEM when the device's group or attach limit is reached
     */
    void attachMcast(Gid mgid, int mlid);

    /**
     * ibv_detach_mcast: stops receiving a group's packets.
     *
     * @param mgid the group
     * @param mlid the multicast LID (ignored on RoCE ports)
     * @throws VerbsException EINVAL if the QP is not UD, the GID is not multicast, or the QP is not attached
     *                        to that group (rxe_detach_mcg)
     */
    void detachMcast(Gid mgid, int mlid);

    /** ibv_destroy_qp. */
    @Override
    void close();
}
