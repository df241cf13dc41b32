// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiPredicate;
import java.util.function.Consumer;

import org.rdma4j.common.ManualClock;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * Two in-process soft devices, each with a driven {@link UserCm} whose MADs go through a {@link Tap} that
 * records them and can lose, duplicate or hold them: the rig of the IB CM protocol tests and the lossy
 * properties. Host A (index 0) connects, host B (index 1) listens.
 */
final class CmPair implements AutoCloseable {
    static final Duration T = Duration.ofSeconds(2);

    /** A MAD seen leaving a host. */
    record Sent(int attrId, byte[] mad) {
    }

    /** Records, and applies {@link #drop}/{@link #duplicate}/{@link #hold} rules to, a host's outgoing MADs. */
    static final class Tap implements MadTap {
        final List<Sent> sent = new ArrayList<>();
        /** (attribute ID, how many of that attribute were sent before this one) -> lose it. */
        volatile BiPredicate<Integer, Integer> drop = (a, n) -> false;
        volatile BiPredicate<Integer, Integer> duplicate = (a, n) -> false;
        volatile BiPredicate<Integer, Integer> hold = (a, n) -> false;
        final List<Runnable> held = new ArrayList<>();
        /** Attribute ID -> how many of it reached the wire (held ones when released). */
        final java.util.Map<Integer, Integer> delivered = new java.util.HashMap<>();
        long lost;

        @Override
        public void send(MadPort port, byte[] mad, CmAv av, Consumer<byte[]> transmit) {
            int attr = Mad.attrId(mad);
            int n = (int) sent.stream().filter(s -> s.attrId() == attr).count();
            sent.add(new Sent(attr, mad.clone()));
            if (drop.test(attr, n)) {
                lost++;
                return;
            }
            if (hold.test(attr, n)) {
                byte[] copy = mad.clone();
                held.add(() -> {
                    delivered.merge(attr, 1, Integer::sum);
                    transmit.accept(copy);
                });
                return;
            }
            delivered.merge(attr, 1, Integer::sum);
            transmit.accept(mad);
            if (duplicate.test(attr, n)) {
                transmit.accept(mad);
            }
        }

        int deliveredOf(int attrId) {
            return delivered.getOrDefault(attrId, 0);
        }

        List<Sent> of(int attrId) {
            return sent.stream().filter(s -> s.attrId() == attrId).toList();
        }
    }

    final ManualClock clock = new ManualClock();
    final SoftFabric fabric;
    final SoftDevice[] dev = new SoftDevice[2];
    final Tap[] tap = {new Tap(), new Tap()};
    final UserCm[] cm = new UserCm[2];
    final CmEventChannel[] ch = new CmEventChannel[2];
    final Arena arena = Arena.ofShared();
    private final List<CmId> ids = new ArrayList<>();
    private final List<AutoCloseable> verbs = new ArrayList<>();
    private final List<ProtectionDomain> pds = new ArrayList<>();
    final int port = 7174;

    CmPair(long seed) {
        fabric = new SoftFabric(clock);
        for (int i = 0; i < 2; i++) {
            dev[i] = fabric.addDevice("soft" + i);
            cm[i] = UserCm.builder().device(dev[i]).clock(clock).driven(true).seed(seed + i).tap(tap[i]).build();
            ch[i] = RdmaCm.of(cm[i]).createEventChannel();
        }
    }

    InetAddress ip(int host) {
        return cm[host].addresses().getFirst().address();
    }

    InetSocketAddress at(int host, int p) {
        return new InetSocketAddress(ip(host), p);
    }

    /** Processes what both CMs have, a bounded number of rounds. */
    void settle() {
        for (int i = 0; i < 50; i++) {
            boolean any = cm[0].progress() | cm[1].progress();
            if (!any && i > 2) {
                return;
            }
        }
    }

    /** Moves the clock, then settles. */
    void advance(Duration d) {
        clock.advance(d.toNanos());
        settle();
    }

    /** Moves the clock in steps of {@code step} up to {@code total}, settling after each. */
    void advance(Duration total, Duration step) {
        for (long t = 0; t < total.toNanos(); t += step.toNanos()) {
            advance(step);
        }
    }

    /** Releases the MADs held by host {@code h}'s tap. */
    void release(int h) {
        List<Runnable> r = new ArrayList<>(tap[h].held);
        tap[h].held.clear();
        cm[h].runLocked(() -> r.forEach(Runnable::run));
        settle();
    }

    /** @return the next event of host {@code h}, or null if none is queued after settling */
    CmEvent poll(int h) {
        settle();
        CmEvent e = ch[h].pollEvent();
        if (e != null && e.type() == CmEventType.CONNECT_REQUEST) {
            ids.add(e.id());
        }
        return e;
    }

    /** @return the next event of host {@code h}; fails if there is none or it has another type */
    CmEvent expect(int h, CmEventType t) {
        CmEvent e = poll(h);
        if (e == null || e.type() != t) {
            if (e != null) {
                e.ack();
            }
            throw new AssertionError("host " + h + ": expected " + t + ", got " + e);
        }
        return e;
    }

    void expectAck(int h, CmEventType t) {
        expect(h, t).ack();
    }

    CmId track(CmId id) {
        ids.add(id);
        return id;
    }

    CmId listen() {
        CmId l = track(ch[1].createId(PortSpace.TCP));
        l.bindAddr(at(1, port));
        l.listen(8);
        return l;
    }

    QueuePair qp(CmId id) {
        ProtectionDomain pd = id.context().allocPd();
        pds.add(pd);
        QueuePair q = id.createQp(pd, new QpInitAttributes().type(id.qpType()).cap(new QpCapabilities(8, 8, 1, 1, 0)));
        MemoryRegion mr = pd.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
        verbs.add(mr);
        return q;
    }

    /** A resolved client of host A with a QP, connecting to B's port with rping's parameters. */
    CmId connect() {
        CmId c = track(ch[0].createId(PortSpace.TCP));
        c.resolveAddr(at(0, 0), at(1, port), T);
        expectAck(0, CmEventType.ADDR_RESOLVED);
        c.resolveRoute(T);
        expectAck(0, CmEventType.ROUTE_RESOLVED);
        qp(c);
        c.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7));
        return c;
    }

    /** B takes the pending request and accepts it. */
    CmId accept() {
        CmEvent req = expect(1, CmEventType.CONNECT_REQUEST);
        CmId s = req.id();
        req.ack();
        qp(s);
        s.accept(new ConnParam().responderResources(1).initiatorDepth(1).rnrRetryCount(7));
        return s;
    }

    /** A connection up on both hosts: A's connecting ID and the ID B accepted. */
    record Conn(CmId client, CmId server) {
    }

    /**
     * {@link #listen}, {@link #connect}, {@link #accept}, then both hosts' ESTABLISHED, acknowledged: the
     * start of every test of what a live connection does. Tap rules set before it apply to the handshake.
     */
    Conn establish() {
        listen();
        CmId c = connect();
        CmId s = accept();
        expectAck(0, CmEventType.ESTABLISHED);
        expectAck(1, CmEventType.ESTABLISHED);
        return new Conn(c, s);
    }

    @Override
    public void close() {
        for (CmId id : ids) {
            try {
                id.destroyQp();
            } catch (RuntimeException ignored) {
                // teardown
            }
        }
        for (AutoCloseable v : verbs) {
            try {
                v.close();
            } catch (Exception ignored) {
                // teardown
            }
        }
        for (int h = 0; h < 2; h++) {
            for (CmEvent e; (e = ch[h].pollEvent()) != null; ) {
                if (e.type() == CmEventType.CONNECT_REQUEST) {
                    ids.add(e.id());
                }
                e.ack();
            }
        }
        RuntimeException first = null;
        for (CmId id : ids) {
            try {
                id.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        if (first != null) {
            throw first;
        }
        pds.forEach(ProtectionDomain::close);
        for (int h = 0; h < 2; h++) {
            ch[h].close();
            cm[h].close();
        }
        arena.close();
        fabric.close();
    }
}
