package org.rdma4j.soft;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;

import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaSpace;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.VerbsException;

/**
 * A software RDMA device on a {@link SoftFabric}: one port, link layer Ethernet (RoCE-style GID
 * addressing), GID 0 is fe80::&lt;node GUID&gt; as rxe derives it from a MAC. Holds the device-wide
 * key and QP-number tables and the receive dispatcher.
 */
public final class SoftDevice implements Device {
    /** Largest message (rxe RXE_MAX_MSG_SZ). */
    static final long MAX_MSG_SZ = 1L << 31;
    static final int MAX_QP = 16_384;
    static final int MAX_MR = 65_536;
    static final int MAX_QP_WR = 16_384;
    static final int MAX_SGE = 32;
    static final int MAX_CQE = 32_767;
    static final int MAX_INLINE = 512;
    static final int MAX_RD_ATOMIC = 128;
    static final int FIRST_QPN = 0x11;
    /** The PD's local DMA L_Key (rdmavt uses 0 for its DMA MR too); MR keys start at 0x100. */
    static final int LOCAL_DMA_LKEY = 0;

    final SoftFabric fabric;
    /** How this device reaches memory: virtual, IOMMU or bounce, plus the optional DMA checker. */
    final DmaSpace dma;
    private final String name;
    private final long guid;
    private final Gid gid0;
    private volatile PortState portState = PortState.ACTIVE;
    private final Mtu activeMtu = Mtu.MTU_4096;
    // Written only under the engine lock; read by anyone (a statistic may lag by a few increments).
    private final long[] counters = new long[SoftCounter.values().length];
    private final CopyOnWriteArrayList<SoftContext> contexts = new CopyOnWriteArrayList<>();

    // Key and QPN tables: guarded by the engine lock for writes; readers are engine code.
    private final SoftMr[] mrs = new SoftMr[MAX_MR];
    private int nextMrIndex = 1;
    private final SplittableRandom keyVariants;
    private final SoftQp[] qps = new SoftQp[MAX_QP + FIRST_QPN];
    private int nextQpn = FIRST_QPN;

    SoftDevice(SoftFabric fabric, String name, int index, DmaConfig dmaConfig) {
        this.fabric = fabric;
        this.dma = new DmaSpace(dmaConfig);
        this.name = name;
        this.guid = 0x0200_00FF_FE00_0000L | ((long) (index + 1) << 8) | 0x01;
        this.gid0 = new Gid(0xFE80_0000_0000_0000L, guid);
        this.keyVariants = new SplittableRandom(guid ^ System.nanoTime());
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long guid() {
        return guid;
    }

    @Override
    public String providerName() {
        return "soft";
    }

    /** @return how this device reaches memory, and its DMA checker if on */
    public DmaSpace dma() {
        return dma;
    }

    /** @return the fabric */
    public SoftFabric fabric() {
        return fabric;
    }

    @Override
    public Context open() {
        fabric.checkOpen();
        SoftContext ctx = new SoftContext(this);
        contexts.add(ctx);
        return ctx;
    }

    void contextClosed(SoftContext ctx) {
        contexts.remove(ctx);
    }

    /**
     * Changes the port state, raising PORT_ACTIVE or PORT_ERR on every open context.
     *
     * @param port  port number (1)
     * @param state the new state; anything but ACTIVE stops traffic
     */
    public void setPortState(int port, PortState state) {
        checkPort(port);
        PortState old = portState;
        portState = state;
        if (old != state && (state == PortState.ACTIVE || old == PortState.ACTIVE)) {
            AsyncEventType t = state == PortState.ACTIVE ? AsyncEventType.PORT_ACTIVE : AsyncEventType.PORT_ERR;
            for (SoftContext c : contexts) {
                c.raise(new AsyncEvent(t, null, null, null, port));
            }
        }
    }

    /**
     * @param c a counter
     * @return its value
     */
    public long counter(SoftCounter c) {
        return counters[c.ordinal()];
    }

    /** Engine lock held. */
    void count(SoftCounter c) {
        counters[c.ordinal()]++;
    }

    boolean portActive() {
        return portState == PortState.ACTIVE;
    }

    Gid gid(int index) {
        return index == 0 ? gid0 : Gid.ZERO;
    }

    int gidTableLength() {
        return 1;
    }

    Mtu activeMtu() {
        return activeMtu;
    }

    void checkPort(int port) {
        if (port != 1) {
            throw new VerbsException(Errno.EINVAL, "port " + port + " (device " + name + " has port 1 only)");
        }
    }

    DeviceAttributes attributes() {
        return new DeviceAttributes("0.1.0", guid, guid, MAX_MSG_SZ, 0xFFFF_F000L, 0xFFFFFF, 0, 0,
                MAX_QP, MAX_QP_WR, 0, MAX_SGE, 16_384, MAX_CQE, MAX_MR - 1, 65_536, MAX_RD_ATOMIC, MAX_RD_ATOMIC,
                8_192, MAX_QP_WR, MAX_SGE, 65_536, MAX_INLINE, "ATOMIC_HCA", 1, 15);
    }

    PortAttributes portAttributes() {
        boolean up = portState == PortState.ACTIVE;
        return new PortAttributes(portState, Mtu.MTU_4096, activeMtu, gidTableLength(), 0x0001_0000, MAX_MSG_SZ,
                0, 0, 0, up ? 5 : 3, "Ethernet", 2, 32, 1);
    }

    // ---- key table (engine lock held) ----

    /** Registers an MR and returns its key: index in the upper 24 bits, random variant in the low 8. */
    int addMr(SoftMr mr) {
        for (int tries = 0; tries < MAX_MR; tries++) {
            int idx = nextMrIndex;
            nextMrIndex = nextMrIndex + 1 >= MAX_MR ? 1 : nextMrIndex + 1;
            if (mrs[idx] == null) {
                mrs[idx] = mr;
                return (idx << 8) | keyVariants.nextInt(256);
            }
        }
        throw new VerbsException(Errno.ENOMEM, "MR table full (" + (MAX_MR - 1) + " regions)");
    }

    void removeMr(int key) {
        int idx = key >>> 8;
        if (idx > 0 && idx < MAX_MR) {
            mrs[idx] = null;
        }
    }

    /** @return the MR with exactly this key, or null */
    SoftMr lookupMr(int key) {
        int idx = key >>> 8;
        if (idx <= 0 || idx >= MAX_MR) {
            return null;
        }
        SoftMr mr = mrs[idx];
        return mr != null && mr.key == key ? mr : null;
    }

    /**
     * Inline data given by address only (verbs read it without an L_Key check): the registered region
     * of the same context (process) that holds it. A linear scan, off the fast path, which first tries
     * the L_Key as a hint.
     *
     * @return the MR, or null
     */
    SoftMr findMrByAddress(SoftContext ctx, long addr, long len) {
        for (SoftMr mr : mrs) {
            if (mr != null && mr.pd.ctx == ctx && mr.contains(addr, len)) {
                return mr;
            }
        }
        return null;
    }

    // ---- QP table (engine lock held) ----

    int addQp(SoftQp qp) {
        for (int tries = 0; tries < MAX_QP; tries++) {
            int qpn = nextQpn;
            nextQpn = nextQpn + 1 >= qps.length ? FIRST_QPN : nextQpn + 1;
            if (qps[qpn] == null) {
                qps[qpn] = qp;
                return qpn;
            }
        }
        throw new VerbsException(Errno.ENOMEM, "QP table full (" + MAX_QP + " QPs)");
    }

    void removeQp(int qpn) {
        qps[qpn] = null;
    }

    // ---- receive dispatcher (rxe_recv.c); engine lock held ----

    void receive(Packet p) {
        count(SoftCounter.RCVD_PKTS);
        int mask = p.mask();
        if (mask == 0) {
            count(SoftCounter.DROP_MALFORMED);
            return;
        }
        int qpn = p.destQpn;
        SoftQp qp = qpn > 0 && qpn < qps.length ? qps[qpn] : null;
        if (qp == null) {
            count(SoftCounter.DROP_NO_QP);
            return;
        }
        // rxe check_type_state: the transport bits of the opcode must match the QP type.
        int transport = p.opcode & 0xE0;
        int expected = switch (qp.type) {
            case RC -> Opcodes.RC;
            case UC -> Opcodes.UC;
            case UD -> Opcodes.UD;
        };
        if (transport != expected) {
            count(SoftCounter.DROP_BAD_STATE);
            return;
        }
        if ((mask & Opcodes.M_REQ) != 0) {
            qp.responder.onRequest(p);
        } else {
            qp.completer.onResponse(p);
        }
    }

    @Override
    public String toString() {
        return "SoftDevice{" + name + ", gid=" + gid0 + ", mrs=" + Arrays.stream(mrs).filter(m -> m != null).count() + '}';
    }
}
