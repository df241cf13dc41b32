// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.verbs.Verbs;

/**
 * perftest's {@code -R} on the in-process devices: the exchange over an rdma_cm RC QP and the test QPs
 * connected by rdma_cm, for all eight tools ({@code --loopback}, and a server and a client in two threads
 * connecting by address as two hosts would), the binary keys message, and the lines that say rdma_cm.
 */
class PerftestRdmaCmTest {
    private static final Pattern RESULT = Pattern.compile("(?m)^ +(\\d+) +(\\d+) +\\d+\\.\\d\\d");

    record Out(int rc, String out, String err) {
    }

    static Stream<String> tools() {
        return PerftestEndToEndTest.tools();
    }

    private static Out run(String tool, String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int rc;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            var opts = PerftestOptions.parse(PerftestOptions.verbOf(tool), tool.endsWith("_lat"), args);
            rc = new Perftest(opts, o, e).timeoutMs(60_000).run();
        }
        return new Out(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static String gid(String dev) {
        try (var ctx = Verbs.device(dev).open()) {
            return ctx.queryGid(1, 0).toInetAddress().getHostAddress();
        }
    }

    @ParameterizedTest
    @MethodSource("tools")
    void everyToolRunsOverRdmaCmInLoopback(String tool) {
        Out r = run(tool, "--loopback", "-R", "-n", "100");
        assertEquals(0, r.rc(), r.out() + r.err());
        assertTrue(RESULT.matcher(r.out()).find(), "no result line:\n" + r.out());
        assertTrue(r.out().contains(" rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n"), r.out());
    }

    /** Two roles as two hosts would run them: the server listens on 0.0.0.0, the client connects by address. */
    @ParameterizedTest
    @MethodSource("tools")
    void serverAndClientConnectByAddress(String tool) throws Exception {
        String port = Integer.toString(21_000 + (int) (ProcessHandle.current().pid() % 3000) + tool.hashCode() % 97 * 10);
        CompletableFuture<Out> s = CompletableFuture.supplyAsync(() -> run(tool, "-R", "-d", "soft1", "-p", port, "-n",
                "100"));
        Out c = null;
        for (int attempt = 0; attempt < 200 && !s.isDone(); attempt++) {
            c = run(tool, "-R", "-d", "soft0", "-p", port, "-n", "100", gid("soft1"));
            if (c.rc() == 0 || !c.err().contains("Unexpected CM event 8")) {
                break; // 8: REJECTED, the server does not listen yet
            }
            try {
                s.get(20, TimeUnit.MILLISECONDS); // bounded wait on the server, not a sleep
            } catch (java.util.concurrent.TimeoutException stillStarting) {
                // try again
            }
        }
        Out sv = s.get(60, TimeUnit.SECONDS);
        assertEquals(0, c.rc(), c.out() + c.err() + "\nserver:\n" + sv.out() + sv.err());
        assertEquals(0, sv.rc(), sv.out() + sv.err());
        assertTrue(sv.out().contains(" Data ex. method : rdma_cm\n" + PerftestFormat.RESULT_LINE
                + " Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n"),
                sv.out());
        assertTrue(RESULT.matcher(c.out()).find(), c.out());
        // each side prints the other's QP as its remote one
        String local = c.out().replaceAll("(?s).* local address: LID 0000 QPN (0x[0-9a-f]+).*", "$1");
        assertTrue(sv.out().contains(" remote address: LID 0000 QPN " + local + " "), local + "\n" + sv.out());
    }

    @Test
    void theKeysMessageIsPerftestsBinaryPingpongDest() {
        byte[] gid = HexFormat.of().parseHex("00000000000000000000ffff0a630002");
        var d = new PerftestFormat.Dest(0, 0x11, 0x123456, 0xabcd, 0x00007f00_12345000L, gid, 16);
        byte[] b = PerftestWire.encodeDest(d, true);
        assertEquals(56, b.length);
        // lid, out_reads, qpn, psn, rkey (network order), padding, vaddr, GID, srqn, gid_index
        assertEquals("00000000" + "00000010" + "00000011" + "00123456" + "0000abcd" + "00000000" + "00007f0012345000"
                + "00000000000000000000ffff0a630002" + "00000000" + "00000000", HexFormat.of().formatHex(b));
        var back = PerftestWire.decodeDest(b);
        assertEquals(0x11, back.qpn());
        assertEquals(0x123456, back.psn());
        assertEquals(0xabcd, back.rkey());
        assertEquals(0x00007f00_12345000L, back.vaddr());
        assertEquals(16, back.outReads());
        assertArrayEquals(gid, back.gid());
        assertThrows(PerftestWire.WireException.class, () -> PerftestWire.decodeDest(new byte[16]));
    }

    @Test
    void ucIsRefusedAsPerftestRefusesIt() {
        var e = assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "-R", "-c", "UC"));
        assertEquals("UC is not supported in librdmacm", e.getMessage());
        var o = PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "--rdma_cm", "--retry_count=5", "--source_ip",
                "10.0.0.1");
        assertTrue(o.rdmaCm);
        assertEquals(5, o.retryCount);
        assertEquals("10.0.0.1", o.sourceIp);
    }

    @Test
    void aClientWithNobodyListeningSaysWhoItTried() {
        Out c = run("ib_write_bw", "-R", "-d", "soft0", "-p", "29999", gid("soft1"));
        assertEquals(1, c.rc(), c.out() + c.err());
        assertTrue(c.err().contains("Unexpected CM event 8") && c.err().contains(gid("soft1")), c.err());
    }
}
