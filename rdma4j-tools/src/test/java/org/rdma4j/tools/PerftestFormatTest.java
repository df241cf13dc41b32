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
}
