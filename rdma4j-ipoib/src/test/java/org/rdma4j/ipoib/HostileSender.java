// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * Sends wrong and hostile IPoIB messages to an interface from another host of the fabric, for the namespace
 * test: {@code HostileSender DEV TARGET_IP TARGET_QPN VICTIM_IP VICTIM_QPN [cm]} (with {@code cm}: the
 * connection requests of {@link #connectHostile} instead). Prints "hostile sent N" (or the CM outcomes) once
 * every message has left. What each message must make the receiver count is listed in {@link #EXPECTED}.
 */
public final class HostileSender {
    /** Counter increments the target must show afterwards (unicast messages plus one to the group). */
    static final String EXPECTED = "rx_drop_malformed=3 rx_drop_unknown_type=1 rx_drop_bad_arp=2 rx_drop_arp_spoofed=1";

    private HostileSender() {
    }

    /**
     * @param args device, target IPv4 (RoCE address), target QPN (hex), victim RoCE IPv4, victim QPN (hex)
     * @throws Exception on failure
     */
    public static void main(String[] args) throws Exception {
        Gid target = Gid.ofInetAddress(InetAddress.getByName(args[1]));
        int targetQpn = Integer.parseInt(args[2], 16);
        Gid victim = Gid.ofInetAddress(InetAddress.getByName(args[3]));
        int victimQpn = Integer.parseInt(args[4], 16);
        try (Context ctx = Verbs.device(args[0]).open()) {
            if (args.length > 5 && args[5].equals("cm")) {
                System.out.println("hostile sent " + connectHostile(RdmaCm.system(), ctx.queryGid(1, 0), target,
                        targetQpn));
                System.out.flush();
                return;
            }
            int sent = sendAll(ctx, target, targetQpn, victim, victimQpn, Ipoib.broadcastGidIpv4(Ipoib.DEFAULT_PKEY));
            System.out.println("hostile sent " + sent);
            System.out.flush();
        }
    }

    /**
     * Sends the seven messages.
     *
     * @param ctx       an open device of the fabric (not the target's)
     * @param target    the target interface's GID
     * @param targetQpn its QPN
     * @param victim    GID of the host whose identity the spoofed ARP claims
     * @param victimQpn that host's QPN
     * @param group     the broadcast group
     * @return how many were sent (7)
     */
    static int sendAll(Context ctx, Gid target, int targetQpn, Gid victim, int victimQpn, Gid group) {
        try (Arena arena = Arena.ofShared()) {
            ProtectionDomain pd = ctx.allocPd();
            CompletionQueue cq = ctx.createCq(64, null, 0);
            QueuePair qp = pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(cq).recvCq(cq)
                    .cap(new QpCapabilities(64, 1, 1, 1, 0)));
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(Ipoib.DEFAULT_QKEY));
            qp.modify(new QpAttributes().state(QpState.RTR));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            MemoryRegion mr = pd.regMr(arena.allocate(8 * 256, 64), EnumSet.of(AccessFlag.LOCAL_WRITE));
            AddressHandle toTarget = pd.createAh(new AhAttributes().dgid(target).sgidIndex(0).portNum(1).hopLimit(64).global(true));
            AddressHandle toGroup = pd.createAh(new AhAttributes().dgid(group).sgidIndex(0).portNum(1).hopLimit(64).global(true));
            MemorySegment m = mr.segment();
            ValueLayout.OfShort be16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
            HardwareAddress victimHw = new HardwareAddress(0, victimQpn, victim);
            int sent = 0;
            // 1: two bytes, shorter than the IPoIB header -> malformed
            sent += send(qp, cq, mr, 0, 2, toTarget, targetQpn);
            // 2: IPv4 type, 10 bytes: no room for an IPv4 header -> malformed
            Ipoib.writeHeader(m, 256, Ipoib.TYPE_IPV4);
            sent += send(qp, cq, mr, 256, 14, toTarget, targetQpn);
            // 3: IPv4 header whose total length (1000) exceeds the message -> malformed
            Ipoib.writeHeader(m, 512, Ipoib.TYPE_IPV4);
            m.set(ValueLayout.JAVA_BYTE, 516, (byte) 0x45);
            m.set(be16, 518, (short) 1000);
            sent += send(qp, cq, mr, 512, 4 + 20, toTarget, targetQpn);
            // 4: unknown EtherType -> unknown type
            Ipoib.writeHeader(m, 768, 0x1234);
            sent += send(qp, cq, mr, 768, 4 + 30, toTarget, targetQpn);
            // 5: Ethernet-style ARP (hardware type 1) -> bad ARP
            Ipoib.writeHeader(m, 1024, Ipoib.TYPE_ARP);
            new ArpPacket().wrap(m, 1028).write(ArpPacket.OP_REQUEST, victimHw, 0x0AC8_0002, null, 0x0AC8_0001);
            m.set(be16, 1028, (short) 1);
            sent += send(qp, cq, mr, 1024, 4 + ArpPacket.BYTES, toTarget, targetQpn);
            // 6: ARP claiming to come from the victim's QP and GID (ARP poisoning) -> spoofed
            Ipoib.writeHeader(m, 1280, Ipoib.TYPE_ARP);
            new ArpPacket().wrap(m, 1284).write(ArpPacket.OP_REPLY, victimHw, 0x0AC8_0002, null, 0x0AC8_0001);
            sent += send(qp, cq, mr, 1280, 4 + ArpPacket.BYTES, toTarget, targetQpn);
            // 7: truncated ARP to the broadcast group (every member counts it) -> bad ARP
            Ipoib.writeHeader(m, 1536, Ipoib.TYPE_ARP);
            sent += send(qp, cq, mr, 1536, 4 + 20, toGroup, QueuePair.MULTICAST_QPN);
            toGroup.close();
            toTarget.close();
            mr.close();
            qp.close();
            cq.close();
            pd.close();
            return sent;
        }
    }

    /** Counter increments the target of {@link #connectHostile} must show. */
    static final String EXPECTED_CM = "rx_drop_bad_cm=2 cm_rej_sent=2";
    /** What {@link #connectHostile} sees, attempt by attempt. */
    static final String EXPECTED_CM_OUTCOMES = "REJECTED(consumer defined) REJECTED(consumer defined)"
            + " REJECTED(invalid service ID) ESTABLISHED DISCONNECTED";

    /**
     * Connects to an interface's connected-mode service through the CM as a hostile neighbour would: a REQ with no
     * private data (a receive size of 0), one offering a receive size too small for IPv4 (100), one to the service
     * of another UD QPN (nobody listens: the target's CM refuses it), then a good one that disconnects at once. The
     * target must refuse and count the first two (rx_drop_bad_cm, cm_rej_sent), accept the last and close it on
     * the DREQ.
     *
     * @param cm        the CM of a device of the fabric (not the target's)
     * @param own       that device's GID
     * @param target    the target interface's GID
     * @param targetQpn its UD QPN
     * @return the outcomes, space-separated (see {@link #EXPECTED_CM_OUTCOMES})
     */
    static String connectHostile(RdmaCm cm, Gid own, Gid target, int targetQpn) {
        try (CmEventChannel ch = cm.createEventChannel()) {
            long sid = ConnectedMode.serviceId(targetQpn);
            List<String> out = new ArrayList<>();
            out.add(attempt(ch, own, target, sid, null, false));
            out.add(attempt(ch, own, target, sid, privateData(0x99, 100), false));
            out.add(attempt(ch, own, target, ConnectedMode.serviceId(targetQpn + 1), privateData(0x99, 65524), false));
            out.add(attempt(ch, own, target, sid, privateData(0x99, 65524), true));
            return String.join(" ", out);
        }
    }

    private static byte[] privateData(int qpn, int mtu) {
        return new byte[] {(byte) (qpn >>> 24), (byte) (qpn >>> 16), (byte) (qpn >>> 8), (byte) qpn,
            (byte) (mtu >>> 24), (byte) (mtu >>> 16), (byte) (mtu >>> 8), (byte) mtu};
    }

    private static String attempt(CmEventChannel ch, Gid own, Gid target, long sid, byte[] data, boolean disconnect) {
        try (CmId id = ch.createId(PortSpace.IB, QpType.RC)) {
            id.resolveAddr(new IbSocketAddress(own, 0), new IbSocketAddress(target, sid), Duration.ofSeconds(5));
            expect(ch, CmEventType.ADDR_RESOLVED);
            id.resolveRoute(Duration.ofSeconds(5));
            expect(ch, CmEventType.ROUTE_RESOLVED);
            try (ProtectionDomain pd = id.context().allocPd()) {
                id.createQp(pd, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(1, 1, 1, 1, 0)));
                id.connect(new ConnParam().privateData(data).retryCount(7).rnrRetryCount(7));
                String outcome;
                try (CmEvent e = ch.getEvent(Duration.ofSeconds(20))) {
                    if (e == null) {
                        throw new IllegalStateException("no answer to the REQ");
                    }
                    outcome = e.type() == CmEventType.REJECTED ? "REJECTED(" + e.rejectReason().description() + ")"
                            : e.type().name();
                }
                if (disconnect && outcome.equals("ESTABLISHED")) {
                    id.disconnect();
                    expect(ch, CmEventType.DISCONNECTED);
                    outcome += " DISCONNECTED";
                }
                id.destroyQp();
                return outcome;
            }
        }
    }

    private static void expect(CmEventChannel ch, CmEventType type) {
        try (CmEvent e = ch.getEvent(Duration.ofSeconds(20))) {
            if (e == null || e.type() != type) {
                throw new IllegalStateException("expected " + type + ", got " + (e == null ? "nothing" : e));
            }
        }
    }

    /**
     * Sends an ARP request to an interface from a UD QP that then disappears, its hardware address offering
     * connected mode: a neighbour that will never answer the target's connection requests.
     *
     * @param ctx       an open device of the fabric
     * @param target    the target's GID
     * @param targetQpn its UD QPN
     * @param ownIp     the IPv4 address the request claims
     * @param targetIp  the target's IPv4 address
     */
    static void announceMuteConnectedNeighbour(Context ctx, Gid target, int targetQpn, int ownIp, int targetIp) {
        try (Arena arena = Arena.ofShared()) {
            Host h = new Host(ctx, arena, target);
            HardwareAddress me = new HardwareAddress(HardwareAddress.FLAG_RC, h.qp.qpNum(), ctx.queryGid(1, 0));
            Ipoib.writeHeader(h.mr.segment(), 0, Ipoib.TYPE_ARP);
            new ArpPacket().wrap(h.mr.segment(), 4).write(ArpPacket.OP_REQUEST, me, ownIp, null, targetIp);
            h.send(0, 4 + ArpPacket.BYTES, targetQpn);
            h.close();
        }
    }

    /** A UD QP with a registered buffer and an address handle to one target. */
    private static final class Host {
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final QueuePair qp;
        final MemoryRegion mr;
        final AddressHandle ah;

        Host(Context ctx, Arena arena, Gid target) {
            pd = ctx.allocPd();
            cq = ctx.createCq(64, null, 0);
            qp = pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(cq).recvCq(cq)
                    .cap(new QpCapabilities(64, 1, 1, 1, 0)));
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(Ipoib.DEFAULT_QKEY));
            qp.modify(new QpAttributes().state(QpState.RTR));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            mr = pd.regMr(arena.allocate(8 * 512, 64), EnumSet.of(AccessFlag.LOCAL_WRITE));
            ah = pd.createAh(new AhAttributes().dgid(target).sgidIndex(0).portNum(1).hopLimit(64).global(true));
        }

        int send(long off, int len, int qpn) {
            return HostileSender.send(qp, cq, mr, off, len, ah, qpn);
        }

        void close() {
            ah.close();
            mr.close();
            qp.close();
            cq.close();
            pd.close();
        }
    }

    private static int send(QueuePair qp, CompletionQueue cq, MemoryRegion mr, long off, int len, AddressHandle ah, int qpn) {
        SendWorkRequest wr = new SendWorkRequest(1).wrId(off).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(mr.address() + off, len, mr.lkey()).ah(ah).remoteQpn(qpn).remoteQkey(Ipoib.DEFAULT_QKEY);
        if (!qp.postSend(wr)) {
            throw new IllegalStateException("post failed: " + wr.postError());
        }
        WorkCompletion wc = new WorkCompletion();
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (!cq.poll(wc)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no send completion");
            }
            Thread.onSpinWait();
        }
        if (wc.status() != WcStatus.SUCCESS) {
            throw new IllegalStateException("send failed: " + wc);
        }
        return 1;
    }
}
