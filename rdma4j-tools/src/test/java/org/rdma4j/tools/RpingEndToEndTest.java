// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Verbs;

/**
 * rping between the process's in-process soft devices ({@code soft0} as client, {@code soft1} as server),
 * through the system CM providers: the ping loop, its output, the disconnect lines, and rping's errors.
 */
class RpingEndToEndTest {
    private static String gid(String dev) {
        try (var ctx = Verbs.device(dev).open()) {
            return ctx.queryGid(1, 0).toInetAddress().getHostAddress();
        }
    }

    private record Run(int rc, String out, String err) {
    }

    private static CompletableFuture<Run> start(String... args) {
        return CompletableFuture.supplyAsync(() -> run(args));
    }

    private static Run run(String... args) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        int rc = Rping.main(args, new PrintStream(o, true, StandardCharsets.UTF_8),
                new PrintStream(e, true, StandardCharsets.UTF_8), new StopSignal());
        return new Run(rc, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
    }

    @Test
    void pingsValidatesAndDisconnectsAsRdmaCoresRping() throws Exception {
        String server = gid("soft1");
        String client = gid("soft0");
        CompletableFuture<Run> s = start("-s", "-a", server, "-p", "17174", "-v", "-C", "10", "-S", "100");
        Run c = null;
        for (int attempt = 0; attempt < 50; attempt++) {
            c = run("-c", "-a", server, "-I", client, "-p", "17174", "-v", "-V", "-C", "10", "-S", "100");
            if (!c.err().contains("REJECTED, error 8")) {
                break; // the server listens (a REJ 8 means it did not yet)
            }
        }
        Run sv = s.get(60, TimeUnit.SECONDS);
        assertEquals(0, c.rc(), c.err());
        assertEquals(10, c.out().lines().filter(l -> l.startsWith("ping data: rdma-ping-")).count(), c.out() + c.err());
        assertTrue(c.out().contains("ping data: rdma-ping-0: ABCDEFGHIJ"), c.out());
        assertEquals(0, sv.rc(), sv.err());
        assertEquals(10, sv.out().lines().filter(l -> l.startsWith("server ping data: rdma-ping-")).count(), sv.out());
        assertTrue(sv.err().contains("server DISCONNECT EVENT..."), sv.err());
        assertTrue(sv.err().contains("wait for RDMA_READ_ADV state 10"), sv.err());
    }

    @Test
    void reportsTheRejectOfAPortNobodyListensOnAsRpingDoes() {
        Run c = run("-c", "-a", gid("soft1"), "-I", gid("soft0"), "-p", "17999", "-C", "1");
        assertEquals(255, c.rc());
        assertTrue(c.err().contains("cma event RDMA_CM_EVENT_REJECTED, error 8"), c.err());
        assertTrue(c.err().contains("wait for CONNECTED state 4"), c.err());
    }

    @Test
    void checksItsArgumentsAsRpingDoes() {
        Run r = run("-s", "-S", "1");
        assertEquals(22, r.rc());
        assertTrue(r.err().contains("Invalid size 1 (valid range is 23 to 65536)"), r.err());
        Run u = run("-x");
        assertEquals(22, u.rc());
        assertTrue(u.out().startsWith("rping -s [-vVd]"), u.out());
    }
}
