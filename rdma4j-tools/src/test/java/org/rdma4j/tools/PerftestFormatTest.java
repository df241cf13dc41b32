// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

/** The exact lines of shared/reference/roce-wire.md §5.3 (perftest 6.29 ib_write_bw). */
class PerftestFormatTest {
    private static final byte[] GID_192_168_1_10 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff,
        (byte) 192, (byte) 168, 1, 10};

    private static PerftestFormat.TestInfo info(boolean client, int gidIndex) {
        return new PerftestFormat.TestInfo("RDMA_Write", "rxe0", 1, "IB", "RC", client, 128, 100, 1024, "Ethernet",
                gidIndex, 0);
    }

    @Test
    void resultLineIs87Dashes() {
        assertEquals(88, PerftestFormat.RESULT_LINE.length());
        assertEquals("-".repeat(87) + "\n", PerftestFormat.RESULT_LINE);
    }

    @Test
    void localAddressLineUsesCAlternateHexWidths() {
        var d = new PerftestFormat.Dest(0, 0x11, 0x7d2e1a, 0x00160e, 0x7ffff7dda000L, GID_192_168_1_10);
        assertEquals(" local address: LID 0000 QPN 0x0011 PSN 0x7d2e1a RKey 0x00160e VAddr 0x007ffff7dda000\n"
                + " GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:10\n",
                PerftestFormat.address("local", d, true));
    }

    @Test
    void addressLineWithoutGidIndexHasNoGidLine() {
        var d = new PerftestFormat.Dest(1, 0x12, 0, 0, 0, new byte[16]);
        assertEquals(" remote address: LID 0x01 QPN 0x0012 PSN 000000 RKey 00000000 VAddr 0000000000000000\n",
                PerftestFormat.address("remote", d, false));
    }

    @Test
    void gidLinePrintsDecimalBytesZeroPaddedToTwo() {
        assertEquals(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:10\n",
                PerftestFormat.gidLine("GID", GID_192_168_1_10));
    }

    @Test
    void reportLineMatchesReportFmt() {
        var r = new PerftestFormat.Report(65536, 5000, 1103.42, 1101.87, 0.017630);
        assertEquals(" 65536      5000             1103.42            1101.87\t\t     0.017630\n",
                PerftestFormat.reportLine(r, false));
    }

    @Test
    void reportLinePadsShortNumbersLeftJustified() {
        // %-7lu of 2, %-10lu of 5000, %-7.2lf of 1.5 -> "1.50   "
        var r = new PerftestFormat.Report(2, 5000, 1.5, 1.25, 0.5);
        assertEquals(" 2          5000             1.50               1.25   \t\t     0.500000\n",
                PerftestFormat.reportLine(r, false));
    }

    @Test
    void gbitsBelowPointOneUsesReportFmtExt() {
        var r = new PerftestFormat.Report(2, 5000, 0.05, 0.04, 2.5);
        assertEquals(" 2          5000           0.050000            0.040000            2.500000\n",
                PerftestFormat.reportLine(r, true));
        // MiB/s never switches to the extended format
        assertEquals(" 2          5000             0.05               0.04   \t\t     2.500000\n",
                PerftestFormat.reportLine(r, false));
    }

    @Test
    void resultHeaders() {
        assertEquals(PerftestFormat.RESULT_LINE
                + " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n",
                PerftestFormat.resultHeader(false));
        assertEquals(PerftestFormat.RESULT_LINE
                + " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n",
                PerftestFormat.resultHeader(true));
    }

    @Test
    void clientTestInfoBlock() {
        String expected = PerftestFormat.RESULT_LINE
                + "                    RDMA_Write BW Test\n"
                + " Dual-port       : OFF\t\tDevice         : rxe0\n"
                + " Number of qps   : 1\t\tTransport type : IB\n"
                + " Connection type : RC\t\tUsing SRQ      : OFF\n"
                + " PCIe relax order: Unsupported\t\tLock-free\t: Unsupported\n"
                + " ibv_wr* API     : OFF\t\tUsing Enhanced Reorder      : OFF\n"
                + " TX depth        : 128\n"
                + " CQ Moderation   : 100\n"
                + " CQE Poll Batch  : Dynamic\n"
                + " Mtu             : 1024[B]\n"
                + " Link type       : Ethernet\n"
                + " GID index       : 1\n"
                + " Max inline data : 0[B]\n"
                + " rdma_cm QPs\t : OFF\n"
                + " Data ex. method : Ethernet\n"
                + PerftestFormat.RESULT_LINE;
        assertEquals(expected, PerftestFormat.testInfo(info(true, 1)));
    }

    @Test
    void serverTestInfoHasNoTxDepthAndNoGidIndexWhenMinusOne() {
        String s = PerftestFormat.testInfo(info(false, -1));
        assertTrue(!s.contains("TX depth"), s);
        assertTrue(!s.contains("GID index"), s);
    }

    @Test
    void waitingBanner() {
        assertEquals("\n************************************\n* Waiting for client to connect... *\n"
                + "************************************\n", PerftestFormat.waitingBanner());
    }

    @Test
    void jsonDocumentHasPerftestKeys() {
        var r = new PerftestFormat.Report(65536, 5000, 1103.42, 1101.87, 0.017630);
        String j = PerftestFormat.json(info(true, 1), List.of(r), false);
        assertTrue(j.startsWith("{\n\"test_info\": {\n\"test\": \"RDMA_Write_BW_Test\",\n"), j);
        assertTrue(j.endsWith("\"results\": {\n\"MsgSize\": 65536,\n\"n_iterations\": 5000,\n\"BW_peak\": 1103.42,\n"
                + "\"BW_average\": 1101.87,\n\"MsgRate\": 0.017630\n}\n}\n"), j);
        String many = PerftestFormat.json(info(true, 1), List.of(r, r), false);
        assertTrue(many.contains("\"results\": [\n{\n\"MsgSize\": 65536,"), many);
        assertTrue(many.contains("}\n,\n{") || many.contains("},\n{"), many);
        assertTrue(many.endsWith("}\n]\n}\n"), many);
    }

    /**
     * A line of ib_write_lat on rxe in loopback, as posted to linux-rdma (February 2022, "Soft-RoCE
     * performance"), tabs included.
     */
    @Test
    void latencyLineMatchesARecordedPerftestLine() {
        var s = new LatStats(2, 1000, 1.57, 9.65, 1.84, 2.04, 0.69, 5.02, 9.65, false, 0);
        assertEquals(" 2       1000          1.57           9.65         1.84     \t       2.04        \t0.69   \t\t5.02"
                + "    \t\t9.65   \n", PerftestFormat.latLine(s));
    }

    @Test
    void latencyHeaderIsResultFmtLat() {
        assertEquals(PerftestFormat.RESULT_LINE + " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"
                + "    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n",
                PerftestFormat.latHeader(false));
        assertEquals(PerftestFormat.RESULT_LINE + " #bytes        #iterations       t_avg[usec]    tps average\n",
                PerftestFormat.latHeader(true));
        var d = LatStats.ofDuration(64, 123456, 1_000_000_000L, 1);
        // " %-7lu       %" PRIu64 "            %-7.2f        %-7.2f"
        assertEquals(" 64" + " ".repeat(12) + "123456" + " ".repeat(12) + "8.10" + " ".repeat(11) + "123456.00\n",
                PerftestFormat.latLine(d));
    }

    /** A recorded ib_read_lat address line (RoCE, OUT 0x10): READ_FMT then RDMA_FMT. */
    @Test
    void readAddressLineHasOutstandingReads() {
        var d = new PerftestFormat.Dest(0, 0x107, 0x79dd10, 0x1fddbc, 0x23bd000L, GID_192_168_1_10, 16);
        assertEquals(" local address: LID 0000 QPN 0x0107 PSN 0x79dd10 OUT 0x10 RKey 0x1fddbc VAddr 0x000000023bd000\n"
                + " GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:10\n",
                PerftestFormat.address("local", d, true, PerftestOptions.Verb.READ));
        assertEquals(" remote address: LID 0000 QPN 0x0107 PSN 0x79dd10\n",
                PerftestFormat.address("remote", d, false, PerftestOptions.Verb.SEND));
        assertEquals(" remote address: LID 0000 QPN 0x0107 PSN 0x79dd10\n",
                PerftestFormat.address("remote", d, false, PerftestOptions.Verb.ATOMIC));
    }

    @Test
    void titlesAndLinesOfTheOtherTools() {
        var lat = new PerftestFormat.TestInfo("RDMA_Read", null, true, 1, "rxe0", 1, "IB", "RC", true, 1, -1, 100,
                1024, "Ethernet", 1, 0, 16);
        String s = PerftestFormat.testInfo(lat);
        assertTrue(s.contains("                    RDMA_Read Latency Test\n"), s);
        assertTrue(s.contains(" Outstand reads  : 16\n") && !s.contains("Max inline"), s);
        assertTrue(!s.contains("CQ Moderation") && !s.contains("CQE Poll Batch"), s);
        var atomic = new PerftestFormat.TestInfo("Atomic", "FETCH_AND_ADD", false, 1, "rxe0", 1, "IB", "RC", true,
                128, -1, 100, 1024, "Ethernet", 1, 0, 16);
        assertTrue(PerftestFormat.testInfo(atomic).contains("                    Atomic FETCH_AND_ADD BW Test\n"));
        var sendServer = new PerftestFormat.TestInfo("Send", null, false, 1, "rxe0", 1, "IB", "RC", false, 128, 512,
                100, 1024, "Ethernet", 1, 0, -1);
        String ss = PerftestFormat.testInfo(sendServer);
        assertTrue(ss.contains(" RX depth        : 512\n CQ Moderation   : 100\n") && !ss.contains("TX depth"), ss);
        var post = new PerftestFormat.TestInfo("RDMA_Write", null, false, 4, "rxe0", 1, "IB", "RC", true, 128, -1,
                100, 1024, "Ethernet", -1, 0, -1);
        String ps = PerftestFormat.testInfo(post);
        assertTrue(ps.contains("RDMA_Write Post List BW Test\n") && ps.contains(" Post List       : 4\n"), ps);
    }

    @Test
    void latencyJsonParsesAndHasPerftestKeys() {
        var lat = new PerftestFormat.TestInfo("Send", null, true, 1, "rxe0", 1, "IB", "RC", true, 1, -1, 100, 1024,
                "Ethernet", 1, 236, -1);
        var s = new LatStats(2, 1000, 1.57, 9.65, 1.84, 2.04, 0.69, 5.02, 9.65, false, 0);
        String j = PerftestFormat.jsonLat(lat, List.of(s));
        assertTrue(j.contains("\"test\": \"Send_Latency_Test\",\n"), j);
        assertTrue(j.endsWith("\"results\": {\n\"MsgSize\": 2,\n\"n_iterations\": 1000,\n\"t_min\": 1.57,\n"
                + "\"t_max\": 9.65,\n\"t_typical\": 1.84,\n\"t_avg\": 2.04,\n\"t_stdev\": 0.69,\n"
                + "\"percentile_99\": 5.02,\n\"percentile_99.9\": 9.65\n}\n}\n"), j);
        MiniJson.parse(j);
        MiniJson.parse(PerftestFormat.jsonLat(lat, List.of(s, s)));
        MiniJson.parse(PerftestFormat.json(info(true, 1), List.of(new PerftestFormat.Report(2, 5, 1, 2, 3)), true));
    }
}
