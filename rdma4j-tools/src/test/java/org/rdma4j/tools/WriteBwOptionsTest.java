package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class WriteBwOptionsTest {
    @Test
    void defaultsArePerftests() {
        var o = WriteBwOptions.parse();
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
        var o = WriteBwOptions.parse("-d", "soft0", "-s65536", "--iters=200", "--tx-depth", "64", "-q", "2", "-c",
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
        assertEquals("10.0.0.1", WriteBwOptions.parse("-s", "8", "10.0.0.1").serverName);
    }

    @Test
    void refusesWhatPerftestRefuses() {
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("-n", "4"));
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("-m", "1000"));
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("-c", "UD"));
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("--bogus"));
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("-s"));
        assertThrows(WriteBwOptions.UsageException.class, () -> WriteBwOptions.parse("-s", "lots"));
    }
}
