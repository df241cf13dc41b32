// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.foreign.MemorySegment;
import java.util.Set;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;

/** A protection domain. Thread-safe. */
final class SoftPd extends SoftResource implements ProtectionDomain {
    final SoftContext ctx;
    final SoftDevice device;

    SoftPd(SoftContext ctx) {
        this.ctx = ctx;
        this.device = ctx.device;
    }

    @Override
    String describe() {
        return "PD";
    }

    @Override
    public Context context() {
        return ctx;
    }

    @Override
    public MemoryRegion regMr(MemorySegment segment, Set<AccessFlag> access) {
        checkNotClosed();
        if (!segment.isNative()) {
            throw new VerbsException(Errno.EINVAL, "cannot register a heap segment: registered memory must be native "
                    + "(allocate it with an Arena)");
        }
        if (segment.byteSize() == 0) {
            throw new VerbsException(Errno.EINVAL, "cannot register an empty segment");
        }
        if (segment.byteSize() > SoftDevice.MAX_MR_SIZE) {
            throw new VerbsException(Errno.EINVAL, "cannot register " + segment.byteSize() + " bytes: more than the"
                    + " device's max_mr_size of " + SoftDevice.MAX_MR_SIZE + " bytes (DeviceAttributes.maxMrSize);"
                    + " register it in pieces");
        }
        // ibv_reg_mr.3 / kernel ib_check_mr_access: remote write or atomic requires local write.
        if ((access.contains(AccessFlag.REMOTE_WRITE) || access.contains(AccessFlag.REMOTE_ATOMIC))
                && !access.contains(AccessFlag.LOCAL_WRITE)) {
            throw new VerbsException(Errno.EINVAL, "access " + access + ": REMOTE_WRITE and REMOTE_ATOMIC require "
                    + "LOCAL_WRITE (ibv_reg_mr.3)");
        }
        // throws when the device cannot map it for good, or cannot use it at all (a closed or a confined arena:
        // DmaSpace.unusable)
        long dmaAddr = device.dma.mapRegion(ctx, segment);
        SoftMr mr = new SoftMr(this, segment, AccessFlag.toBits(access), dmaAddr);
        try {
            device.addMr(mr); // sets mr.key before the MR can be looked up
        } catch (RuntimeException e) {
            device.dma.unmapRegion(dmaAddr);
            throw e;
        }
        children.add(mr);
        return mr;
    }

    /** The local DMA L_Key is 0, as rdmavt's DMA MR (rvt_lkey_ok); no registered region has key 0. */
    @Override
    public int localDmaLkey() {
        return SoftDevice.LOCAL_DMA_LKEY;
    }

    @Override
    public QueuePair createQp(QpInitAttributes attrs) {
        checkNotClosed();
        device.bindOnFirstQp(); // a RoCE device of the provider binds its addresses now
        SoftQp qp = new SoftQp(this, attrs);
        children.add(qp);
        return qp;
    }

    /** The port's GSI QP (QPN 1): {@link SoftGsi}. */
    QueuePair createGsiQp(QpInitAttributes attrs) {
        checkNotClosed();
        device.bindOnFirstQp(); // QP1 receives from the wire too: a RoCE device binds its addresses now
        SoftQp qp = new SoftQp(this, attrs, true);
        children.add(qp);
        return qp;
    }

    @Override
    public SharedReceiveQueue createSrq(int maxWr, int maxSge) {
        checkNotClosed();
        if (maxWr < 1 || maxWr > SoftDevice.MAX_QP_WR) {
            throw new VerbsException(Errno.EINVAL, "max_wr=" + maxWr + " (expected 1.." + SoftDevice.MAX_QP_WR + ")");
        }
        if (maxSge < 1 || maxSge > SoftDevice.MAX_SGE) {
            throw new VerbsException(Errno.EINVAL, "max_sge=" + maxSge + " (expected 1.." + SoftDevice.MAX_SGE + ")");
        }
        SoftSrq srq = new SoftSrq(this, maxWr, maxSge);
        children.add(srq);
        return srq;
    }

    @Override
    public AddressHandle createAh(AhAttributes attrs) {
        checkNotClosed();
        device.checkPort(attrs.portNum());
        if (attrs.sgidIndex() < 0 || attrs.sgidIndex() >= device.gidTableLength()) {
            throw new VerbsException(Errno.EINVAL, "sgid_index " + attrs.sgidIndex() + " (GID table has "
                    + device.gidTableLength() + " entries)");
        }
        SoftAh ah = new SoftAh(this, attrs.copy());
        children.add(ah);
        return ah;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_dealloc_pd");
        closed = true;
        ctx.children.remove(this);
    }
}
