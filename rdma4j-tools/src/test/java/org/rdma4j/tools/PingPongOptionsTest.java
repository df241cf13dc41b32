// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.rdma4j.tools.PingPongOptions.Kind;
import org.rdma4j.tools.PingPongOptions.UsageException;

/** rdma-core's options and defaults for ibv_rc/ud/srq_pingpong, parsed as getopt_long does. */
class PingPongOptionsTest {
    @Test
    void rdmaCoreDefaults() {
        PingPongOptions rc = PingPongOptions.parse(Kind.RC);
        assertEquals(18515, rc.port);
        assertEquals(1, rc.ibPort);
        assertEquals(4096, rc.size);
        assertEquals(1024, rc.mtu);
        assertEquals(500, rc.rxDepth);
        assertEquals(1000, rc.iters);
        assertEquals(0, rc.sl);
        assertEquals(-1, rc.gidIndex);
        assertFalse(rc.events);
        assertNull(rc.serverName);
        assertNull(rc.ibDev);
        // ud: the code default is 1024 although the usage text says 2048.
        assertEquals(1024, PingPongOptions.parse(Kind.UD).size);
        PingPongOptions srq = PingPongOptions.parse(Kind.SRQ);
        assertEquals(16, srq.numQp);
        assertEquals(4096, srq.size);
    }

    @Test
    void getoptForms() {
        PingPongOptions o = PingPongOptions.parse(Kind.RC, "-n10", "-s", "64", "--mtu=2048", "--rx-depth", "8", "-ec",
                "-g", "0x1", "-p", "020", "-d", "soft1", "-i1", "-l", "3", "--sl=4", "host");
        assertEquals(10, o.iters);
        assertEquals(64, o.size);
        assertEquals(2048, o.mtu);
        assertEquals(8, o.rxDepth);
        assertTrue(o.events);
        assertTrue(o.validate);
        assertEquals(1, o.gidIndex);
        assertEquals(16, o.port, "strtol base 0: a leading 0 is octal");
        assertEquals("soft1", o.ibDev);
        assertEquals(1, o.ibPort);
        assertEquals(4, o.sl, "the last one wins");
        assertEquals("host", o.serverName);
        PingPongOptions l = PingPongOptions.parse(Kind.SRQ, "--loopback", "-q", "4", "--server-ib-dev=soft0", "-ec");
        assertTrue(l.loopback);
        assertEquals(4, l.numQp);
        assertEquals("soft0", l.serverIbDev);
        assertTrue(PingPongOptions.parse(Kind.UD, "--help").help);
        assertTrue(PingPongOptions.parse(Kind.UD, "-h").help);
    }

    @Test
    void refusesWhatRdmaCoreRefuses() {
        // Options a program does not have (ud has no -m, rc no -q).
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.UD, "-m", "1024"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.UD, "--mtu=1024"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-q", "2"));
        // ibv_uc_pingpong's getopt string (rdma-core 44): rc's options without -o -O -P -t -j -N -U
        assertEquals(4096, PingPongOptions.parse(Kind.UC, "-m", "2048", "-c", "-e").size);
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.UC, "-q", "2"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.UC, "-t"));
        assertEquals(Kind.UC, Kind.of("ibv_uc_pingpong"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "--bogus"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-n"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-m", "1000"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-p", "70000"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-i", "0"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "--events=1"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "a", "b"));
        var e = assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "-n", "ten"));
        assertTrue(e.getMessage().contains("'ten'"), e.getMessage());
        var q = assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.SRQ, "-q", "20", "-r", "10"));
        assertEquals("rx_depth 10 is too small for 20 QPs -- must have at least one receive per QP.", q.getMessage());
        var m = assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.SRQ, "-q", "256", "-r", "1000"));
        assertEquals("num_qp 256 must be less than 255", m.getMessage());
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "--loopback", "host"));
        // --verify checks echoes on the client, and the srq server's QPs share one buffer.
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "--verify"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.SRQ, "--verify", "host"));
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.RC, "--verify=1", "host"));
        assertTrue(PingPongOptions.parse(Kind.SRQ, "--verify", "-q", "1", "host").verify);
        assertTrue(PingPongOptions.parse(Kind.UD, "--loopback", "--verify").verify);
    }

    @Test
    void capabilityOptionsAreKeptToBeRefusedAtRun() {
        assertEquals('o', PingPongOptions.parse(Kind.RC, "-o").unsupported);
        assertEquals('t', PingPongOptions.parse(Kind.RC, "--ts").unsupported);
        assertEquals('o', PingPongOptions.parse(Kind.SRQ, "--odp").unsupported);
        assertThrows(UsageException.class, () -> PingPongOptions.parse(Kind.UD, "-o"));
        assertTrue(PingPongOptions.parse(Kind.RC, "-N").newSend);
    }

    @Test
    void subcommandNames() {
        assertEquals(Kind.RC, Kind.of("rc_pingpong"));
        assertEquals(Kind.RC, Kind.of("ibv_rc_pingpong"));
        assertEquals(Kind.UD, Kind.of("ibv_ud_pingpong"));
        assertEquals(Kind.SRQ, Kind.of("srq_pingpong"));
        assertEquals(Kind.UC, Kind.of("uc_pingpong"));
        assertNull(Kind.of("xrc_pingpong"));
    }

    @Test
    void usageListsTheOptionsOfEachProgram() {
        String rc = PingPongOptions.usage(Kind.RC);
        assertTrue(rc.contains("  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n"), rc);
        assertTrue(rc.contains("  -m, --mtu=<size>       path MTU (default 1024)\n"), rc);
        assertTrue(rc.contains("--loopback"), rc);
        assertFalse(PingPongOptions.usage(Kind.UD).contains("--mtu"));
        assertTrue(PingPongOptions.usage(Kind.SRQ).contains("  -q, --num-qp=<num>     number of QPs to use (default 16)\n"));
    }
}
