// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.examples.kv;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.EndpointOptions;
import org.rdma4j.verbs.cm.RdmaEndpoint;
import org.rdma4j.verbs.cm.RdmaServer;

/**
 * The key-value server of the example: accepts connections with {@link RdmaServer}, lets clients read its
 * table directly (RDMA READ, no server CPU) and applies their updates (SEND). One PD per device, shared
 * by every connection on it, so one registration of the table serves them all; a virtual thread per
 * connection. The connection setup is entirely the CM's: no addresses, QP numbers or keys are exchanged
 * by hand, the table's address and rkey ride in the accept's private data.
 */
public final class KvServer implements AutoCloseable {
    private static final int RECVS = 8;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment table;
    private final int slots;
    private final Map<Context, Device> devices = new ConcurrentHashMap<>();
    private final RdmaServer server;
    private final Thread acceptor;
    private final AtomicInteger live = new AtomicInteger();
    private final Set<Thread> workers = ConcurrentHashMap.newKeySet();
    private final Object writeLock = new Object();
    private volatile boolean closed;

    /** A device's PD and its registration of the table. */
    private record Device(ProtectionDomain pd, MemoryRegion table) {
    }

    /** A connection's buffers. */
    private record Conn(MemoryRegion recv, MemoryRegion send) {
    }

    private KvServer(InetSocketAddress address, int slots, EndpointOptions base) {
        this.slots = slots;
        this.table = arena.allocate((long) slots * KvProtocol.SLOT, 64);
        EndpointOptions o = base.copy().recvQueueDepth(RECVS).sendQueueDepth(4).readDepth(16)
                .protectionDomains(ctx -> device(ctx).pd())
                .beforeConnect(this::prepare);
        this.server = RdmaServer.bind(address, o);
        this.acceptor = Thread.ofPlatform().name("kv-accept").daemon().start(this::acceptLoop);
    }

    /**
     * Starts a server.
     *
     * @param address where to listen (port 0: any)
     * @param slots   the table's size
     * @param options the connections' options (the CM to use, timeouts)
     * @return the running server
     */
    public static KvServer start(InetSocketAddress address, int slots, EndpointOptions options) {
        return new KvServer(address, slots, options);
    }

    /** {@return where it listens} */
    public SocketAddress address() {
        return server.localAddress();
    }

    /** {@return the connections being served} */
    public int connections() {
        return live.get();
    }

    /**
     * Waits until {@code n} connections are being served.
     *
     * @param n       the count
     * @param timeout how long
     * @return whether it came to that
     * @throws InterruptedException if interrupted
     */
    public boolean awaitConnections(int n, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (live) {
            while (live.get() != n) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                live.wait(Math.max(1, left / 1_000_000));
            }
            return true;
        }
    }

    private void changed(int delta) {
        synchronized (live) {
            live.addAndGet(delta);
            live.notifyAll();
        }
    }

    private Device device(Context ctx) {
        return devices.computeIfAbsent(ctx, c -> {
            ProtectionDomain pd = c.allocPd();
            return new Device(pd, pd.regMr(table, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_READ)));
        });
    }

    /** Before the accept: buffers, receives posted, the table's location as the accept's private data. */
    private void prepare(RdmaEndpoint ep) {
        Device d = device(ep.context());
        MemoryRegion recv = ep.closeWith(ep.pd().regMr(arena.allocate((long) RECVS * KvProtocol.MSG, 64),
                AccessFlag.of(AccessFlag.LOCAL_WRITE)));
        MemoryRegion send = ep.closeWith(ep.pd().regMr(arena.allocate(KvProtocol.MSG, 64), AccessFlag.of()));
        for (int i = 0; i < RECVS; i++) {
            post(ep, recv, i);
        }
        MemorySegment info = MemorySegment.ofArray(new byte[KvProtocol.TABLE_INFO]);
        info.set(KvProtocol.LONG_BE, 0, d.table().address());
        info.set(KvProtocol.INT_BE, 8, d.table().rkey());
        info.set(KvProtocol.INT_BE, 12, slots);
        ep.privateData(info.toArray(ValueLayout.JAVA_BYTE));
        ep.cmId().attach(new Conn(recv, send));
    }

    private static void post(RdmaEndpoint ep, MemoryRegion recv, int i) {
        KvProtocol.recv(ep.qp(), new RecvWorkRequest().wrId(i).singleSge(recv.address() + (long) i * KvProtocol.MSG,
                KvProtocol.MSG, recv.lkey()));
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                RdmaEndpoint ep = server.accept(Duration.ofMillis(200));
                if (ep != null) {
                    changed(1);
                    workers.add(Thread.ofVirtual().name("kv-" + ep.remoteAddress()).start(() -> serve(ep)));
                }
            } catch (VerbsException e) {
                if (!closed) {
                    throw e;
                }
            }
        }
    }

    private void serve(RdmaEndpoint ep) {
        Conn c = (Conn) ep.cmId().attachment();
        WorkCompletion wc = new WorkCompletion();
        try {
            while (!closed) {
                if (KvProtocol.await(ep.recvCq(), wc, Duration.ofDays(1), () -> !closed && ep.isConnected()) == null) {
                    break;
                }
                int i = (int) wc.wrId();
                byte status = apply(c.recv().segment().asSlice((long) i * KvProtocol.MSG, KvProtocol.MSG), wc.byteLen());
                post(ep, c.recv(), i);
                c.send().segment().set(ValueLayout.JAVA_BYTE, 0, status);
                KvProtocol.send(ep.qp(), new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                        .singleSge(c.send().address(), 1, c.send().lkey()));
                if (KvProtocol.await(ep.sendCq(), wc, Duration.ofSeconds(5), () -> !closed && ep.isConnected()) == null) {
                    break;
                }
            }
        } catch (IllegalStateException | VerbsException e) {
            // the connection broke (flushed receives after the peer left): drop it
        } finally {
            ep.close();
            changed(-1);
            workers.remove(Thread.currentThread());
        }
    }

    private byte apply(MemorySegment m, int len) {
        byte op = m.get(ValueLayout.JAVA_BYTE, 0);
        int kl = m.get(ValueLayout.JAVA_BYTE, 1) & 0xFF;
        int vl = m.get(ValueLayout.JAVA_BYTE, 2) & 0xFF;
        if (len != KvProtocol.MSG || kl == 0 || kl > KvProtocol.MAX_KEY || vl > KvProtocol.MAX_VALUE) {
            return KvProtocol.BAD_REQUEST;
        }
        byte[] key = KvProtocol.bytes(m, 4, kl);
        long at = (long) KvProtocol.slotOf(key, slots) * KvProtocol.SLOT;
        synchronized (writeLock) {
            byte[] cur = KvProtocol.bytes(table, at, KvProtocol.SLOT);
            int ckl = cur[4] & 0xFF;
            boolean same = ckl == kl && java.util.Arrays.equals(cur, 6, 6 + kl, key, 0, kl);
            if (op == KvProtocol.PUT) {
                if (ckl != 0 && !same) {
                    return KvProtocol.COLLISION;
                }
                byte[] img = KvProtocol.slotImage(key, KvProtocol.bytes(m, 4 + KvProtocol.MAX_KEY, vl));
                MemorySegment.copy(img, 0, table, ValueLayout.JAVA_BYTE, at, img.length);
                return KvProtocol.OK;
            }
            if (op == KvProtocol.DELETE) {
                if (!same) {
                    return KvProtocol.NOT_FOUND;
                }
                table.asSlice(at, KvProtocol.SLOT).fill((byte) 0);
                return KvProtocol.OK;
            }
            return KvProtocol.BAD_REQUEST;
        }
    }

    /** Stops accepting, disconnects every client, frees the table. */
    @Override
    public void close() {
        closed = true;
        server.close();
        try {
            acceptor.join(Duration.ofSeconds(5));
            for (Thread t : workers) {
                t.join(Duration.ofSeconds(5));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (Device d : devices.values()) {
            d.table().close();
            d.pd().close();
        }
        arena.close();
    }
}
