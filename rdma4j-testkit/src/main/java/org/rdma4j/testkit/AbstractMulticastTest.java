// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Set;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * UD multicast (ibv_attach_mcast / ibv_detach_mcast; IBA 10.5, rxe_mcast.c and rxe_rcv_mcast_pkt): a
 * send to a group GID with remote QPN 0xFFFFFF reaches every QP attached to the group on every device,
 * each checked for its Q_Key; attaching is for UD QPs and multicast GIDs only.
 *
 * <p>Groups are IPv4-mapped (::ffff:239.x.y.z), the form RoCEv2 devices carry in IPv4, so the suite runs
 * unchanged on devices with IB-style and with IP GIDs.
 */
public abstract class AbstractMulticastTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractMulticastTest() {
    }

    private static final int GRH = 40;
    private static final int BUF = 4096;

    /**
     * {@return a multicast GID distinct for each n: ::ffff:239.77.0.n}
     *
     * @param n a small number
     */
    protected Gid group(int n) {
        Gid g = new Gid(0, 0x0000_FFFF_EF4D_0000L | (n & 0xFFFF));
        track(fabric.joinIpMulticast(g)); // what rdma_cm's join adds on RoCEv2; nothing on the soft device
        return g;
    }

    /**
     * The first source GID of the group's family. rxe builds the IP header from the source GID's type
     * (rxe_av.c rxe_av_fill_ip_info: rdma_gid_attr_network_type), so an IPv4-mapped group needs an IPv4
     * source; kernel rxe's GID 0 is the IPv6 link-local address, the soft device's the IPv4 one.
     */
    private static int sgidIndexOfFamily(Context ctx, Gid group) {
        int n = ctx.queryPort(1).gidTblLen();
        for (int i = 0; i < n; i++) {
            Gid g = ctx.queryGid(1, i);
            if (!g.equals(Gid.ZERO) && g.isIpv4Mapped() == group.isIpv4Mapped()) {
                return i;
            }
        }
        return 0;
    }

    private Endpoint ud(Context ctx, int qkey) {
        Endpoint e = players().endpoint(ctx, QpConfig.ud().qkey(qkey));
        e.qp().modify(Players.initAttrs(e.config(), Set.of()));
        e.qp().modify(Players.rtrAttrs(e.config(), Gid.ZERO, 0, 0, Set.of()));
        e.qp().modify(Players.rtsAttrs(e.config(), Set.of()));
        return e;
    }

    private Endpoint ud(Context ctx) {
        return ud(ctx, QpConfig.DEFAULT_QKEY);
    }

    /** Attaches and registers the detach to run before the QP is destroyed (the leak check needs it). */
    private void attach(QueuePair qp, Gid g) {
        qp.attachMcast(g, 0);
        track(() -> qp.detachMcast(g, 0));
    }

    private MemoryRegion armed(Endpoint e, long wrId) {
        MemoryRegion mr = regAll(e.pd(), BUF);
        postRecv(e.qp(), wrId, mr, 0, GRH + 1024);
        return mr;
    }

    private void sendToGroup(Endpoint from, Gid g, long wrId, byte[] data, int qkey) {
        MemoryRegion mr = regAll(from.pd(), BUF);
        write(mr.segment(), 0, data);
        AddressHandle ah = track(from.pd().createAh(Players.av(g).sgidIndex(sgidIndexOfFamily(from.ctx(), g))));
        SendWorkRequest wr = sendWr(wrId, WrOpcode.SEND, mr, 0, data.length).ah(ah)
                .remoteQpn(QueuePair.MULTICAST_QPN).remoteQkey(qkey);
        postSend(from.qp(), wr);
        assertWc(pollOne(from.sendCq()), WcStatus.SUCCESS, wrId);
    }

    private void assertReceived(Endpoint e, long wrId, MemoryRegion mr, byte[] data, int srcQpn) {
        WorkCompletion wc = pollOne(e.recvCq());
        assertWc(wc, WcStatus.SUCCESS, wrId);
        assertEquals(GRH + data.length, wc.byteLen(), "byte_len = 40 + payload");
        assertEquals(srcQpn, wc.srcQp(), "src_qp is the sender's QP");
        assertBytes(data, mr.segment(), GRH, "payload of the group's message");
    }

    /** Should deliver one copy to every attached QP on every device. */
    @Test
    public void shouldDeliverOneCopyToEveryAttachedQpOnEveryDevice() {
        Gid g = group(1);
        Endpoint sender = ud(ctxA);
        Endpoint localMember = ud(ctxA);
        Endpoint remote1 = ud(ctxB);
        Endpoint remote2 = ud(ctxB);
        Endpoint outsider = ud(ctxB);
        attach(localMember.qp(), g);
        attach(remote1.qp(), g);
        attach(remote2.qp(), g);
        remote2.qp().attachMcast(g, 0); // rxe_attach_mcg: attaching again is a no-op, not a second copy
        MemoryRegion m0 = armed(localMember, 10);
        MemoryRegion m1 = armed(remote1, 11);
        MemoryRegion m2 = armed(remote2, 12);
        postRecv(remote2.qp(), 13, m2, 2048, GRH + 1024);
        armed(outsider, 14);
        byte[] data = pattern(300, 7);
        sendToGroup(sender, g, 1, data, QpConfig.DEFAULT_QKEY);
        assertReceived(localMember, 10, m0, data, sender.qpNum());
        assertReceived(remote1, 11, m1, data, sender.qpNum());
        assertReceived(remote2, 12, m2, data, sender.qpNum());
        assertNoCompletion(remote2.recvCq());
        assertNoCompletion(outsider.recvCq());
    }

    /** Should deliver to the sending QP when it is attached. */
    @Test
    public void shouldDeliverToTheSendingQpWhenItIsAttached() {
        // rxe_rcv_mcast_pkt delivers to every QP on the group's list, the sender's included (the IP stack
        // loops the datagram back); IPoIB filters its own packets (ipoib_ib_handle_rx_wc)
        Gid g = group(2);
        Endpoint sender = ud(ctxA);
        Endpoint peer = ud(ctxB);
        attach(sender.qp(), g);
        attach(peer.qp(), g);
        MemoryRegion ms = armed(sender, 20);
        MemoryRegion mp = armed(peer, 21);
        byte[] data = pattern(64, 3);
        sendToGroup(sender, g, 2, data, QpConfig.DEFAULT_QKEY);
        assertReceived(sender, 20, ms, data, sender.qpNum());
        assertReceived(peer, 21, mp, data, sender.qpNum());
    }

    /** Should drop for member whose Q_Key differs. */
    @Test
    public void shouldDropForMemberWhoseQkeyDiffers() {
        Gid g = group(3);
        Endpoint sender = ud(ctxA);
        Endpoint good = ud(ctxB);
        Endpoint otherKey = ud(ctxB, QpConfig.DEFAULT_QKEY + 1);
        attach(good.qp(), g);
        attach(otherKey.qp(), g);
        MemoryRegion mg = armed(good, 30);
        armed(otherKey, 31);
        byte[] data = pattern(16, 1);
        sendToGroup(sender, g, 3, data, QpConfig.DEFAULT_QKEY);
        // rxe_rcv_mcast_pkt runs check_keys per member: a wrong Q_Key skips that member only
        assertReceived(good, 30, mg, data, sender.qpNum());
        assertNoCompletion(otherKey.recvCq());
    }

    /** Should receive from each group a QP joined. */
    @Test
    public void shouldReceiveFromEachGroupAQpJoined() {
        Gid g1 = group(4);
        Gid g2 = group(5);
        Endpoint sender = ud(ctxA);
        Endpoint member = ud(ctxB);
        attach(member.qp(), g1);
        attach(member.qp(), g2);
        MemoryRegion m = armed(member, 40);
        postRecv(member.qp(), 41, m, 2048, GRH + 1024);
        byte[] a = pattern(20, 4);
        byte[] b = pattern(40, 5);
        sendToGroup(sender, g1, 4, a, QpConfig.DEFAULT_QKEY);
        assertReceived(member, 40, m, a, sender.qpNum());
        sendToGroup(sender, g2, 5, b, QpConfig.DEFAULT_QKEY);
        WorkCompletion wc = pollOne(member.recvCq());
        assertWc(wc, WcStatus.SUCCESS, 41);
        assertBytes(b, m.segment(), 2048 + GRH, "the second group's message");
    }

    /** Should stop delivering after detach. */
    @Test
    public void shouldStopDeliveringAfterDetach() {
        Gid g = group(6);
        Endpoint sender = ud(ctxA);
        Endpoint stays = ud(ctxB);
        Endpoint leaves = ud(ctxB);
        attach(stays.qp(), g);
        leaves.qp().attachMcast(g, 0);
        leaves.qp().detachMcast(g, 0);
        MemoryRegion ms = armed(stays, 60);
        armed(leaves, 61);
        byte[] data = pattern(10, 6);
        sendToGroup(sender, g, 6, data, QpConfig.DEFAULT_QKEY);
        assertReceived(stays, 60, ms, data, sender.qpNum());
        assertNoCompletion(leaves.recvCq());
    }

    /** Should deliver nothing to a device that left the group. */
    @Test
    public void shouldDeliverNothingToADeviceThatLeftTheGroup() {
        Gid g = group(7);
        Endpoint sender = ud(ctxA);
        Endpoint member = ud(ctxB);
        member.qp().attachMcast(g, 0);
        member.qp().detachMcast(g, 0);
        armed(member, 70);
        sendToGroup(sender, g, 7, pattern(10, 7), QpConfig.DEFAULT_QKEY);
        assertNoCompletion(member.recvCq());
    }

    /** Should refuse attach on connected QPs. */
    @Test
    public void shouldRefuseAttachOnConnectedQps() {
        QueuePair rc = players().rc(QpConfig.rc()).local().qp();
        // ib_attach_mcast: "if (qp->qp_type != IB_QPT_UD) return -EINVAL"
        assertVerbsError(Errno.EINVAL, () -> rc.attachMcast(group(8), 0));
        assertVerbsError(Errno.EINVAL, () -> rc.detachMcast(group(8), 0));
    }

    /** Should refuse unicast GIDs and detach of unjoined group. */
    @Test
    public void shouldRefuseUnicastGidsAndDetachOfUnjoinedGroup() {
        Endpoint e = ud(ctxA);
        // ib_attach_mcast: rdma_is_multicast_addr must hold
        assertVerbsError(Errno.EINVAL, () -> e.qp().attachMcast(e.gid(), 0));
        assertVerbsError(Errno.EINVAL, () -> e.qp().attachMcast(new Gid(0, 0x0000_FFFF_0A00_0001L), 0));
        assertVerbsError(Errno.EINVAL, () -> e.qp().attachMcast(null, 0));
        // rxe_detach_mcast: no such group, or this QP is not a member
        assertVerbsError(Errno.EINVAL, () -> e.qp().detachMcast(group(9), 0));
        Endpoint other = ud(ctxA);
        attach(other.qp(), group(9));
        assertVerbsError(Errno.EINVAL, () -> e.qp().detachMcast(group(9), 0));
    }

    /**
     * Should refuse to destroy an attached QP.
     *
     * @throws Exception when the device fails the test unexpectedly
     */
    @Test
    public void shouldRefuseToDestroyAnAttachedQp() throws Exception {
        Endpoint e = ud(ctxB);
        Gid g = group(10);
        e.qp().attachMcast(g, 0);
        // ib_attach_mcast raises the QP's usecnt; ib_destroy_qp_user refuses a busy QP
        assertVerbsError(Errno.EBUSY, e.qp()::close);
        e.qp().detachMcast(g, 0);
        release(e.qp());
    }
}
