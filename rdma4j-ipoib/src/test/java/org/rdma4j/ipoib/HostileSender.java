// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.EnumSet;

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

/**
 * Sends wrong and hostile IPoIB messages to an interface from another host of the fabric, for the namespace
 * test: {@code HostileSender DEV TARGET_IP TARGET_QPN VICTIM_IP VICTIM_QPN [cm]} (with {@code cm}: the
 * connection messages of {@link #sendCm} instead). Prints "hostile sent N" once
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
                System.out.println("hostile sent " + sendCm(ctx, target, targetQpn, victimQpn));
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

    /** Counter increments the target of {@link #sendCm} must show. */
    static final String EXPECTED_CM = "rx_drop_bad_cm=9";

    /**
     * Sends nine wrong connection messages (connected mode) to an interface's UD QP: each must be dropped and
     * counted as rx_drop_bad_cm, and none may open a connection.
     *
     * @param ctx       an open device of the fabric (not the target's)
     * @param target    the target interface's GID
     * @param targetQpn its UD QPN
     * @param victimQpn a QPN the spoofed request claims as its sender (ours + 1 if it is ours)
     * @return how many were sent (9)
     */
    static int sendCm(Context ctx, Gid target, int targetQpn, int victimQpn) {
        try (Arena arena = Arena.ofShared()) {
            Host h = new Host(ctx, arena, target);
            MemorySegment m = h.mr.segment();
            int me = h.qp.qpNum();
            long sid = CmMessage.serviceId(targetQpn);
            int sent = 0;
            long off = 0;
            // 1: ten bytes, no room for a message -> length
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            sent += h.send(off, 4 + 10, targetQpn);
            // 2: version 2
            off += 256;
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            CmMessage.write(m, off + 4, CmMessage.OP_REQ, 7, 0, sid, 0x99, 1, me, 65524);
            m.set(ValueLayout.JAVA_BYTE, off + 4, (byte) 2);
            sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            // 3: unknown operation 9
            off += 256;
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            CmMessage.write(m, off + 4, 9, 7, 0, sid, 0x99, 1, me, 65524);
            sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            // 4: a REQ for another interface's service (UD QPN + 1)
            off += 256;
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            CmMessage.write(m, off + 4, CmMessage.OP_REQ, 7, 0, CmMessage.serviceId(targetQpn + 1), 0x99, 1, me, 65524);
            sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            // 5: a REQ whose private data claims another sender's UD QPN (spoofed)
            off += 256;
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            CmMessage.write(m, off + 4, CmMessage.OP_REQ, 7, 0, sid, 0x99, 1, victimQpn != me ? victimQpn : me + 1, 65524);
            sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            // 6: a REQ offering a receive MTU too small for IPv4 (100)
            off += 256;
            Ipoib.writeHeader(m, off, CmMessage.TYPE);
            CmMessage.write(m, off + 4, CmMessage.OP_REQ, 7, 0, sid, 0x99, 1, me, 100);
            sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            // 7, 8, 9: REP, RTU, REJ for connections that do not exist
            for (int op : new int[] {CmMessage.OP_REP, CmMessage.OP_RTU, CmMessage.OP_REJ}) {
                off += 256;
                Ipoib.writeHeader(m, off, CmMessage.TYPE);
                CmMessage.write(m, off + 4, op, 7, 0x1234_5678, sid, 0x99, 1, me, 65524);
                sent += h.send(off, 4 + CmMessage.BYTES, targetQpn);
            }
            h.close();
            return sent;
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
