// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Verbs;

/** Runs the subcommands against whatever provider is on the test class path (rdma4j-soft). */
class MainEndToEndTest {
    private static final Pattern REPORT = Pattern.compile(
            " (\\d+) +(\\d+) +(\\d+\\.\\d\\d) +(\\d+\\.\\d\\d)\\s*\\t\\t     (\\d+\\.\\d{6})");

    private record Result(int rc, String out, String err) {
    }

    private static Result run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int rc;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            rc = Main.run(args, o, e);
        }
        return new Result(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static void assumeDevices() {
        assumeTrue(!Verbs.devices().isEmpty(), "no RDMA device provider on the class path");
    }

    @Test
    void unknownSubcommandFails() {
        Result r = run("frobnicate");
        assertEquals(1, r.rc());
        assertTrue(r.err().contains("unknown subcommand 'frobnicate'"), r.err());
    }

    @Test
    void writeBwClientWithoutServerNamesTheAddressTried() {
        Result r = run("ib_write_bw", "-n", "10", "-p", "1", "127.0.0.1");
        assertEquals(1, r.rc());
        assertTrue(r.err().contains("Couldn't connect to 127.0.0.1:1"), r.err());
    }

    @Test
    void everyPerftestToolHasHelp() {
        for (String t : new String[] {"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat",
            "ib_write_lat", "ib_read_lat", "ib_atomic_lat"}) {
            Result r = run(t, "--help");
            assertEquals(0, r.rc(), t);
            assertTrue(r.out().contains("  " + t + " --loopback"), r.out());
        }
    }

    @Test
    void unknownDeviceListsTheKnownOnes() {
        assumeDevices();
        Result r = run("ib_write_bw", "--loopback", "-d", "nosuchdev", "-n", "10");
        assertEquals(1, r.rc());
        assertTrue(r.err().contains("nosuchdev") && r.err().contains("known devices"), r.err());
        Result d = run("devinfo", "-d", "nosuchdev");
        assertTrue(d.rc() != 0);
        assertTrue(d.err().contains("known devices"), d.err());
    }

    @Test
    void devicesAndDevinfo() {
        assumeDevices();
        Result d = run("devices");
        assertEquals(0, d.rc());
        assertTrue(d.out().startsWith("    device          \t   node GUID\n"), d.out());
        for (var dev : Verbs.devices()) {
            assertTrue(d.out().contains("    " + CFormat.left(dev.name(), 16) + "\t"), d.out());
        }
        Result i = run("devinfo");
        assertEquals(0, i.rc(), i.err());
        assertTrue(i.out().contains("hca_id:\t"), i.out());
        assertTrue(i.out().contains("\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"), i.out());
    }

    @Test
    void writeBwLoopbackPrintsAPerftestTable() {
        assumeDevices();
        Result r = run("ib_write_bw", "--loopback", "-s", "4096", "-n", "1000");
        assertEquals(0, r.rc(), r.err() + r.out());
        String out = r.out();
        assertTrue(out.startsWith(PerftestFormat.RESULT_LINE + "                    RDMA_Write BW Test\n"), out);
        assertTrue(out.contains(" local address: LID "), out);
        assertTrue(out.contains(" remote address: LID "), out);
        assertTrue(out.contains(PerftestFormat.RESULT_FMT + "\n"), out);
        var m = REPORT.matcher(out);
        assertTrue(m.find(), out);
        assertEquals("4096", m.group(1));
        assertEquals("1000", m.group(2));
        assertTrue(Double.parseDouble(m.group(4)) > 0, out);
        assertTrue(out.endsWith(PerftestFormat.RESULT_LINE), out);
    }

    @Test
    void writeBwAllSizesAndJson() {
        assumeDevices();
        Result r = run("ib_write_bw", "--loopback", "-a", "-n", "20", "--json");
        assertEquals(0, r.rc(), r.err() + r.out());
        assertTrue(r.out().startsWith("{\n\"test_info\": {\n"), r.out());
        assertTrue(r.out().contains("\"MsgSize\": 2,\n"), r.out());
        assertTrue(r.out().contains("\"MsgSize\": 8388608,\n"), r.out());
    }

    @Test
    void writeBwDurationUcAndSeveralQps() {
        assumeDevices();
        Result q = run("ib_write_bw", "--loopback", "-s", "1024", "-n", "300", "-q", "2", "-t", "32", "-Q", "7");
        assertEquals(0, q.rc(), q.err() + q.out());
        var m = REPORT.matcher(q.out());
        assertTrue(m.find(), q.out());
        assertEquals("600", m.group(2));
        Result uc = run("ib_write_bw", "--loopback", "-c", "UC", "-s", "65536", "-n", "200");
        assertEquals(0, uc.rc(), uc.err() + uc.out());
        Result d = run("ib_write_bw", "--loopback", "-s", "65536", "-D", "1", "--report_gbits");
        assertEquals(0, d.rc(), d.err() + d.out());
        assertTrue(d.out().startsWith(PerftestFormat.NO_PEAK_WARNING), d.out());
        assertTrue(d.out().contains(PerftestFormat.RESULT_FMT_G), d.out());
    }

    @Test
    void badGidIndexFailsCleanly() {
        assumeDevices();
        Result r = run("ib_write_bw", "--loopback", "-x", "99", "-n", "10");
        assertEquals(1, r.rc(), r.out());
        assertTrue(r.err().contains("GID index 99") || r.err().contains("99"), r.err());
        assertTrue(!r.err().contains("cleanup failed"), r.err());
    }

    @Test
    void inlineLargerThanTheDeviceAllowsIsRefused() {
        assumeDevices();
        Result r = run("ib_write_bw", "--loopback", "-I", "1024", "-s", "8", "-n", "10");
        assertEquals(1, r.rc(), r.out());
        assertTrue(r.err().contains("max_inline_data"), r.err());
    }
}
