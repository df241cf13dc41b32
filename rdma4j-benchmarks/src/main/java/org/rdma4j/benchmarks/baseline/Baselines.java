// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks.baseline;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.util.Arrays;
import java.util.Locale;

/**
 * The plain-Java baselines {@code bench/compare} sets beside rdma4j's perftest figures, each printing
 * one {@code key=value} line:
 * <ul>
 * <li>{@code udp SIZE SECONDS}: a raw UDP stream on 127.0.0.1, one sender and one receiver thread with
 * blocking {@link DatagramChannel}s and direct buffers, a 4 MiB receive buffer; received datagrams and
 * MiB/s over the window after a 1 s warm-up. The ceiling for one RoCEv2-over-UDP flow in Java;</li>
 * <li>{@code udppp SIZE ITERS}: UDP ping-pong between two threads, non-blocking and busy-polling (the way
 * perftest polls); p50 one-way latency (half the round trip);</li>
 * <li>{@code tcp SIZE SECONDS}: a TCP stream on 127.0.0.1 of SIZE-byte writes, one writer and one reader
 * thread with blocking {@link java.nio.channels.SocketChannel}s and direct buffers (the reader takes up to
 * 256 KiB per read), TCP_NODELAY off; MiB/s received over the window after a 1 s warm-up. The baseline of
 * a RoCEv2 WRITE stream: what a Java program gets from the kernel's TCP between two endpoints;</li>
 * <li>{@code copy SIZE SECONDS}: {@code MemorySegment.copy} between two 4 KiB-aligned off-heap segments,
 * one thread; MiB/s after a 1 s warm-up. What an in-process RDMA WRITE of that size is made of.</li>
 * </ul>
 * Loops are bounded by time and count; the UDP threads stop when the window ends.
 */
public final class Baselines {
    private Baselines() {
    }

    /**
     * @param args mode and its numbers (see the class comment)
     * @throws Exception on a socket failure
     */
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Baselines udp|udppp|tcp|copy SIZE SECONDS|ITERS");
            System.exit(2);
        }
        int size = Integer.parseInt(args[1]);
        long n = Long.parseLong(args[2]);
        switch (args[0]) {
            case "udp" -> udp(size, n);
            case "udppp" -> udpPingPong(size, (int) n);
            case "tcp" -> tcp(size, n);
            case "copy" -> copy(size, n);
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
            }
        }
    }

    @SuppressWarnings("try") // rx.close() inside its try ends the receiver thread on purpose
    private static void udp(int size, long seconds) throws Exception {
        InetAddress lo = InetAddress.getLoopbackAddress();
        try (DatagramChannel rx = DatagramChannel.open(); DatagramChannel tx = DatagramChannel.open()) {
            rx.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            rx.bind(new InetSocketAddress(lo, 0));
            tx.connect(rx.getLocalAddress());
            long warmEnd = System.nanoTime() + 1_000_000_000L;
            long end = warmEnd + seconds * 1_000_000_000L;
            // The receiver blocks in receive (a spinning receiver would take the sender's CPU on 2 vCPUs) and
            // counts what arrives after the warm-up; closing the channel ends it.
            long[] counted = new long[3]; // datagrams, bytes, last arrival
            long[] firstCounted = new long[1];
            Thread receiver = Thread.ofPlatform().name("udp-rx").start(() -> {
                ByteBuffer b = ByteBuffer.allocateDirect(65536);
                long n = 0;
                long bytes = 0;
                long first = 0;
                long last = 0;
                try {
                    while (true) {
                        b.clear();
                        rx.receive(b);
                        long t = System.nanoTime();
                        if (t >= warmEnd) {
                            if (first == 0) {
                                first = t;
                            }
                            last = t;
                            n++;
                            bytes += b.position();
                        }
                    }
                } catch (IOException e) {
                    // closed: end of the window
                }
                synchronized (counted) {
                    counted[0] = n;
                    counted[1] = bytes;
                    counted[2] = last;
                    firstCounted[0] = first;
                }
            });
            ByteBuffer p = ByteBuffer.allocateDirect(size);
            long sent = 0;
            while (System.nanoTime() < end) {
                for (int i = 0; i < 64; i++) {
                    p.clear();
                    tx.write(p);
                }
                sent += 64;
            }
            rx.close();
            receiver.join(5_000);
            synchronized (counted) {
                double sec = Math.max(counted[2] - firstCounted[0], 1) / 1e9;
                System.out.printf(Locale.ROOT,
                        "mode=udp size=%d seconds=%.2f received_pps=%.0f MiBps=%.1f sent_total=%d%n", size, sec,
                        counted[0] / sec, counted[1] / sec / (1 << 20), sent);
            }
        }
    }

    private static void tcp(int size, long seconds) throws Exception {
        InetAddress lo = InetAddress.getLoopbackAddress();
        try (java.nio.channels.ServerSocketChannel server = java.nio.channels.ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(lo, 0));
            try (java.nio.channels.SocketChannel tx = java.nio.channels.SocketChannel.open(server.getLocalAddress());
                 java.nio.channels.SocketChannel rx = server.accept()) {
                long warmEnd = System.nanoTime() + 1_000_000_000L;
                long end = warmEnd + seconds * 1_000_000_000L;
                long[] counted = new long[3]; // bytes after the warm-up, first and last counted arrival
                Thread reader = Thread.ofPlatform().name("tcp-rx").start(() -> {
                    ByteBuffer b = ByteBuffer.allocateDirect(256 << 10);
                    long bytes = 0;
                    long first = 0;
                    long last = 0;
                    try {
                        int r;
                        while ((r = rx.read(b.clear())) >= 0) {
                            long t = System.nanoTime();
                            if (t >= warmEnd) {
                                if (first == 0) {
                                    first = t;
                                }
                                last = t;
                                bytes += r;
                            }
                        }
                    } catch (IOException e) {
                        // closed: end of the window
                    }
                    synchronized (counted) {
                        counted[0] = bytes;
                        counted[1] = first;
                        counted[2] = last;
                    }
                });
                ByteBuffer p = ByteBuffer.allocateDirect(size);
                long sent = 0;
                while (System.nanoTime() < end) {
                    p.clear();
                    while (p.hasRemaining()) {
                        tx.write(p);
                    }
                    sent++;
                }
                tx.shutdownOutput();
                reader.join(10_000);
                synchronized (counted) {
                    double sec = Math.max(counted[2] - counted[1], 1) / 1e9;
                    System.out.printf(Locale.ROOT, "mode=tcp size=%d seconds=%.2f MiBps=%.1f writes=%d%n", size, sec,
                            counted[0] / sec / (1 << 20), sent);
                }
            }
        }
    }

    private static void udpPingPong(int size, int iters) throws Exception {
        InetAddress lo = InetAddress.getLoopbackAddress();
        try (DatagramChannel a = DatagramChannel.open(); DatagramChannel b = DatagramChannel.open()) {
            a.bind(new InetSocketAddress(lo, 0));
            b.bind(new InetSocketAddress(lo, 0));
            a.connect(b.getLocalAddress());
            b.connect(a.getLocalAddress());
            a.configureBlocking(false);
            b.configureBlocking(false);
            int warm = Math.max(iters / 10, 100);
            long deadline = System.nanoTime() + 120_000_000_000L;
            Thread echo = Thread.ofPlatform().name("udp-echo").start(() -> {
                ByteBuffer buf = ByteBuffer.allocateDirect(size);
                try {
                    for (int i = 0; i < warm + iters; i++) {
                        buf.clear();
                        while (b.read(buf) <= 0) {
                            if (System.nanoTime() > deadline) {
                                return;
                            }
                            Thread.onSpinWait();
                        }
                        buf.flip();
                        b.write(buf);
                    }
                } catch (IOException e) {
                    e.printStackTrace();
                }
            });
            ByteBuffer buf = ByteBuffer.allocateDirect(size);
            long[] rtt = new long[iters];
            for (int i = 0; i < warm + iters; i++) {
                buf.clear();
                long t = System.nanoTime();
                a.write(buf);
                buf.clear();
                while (a.read(buf) <= 0) {
                    if (System.nanoTime() > deadline) {
                        throw new IOException("no echo within 120 s");
                    }
                    Thread.onSpinWait();
                }
                if (i >= warm) {
                    rtt[i - warm] = System.nanoTime() - t;
                }
            }
            echo.join(5_000);
            Arrays.sort(rtt);
            System.out.printf(Locale.ROOT, "mode=udppp size=%d iters=%d p50_oneway_us=%.2f p99_oneway_us=%.2f%n", size,
                    iters, rtt[iters / 2] / 2000.0, rtt[(int) (iters * 0.99)] / 2000.0);
        }
    }

    private static void copy(int size, long seconds) {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocate(size, 4096);
            MemorySegment dst = arena.allocate(size, 4096);
            src.fill((byte) 0x7b);
            long warmEnd = System.nanoTime() + 1_000_000_000L;
            while (System.nanoTime() < warmEnd) {
                for (int i = 0; i < 64; i++) {
                    MemorySegment.copy(src, 0, dst, 0, size);
                }
            }
            long ops = 0;
            long t0 = System.nanoTime();
            long end = t0 + seconds * 1_000_000_000L;
            long now;
            // A batch between clock reads keeps System.nanoTime out of the small-size figure.
            int batch = size <= 4096 ? 1024 : size <= 65536 ? 64 : 4;
            while ((now = System.nanoTime()) < end) {
                for (int i = 0; i < batch; i++) {
                    MemorySegment.copy(src, 0, dst, 0, size);
                }
                ops += batch;
            }
            double sec = (now - t0) / 1e9;
            // Read the destination so the copies have an observable result.
            System.out.printf(Locale.ROOT, "mode=copy size=%d seconds=%.2f ops=%d MiBps=%.1f check=%d%n", size, sec,
                    ops, (double) ops * size / sec / (1 << 20), dst.get(java.lang.foreign.ValueLayout.JAVA_BYTE,
                            size - 1));
        }
    }
}
