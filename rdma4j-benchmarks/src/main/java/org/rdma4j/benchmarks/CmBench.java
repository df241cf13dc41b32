// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;

import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;

/**
 * The connection-management figures of issue 12 item 9, each beside a baseline measured in the same run
 * ({@code bench/cm-bench} runs them and records the load):
 * <ul>
 * <li>{@code latency N SERVER_IP CM_PORT TCP_PORT}: N sequential rdma_cm connect + disconnect cycles to a
 * {@code serve} process (resolve address and route, create the QP, connect until ESTABLISHED, disconnect until
 * DISCONNECTED, destroy), beside N TCP connect + orderly close cycles to the same process and the 8-byte SEND
 * round trip on one established connection; median, p90, p99 of each;</li>
 * <li>{@code accept C ROUNDS}: one listener on the in-process device soft1, C connections from soft0 started at
 * once, timed until the listener has seen all C ESTABLISHED; connections accepted per second, beside a
 * {@link ServerSocket} accepting C concurrent TCP connects in the same process;</li>
 * <li>{@code hold N SECONDS SERVER_IP CM_PORT}: this process opens N connections to a {@code serve} process and
 * holds them; heap (after GC), RSS and threads before, after and SECONDS later, per connection, beside N RC QPs
 * with their two CQs made by plain verbs (what a connection's QP costs without the CM);</li>
 * <li>{@code serve CM_PORT TCP_PORT}: the peer: accepts every CM connection (echoes SENDs, tears down on
 * DISCONNECTED) and every TCP connection (closes after EOF), until its standard input closes.</li>
 * </ul>
 * Waits are bounded; failures exit non-zero with a message. This class dispatches and holds what the modes share;
 * each mode is its own class ({@code CmBenchServe}, {@code CmBenchLatency}, {@code CmBenchAccept},
 * {@code CmBenchHold}).
 */
public final class CmBench {
    static final Duration WAIT = Duration.ofSeconds(30);
    static final QpCapabilities CAP = new QpCapabilities(4, 4, 1, 1, 0);
    /**
     * Connect + disconnect cycles (and round trips) before the measured ones, unless {@code -Dcmbench.warm=N}:
     * enough for the JIT to compile the CM's and the device's paths. With the 30 this benchmark ran before
     * (2026-12-02) it measured interpreted code: connect 2.85 ms and the round trip 779 us where the same
     * processes measure 0.61 ms and 47 us warm, at the same load (docs/benchmarks.md).
     */
    static final int WARM = Integer.getInteger("cmbench.warm", 2000);
    /** The first connects of a new process, reported apart (what a program that connects once pays). */
    static final int COLD = 30;

    private CmBench() {
    }

    /**
     * @param args the mode and its arguments (see the class comment)
     * @throws Exception on a failure
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "serve" -> CmBenchServe.serve(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "latency" -> CmBenchLatency.latency(Integer.parseInt(args[1]), InetAddress.getByName(args[2]),
                    Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "accept" -> CmBenchAccept.accept(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            case "hold" -> CmBenchHold.hold(Integer.parseInt(args[1]), Integer.parseInt(args[2]),
                    InetAddress.getByName(args[3]), Integer.parseInt(args[4]));
            default -> usage();
        }
        System.exit(0);
    }

    private static void usage() {
        System.err.println("usage: CmBench serve CM_PORT TCP_PORT | latency N SERVER_IP CM_PORT TCP_PORT"
                + " | accept C ROUNDS | hold N SECONDS SERVER_IP CM_PORT");
        System.exit(2);
    }

    static CmEvent next(CmEventChannel ch, String what) {
        CmEvent e = ch.getEvent(WAIT);
        if (e == null) {
            throw new IllegalStateException("no CM event in " + WAIT.toSeconds() + " s while waiting for " + what);
        }
        return e;
    }

    static void expect(CmEventChannel ch, CmEventType t) {
        try (CmEvent e = next(ch, t.rdmaName())) {
            if (e.type() != t) {
                throw new IllegalStateException("expected " + t + ", got " + e);
            }
        }
    }

    /** The first private-data byte of the connection whose SENDs {@link CmBenchServe} echoes (the round trip). */
    static final byte ECHO = 'E';

    static volatile boolean stdinEof;

    static {
        Thread.ofPlatform().daemon().name("stdin-eof").start(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the parent writes nothing; EOF when it exits
                }
            } catch (IOException e) {
                // closed
            }
            stdinEof = true;
        });
    }

    static void check(WorkCompletion wc) {
        if (!wc.status().name().equals("SUCCESS")) {
            throw new IllegalStateException("completion " + wc);
        }
    }

    // ------------------------------------------------------------------ reporting

    static long median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    static void row(String name, long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        System.out.printf(Locale.ROOT, "%-36s p50 %9.1f us   p90 %9.1f us   p99 %9.1f us%n", name, s[s.length / 2] / 1e3,
                s[(int) Math.min(s.length - 1, Math.ceil(s.length * 0.9) - 1)] / 1e3,
                s[(int) Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] / 1e3);
    }

    static String load() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException e) {
            return "?";
        }
    }
}
