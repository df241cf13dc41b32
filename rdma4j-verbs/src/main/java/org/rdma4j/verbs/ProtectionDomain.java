package org.rdma4j.verbs;

import java.lang.foreign.MemorySegment;
import java.util.Set;

/**
 * A protection domain (ibv_pd). Owns memory regions, queue pairs, SRQs and address handles; closing
 * fails with EBUSY while any is open. Thread-safe.
 */
public interface ProtectionDomain extends AutoCloseable {
    /** @return the context */
    Context context();

    /**
     * Registers memory (ibv_reg_mr). The region keeps the segment alive until it is deregistered.
     *
     * @param segment a native segment
     * @param access  access flags; REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE
     * @return the memory region
     * @throws VerbsException EINVAL for a heap segment, an empty segment or invalid flags
     */
    MemoryRegion regMr(MemorySegment segment, Set<AccessFlag> access);

    /**
     * ibv_create_qp.
     *
     * @param attrs creation attributes
     * @return the queue pair, in RESET
     */
    QueuePair createQp(QpInitAttributes attrs);

    /**
     * ibv_create_srq.
     *
     * @param maxWr  minimum number of outstanding receive requests
     * @param maxSge scatter entries per request
     * @return the SRQ
     */
    SharedReceiveQueue createSrq(int maxWr, int maxSge);

    /**
     * ibv_create_ah.
     *
     * @param attrs the address vector
     * @return the address handle
     */
    AddressHandle createAh(AhAttributes attrs);

    /**
     * ibv_dealloc_pd.
     *
     * @throws VerbsException EBUSY while children are open
     */
    @Override
    void close();
}
