// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class PerftestOptionsTest {
    @Test
    void defaultsArePerftests() {
        var o = PerftestOptions.parse();
        assertEquals(65536, o.size);
        assertEquals(5000, o.iters);
        assertEquals(128, o.txDepth);
        assertEquals(100, o.cqMod);
        assertEquals(1, o.numQps);
        assertEquals("RC", o.connection);
        assertEquals(-1, o.gidIndex);
    }

    @Test
    void shortAndLongForms() {
        var o = PerftestOptions.parse("-d", "soft0", "-s65536", "--iters=200", "--tx-depth", "64", "-q", "2", "-c",
                "UC", "-I", "64", "--report_gbits", "-F", "-x", "1", "-m", "2048", "--json", "--loopback", "-aN");
        assertEquals("soft0", o.ibDev);
        assertEquals(65536, o.size);
        assertEquals(200, o.iters);
        assertEquals(64, o.txDepth);
        assertEquals(2, o.numQps);
        assertEquals("UC", o.connection);
        assertEquals(64, o.inlineSize);
        assertTrue(o.reportGbits);
        assertEquals(1, o.gidIndex);
        assertEquals(2048, o.mtu);
        assertTrue(o.json);
        assertTrue(o.loopback);
        assertTrue(o.all);
        assertTrue(o.noPeak);
    }

    @Test
    void serverNameIsPositional() {
        assertEquals("10.0.0.1", PerftestOptions.parse("-s", "8", "10.0.0.1").serverName);
    }

    @Test
    void refusesWhatPerftestRefuses() {
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("-n", "4"));
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("-m", "1000"));
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("-c", "UD"));
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("--bogus"));
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("-s"));
        assertThrows(PerftestOptions.UsageException.class, () -> PerftestOptions.parse("-s", "lots"));
    }

    @Test
    void defaultsDependOnTheTest() {
        var lat = PerftestOptions.parse(PerftestOptions.Verb.SEND, true);
        assertEquals(2, lat.size);
        assertEquals(1000, lat.iters);
        assertEquals(1, lat.txDepth);
        var read = PerftestOptions.parse(PerftestOptions.Verb.READ, false);
        assertEquals(65536, read.size);
        assertEquals(1000, read.iters, "DEF_ITERS: only WRITE bw uses 5000");
        assertEquals(128, read.txDepth);
        var atomic = PerftestOptions.parse(PerftestOptions.Verb.ATOMIC, true);
        assertEquals(8, atomic.size);
        assertEquals("ib_atomic_lat", atomic.toolName());
        assertEquals(18515, atomic.port);
        assertEquals(14, atomic.qpTimeout);
        assertEquals(PerftestOptions.Verb.READ, PerftestOptions.verbOf("ib_read_lat"));
        assertEquals(null, PerftestOptions.verbOf("ib_frob_bw"));
    }

    @Test
    void perftestFlagsOfTheOtherTools() {
        var o = PerftestOptions.parse(PerftestOptions.Verb.READ, false, "-o", "8", "-u", "20", "-l", "4", "-n", "400",
                "-t", "64", "-Q", "8", "--chart=x.png", "--progress");
        assertEquals(8, o.outReads);
        assertEquals(20, o.qpTimeout);
        assertEquals(4, o.postList);
        assertEquals("x.png", o.chart);
        assertTrue(o.progress);
        var a = PerftestOptions.parse(PerftestOptions.Verb.ATOMIC, false, "-A", "CMP_AND_SWAP");
        assertTrue(a.cmpAndSwap);
        var l = PerftestOptions.parse(PerftestOptions.Verb.WRITE, true, "-U", "-H", "-D", "3", "-f", "1");
        assertTrue(l.unsorted && l.histogram);
        assertEquals(3, l.duration);
    }

    @Test
    void refusesWhatTheOtherToolsRefuse() {
        var atomicSize = assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.ATOMIC, false, "-s", "16"));
        assertTrue(atomicSize.getMessage().contains("Message size cannot be changed for Atomic tests"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.ATOMIC, true, "-a"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.READ, false, "-c", "UC"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.ATOMIC, false, "-A", "SWAP"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "-U"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, true, "-C"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "-a", "-D", "5"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "--loopback", "host"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.WRITE, false, "-l", "3", "-n", "100"));
        assertThrows(PerftestOptions.UsageException.class,
                () -> PerftestOptions.parse(PerftestOptions.Verb.SEND, true, "-q", "2"));
    }
}
