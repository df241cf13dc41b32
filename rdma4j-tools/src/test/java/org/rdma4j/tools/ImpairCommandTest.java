// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.rdma4j.libc.Libc;

/**
 * {@code rdma4j impair} on a real netfilter queue: a network namespace of its own (root, iproute2 and
 * iptables; skipped without them), an iptables rule that queues UDP to one port on its loopback, the
 * command running in a thread inside the namespace, and datagrams with sequence numbers and send times
 * sent and received there. Checks each impairment against what arrives, and that a seed repeats its
 * losses.
 */
class ImpairCommandTest {
    private static final int PORT = 47_913;
    private static final int QUEUE = 3;
    private static final int N = 2000;
    private static String ns;

    @BeforeAll
    static void namespace() throws Exception {
        Assumptions.assumeTrue("root".equals(System.getProperty("user.name")), "needs root");
        Assumptions.assumeTrue(run("iptables", "-V") == 0, "needs iptables (.ci/run installs it)");
        ns = "lossrec-imp-" + ProcessHandle.current().pid();
        Assumptions.assumeTrue(run("ip", "netns", "add", ns) == 0, "cannot create a network namespace");
        assertEquals(0, run("ip", "-n", ns, "link", "set", "lo", "up"));
        assertEquals(0, run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-p", "udp", "--dport",
                Integer.toString(PORT), "-j", "NFQUEUE", "--queue-num", Integer.toString(QUEUE)));
    }

    @AfterAll
    static void removeNamespace() throws Exception {
        if (ns != null) {
            run("ip", "netns", "del", ns);
        }
    }

    /** What one run saw. */
    record Seen(List<Integer> order, Map<Integer, Integer> copies, int intact, int damaged, long minDelayNs,
                String report) {
    }

    @Test
    void lossIsSeededAndCounted() throws Exception {
        Seen a = impaired(9, "loss 30%");
        Seen b = impaired(9, "loss 30%");
        int got = a.copies().size();
        assertTrue(Math.abs(got - 0.7 * N) < 0.05 * N, got + " of " + N + " arrived\n" + a.report());
        assertEquals(got, a.intact(), "no impairment but loss");
        assertEquals(new TreeSet<>(a.copies().keySet()), new TreeSet<>(b.copies().keySet()),
                "the same seed loses the same packets");
        assertTrue(a.report().contains(N + " packets, " + (N - got) + " lost"), a.report());
        Seen c = impaired(10, "loss 30%");
        assertNotEquals(new TreeSet<>(a.copies().keySet()), new TreeSet<>(c.copies().keySet()));
    }

    @Test
    void duplicationDeliversEachPacketTwiceUnchanged() throws Exception {
        Seen s = impaired(1, "duplicate 100%");
        assertEquals(N, s.copies().size(), s.report());
        assertTrue(s.copies().values().stream().allMatch(n -> n == 2), "each twice: " + s.report());
        assertEquals(2 * N, s.intact());
        assertTrue(s.report().contains((2 * N) + " packets, 0 lost, " + N + " duplicated"), s.report());
    }

    @Test
    void corruptionDamagesEveryPacket() throws Exception {
        // One bit flipped per packet: the UDP or IP checksum drops it, or it arrives changed.
        Seen s = impaired(1, "corrupt 100%");
        assertEquals(0, s.intact(), s.report());
        assertTrue(s.report().contains(N + " corrupted"), s.report());
    }

    @Test
    void delayHoldsEveryPacketInOrder() throws Exception {
        Seen s = impaired(1, "delay 30ms");
        assertEquals(N, s.intact(), s.report());
        assertTrue(s.minDelayNs() >= 30_000_000, "earliest arrival " + s.minDelayNs() / 1000 + " us after sending");
        List<Integer> sorted = new ArrayList<>(s.order());
        sorted.sort(null);
        assertEquals(sorted, s.order(), "a plain delay keeps the order");
    }

    @Test
    void reorderSendsSomeAheadOfTheDelayedOnes() throws Exception {
        Seen s = impaired(1, "delay 20ms reorder 30%");
        assertEquals(N, s.intact(), s.report());
        int overtaken = 0; // arrived after a packet sent later
        int max = -1;
        for (int seq : s.order()) {
            if (seq < max) {
                overtaken++;
            }
            max = Math.max(max, seq);
        }
        assertTrue(overtaken > N / 10, overtaken + " packets overtaken\n" + s.report());
        assertTrue(s.minDelayNs() < 20_000_000, "the reordered ones went at once");
    }

    /** Runs the impairer with these parameters while N datagrams cross the queue; returns what arrived. */
    private static Seen impaired(long seed, String netem) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        StopSignal stop = new StopSignal();
        List<String> args = new ArrayList<>(List.of("--queue", Integer.toString(QUEUE), "--seed", Long.toString(seed),
                "--duration", "60"));
        args.addAll(Arrays.asList(netem.split(" ")));
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        FutureTask<Integer> impair = inNamespace("impair", () -> ImpairCommand.main(args.toArray(String[]::new), ps,
                ps, stop));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!out.toString(StandardCharsets.UTF_8).contains("impair: queue " + QUEUE + ":")) {
            assertTrue(System.nanoTime() < deadline && !impair.isDone(), "impair did not start: " + out);
            Thread.sleep(10);
        }
        CountDownLatch bound = new CountDownLatch(1);
        FutureTask<Seen> rx = inNamespace("rx", () -> receive(bound));
        assertTrue(bound.await(20, TimeUnit.SECONDS), "the receiver did not bind");
        FutureTask<Void> tx = inNamespace("tx", () -> {
            send();
            return null;
        });
        tx.get(60, TimeUnit.SECONDS);
        Seen partial = rx.get(90, TimeUnit.SECONDS);
        stop.stop();
        assertEquals(0, impair.get(30, TimeUnit.SECONDS), out.toString(StandardCharsets.UTF_8));
        return new Seen(partial.order(), partial.copies(), partial.intact(), partial.damaged(), partial.minDelayNs(),
                out.toString(StandardCharsets.UTF_8));
    }

    private static byte[] datagram(int seq, long sentNs) {
        ByteBuffer b = ByteBuffer.allocate(200);
        b.putInt(seq).putLong(sentNs);
        while (b.hasRemaining()) {
            b.put((byte) (seq * 31 + b.position()));
        }
        return b.array();
    }

    private static void send() throws IOException, InterruptedException {
        try (DatagramSocket s = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))) {
            InetSocketAddress to = new InetSocketAddress(InetAddress.getLoopbackAddress(), PORT);
            for (int i = 0; i < N; i++) {
                byte[] d = datagram(i, System.nanoTime());
                s.send(new DatagramPacket(d, d.length, to));
                if (i % 100 == 99) {
                    Thread.sleep(1); // do not outrun the queue's socket buffer
                }
            }
        }
    }

    private static Seen receive(CountDownLatch bound) throws IOException {
        List<Integer> order = new ArrayList<>();
        Map<Integer, Integer> copies = new HashMap<>();
        int intact = 0;
        int damaged = 0;
        long minDelay = Long.MAX_VALUE;
        try (DatagramSocket s = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), PORT))) {
            s.setReceiveBufferSize(8 << 20);
            s.setSoTimeout(1500); // quiet this long after the last one: done
            bound.countDown();
            byte[] buf = new byte[2048];
            for (;;) {
                DatagramPacket p = new DatagramPacket(buf, buf.length);
                try {
                    s.receive(p);
                } catch (SocketTimeoutException quiet) {
                    break;
                }
                long now = System.nanoTime();
                ByteBuffer b = ByteBuffer.wrap(buf, 0, p.getLength());
                int seq = p.getLength() >= 12 ? b.getInt() : -1;
                long sent = p.getLength() >= 12 ? b.getLong() : now;
                byte[] got = Arrays.copyOf(buf, p.getLength());
                if (seq >= 0 && seq < N && Arrays.equals(got, datagram(seq, sent))) {
                    intact++;
                    order.add(seq);
                    copies.merge(seq, 1, Integer::sum);
                    minDelay = Math.min(minDelay, now - sent);
                } else {
                    damaged++;
                }
            }
        }
        return new Seen(order, copies, intact, damaged, minDelay, "");
    }

    /** Runs the task on a new thread that first enters the test's network namespace. */
    private static <T> FutureTask<T> inNamespace(String name, Callable<T> task) {
        FutureTask<T> f = new FutureTask<>(() -> {
            enter("/run/netns/" + ns);
            return task.call();
        });
        Thread.ofPlatform().name("lossrec-" + name).daemon().start(f);
        return f;
    }

    private static void enter(String path) throws IOException {
        try (Arena ar = Arena.ofConfined()) {
            MemorySegment st = Libc.newCallState(ar);
            int fd = Libc.open(st, ar.allocateFrom(path), Libc.O_CLOEXEC);
            if (fd < 0) {
                throw Libc.error("open", st, path);
            }
            try {
                if (Libc.setns(st, fd, Libc.CLONE_NEWNET) != 0) {
                    throw Libc.error("setns(CLONE_NEWNET)", st, path);
                }
            } finally {
                Libc.close(st, fd);
            }
        }
    }

    private static int run(String... cmd) throws InterruptedException {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start();
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return -1;
            }
            return p.exitValue();
        } catch (IOException noBinary) {
            return -1;
        }
    }
}
