// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.rdma4j.tools.CFormat.altHex;
import static org.rdma4j.tools.CFormat.dec;
import static org.rdma4j.tools.CFormat.fixed;
import static org.rdma4j.tools.CFormat.left;
import static org.rdma4j.tools.CFormat.leftFixed;
import static org.rdma4j.tools.CFormat.unsigned;

import java.util.List;

/**
 * What perftest 6.29 prints, byte for byte: {@code ctx_print_test_info}, {@code ctx_print_pingpong_data},
 * the result header and {@code print_full_bw_report} (REPORT_FMT / REPORT_FMT_EXT), and the JSON document
 * of {@code --out_json}. Every method returns whole lines, each ending in {@code \n}.
 */
public final class PerftestFormat {
    /** perftest's RESULT_LINE: 87 dashes. */
    public static final String RESULT_LINE = "-".repeat(87) + "\n";
    /** RESULT_FMT (MiB/s), without the trailing RESULT_EXT newline. */
    public static final String RESULT_FMT =
            " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
    /** RESULT_FMT_G (Gb/s, {@code --report_gbits}), without the trailing newline. */
    public static final String RESULT_FMT_G =
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
    /** The warning perftest prints when the peak is not computed (duration mode, more than 20000 iterations). */
    public static final String NO_PEAK_WARNING = " WARNING: BW peak won't be measured in this run.\n";
    /** The perftest version this output follows. */
    public static final String PERFTEST_VERSION = "6.29";

    /** 1 MiB: the MiB/s unit (report_fmt MBS). */
    public static final double MBS = 0x100000;
    /** 1 Gb/s in bytes per second (report_fmt GBS). */
    public static final double GBS = 125_000_000;

    private PerftestFormat() {
    }

    /**
     * What the test-info block shows.
     *
     * @param testName   testsStr entry: {@code RDMA_Write}, {@code RDMA_Read}, {@code Send}, {@code Atomic}
     * @param atomicType {@code FETCH_AND_ADD} or {@code CMP_AND_SWAP} for the atomic tests, else null
     * @param lat        a latency test (title "Latency", no CQ moderation lines)
     * @param postList   post list (&gt; 1 adds "Post List" to a BW title and a line)
     * @param device     device name
     * @param numQps     number of QPs
     * @param transport  transport_str: {@code IB} or {@code IW}
     * @param connection connStr: {@code RC}, {@code UC}, ...
     * @param client     true on the client (prints TX depth)
     * @param txDepth    TX depth
     * @param rxDepth    RX depth, printed when &gt;= 0 (a SEND server)
     * @param cqMod      CQ moderation
     * @param mtuBytes   the path MTU in bytes
     * @param linkType   link_layer_str: {@code IB} or {@code Ethernet}
     * @param gidIndex   GID index, -1 when none (not printed)
     * @param inlineSize max inline data
     * @param outReads   outstanding reads, printed instead of the inline size when &gt;= 0 (READ, ATOMIC)
     * @param rdmaCm     {@code -R}: the QPs and the exchange use rdma_cm ("rdma_cm QPs : ON")
     */
    public record TestInfo(String testName, String atomicType, boolean lat, int postList, String device, int numQps,
                           String transport, String connection, boolean client, int txDepth, int rxDepth, int cqMod,
                           int mtuBytes, String linkType, int gidIndex, int inlineSize, int outReads, boolean rdmaCm) {
        /**
         * A test without rdma_cm ({@code -R}).
         *
         * @param testName   testsStr entry: {@code RDMA_Write}, {@code RDMA_Read}, {@code Send}, {@code Atomic}
         * @param atomicType {@code FETCH_AND_ADD} or {@code CMP_AND_SWAP} for the atomic tests, else null
         * @param lat        a latency test (title "Latency", no CQ moderation lines)
         * @param postList   post list (&gt; 1 adds "Post List" to a BW title and a line)
         * @param device     device name
         * @param numQps     number of QPs
         * @param transport  transport_str: {@code IB} or {@code IW}
         * @param connection connStr: {@code RC}, {@code UC}, ...
         * @param client     true on the client (prints TX depth)
         * @param txDepth    TX depth
         * @param rxDepth    RX depth, printed when &gt;= 0 (a SEND server)
         * @param cqMod      CQ moderation
         * @param mtuBytes   the path MTU in bytes
         * @param linkType   link_layer_str: {@code IB} or {@code Ethernet}
         * @param gidIndex   GID index, -1 when none (not printed)
         * @param inlineSize max inline data
         * @param outReads   outstanding reads, printed instead of the inline size when &gt;= 0 (READ, ATOMIC)
         */
        public TestInfo(String testName, String atomicType, boolean lat, int postList, String device, int numQps,
                        String transport, String connection, boolean client, int txDepth, int rxDepth, int cqMod,
                        int mtuBytes, String linkType, int gidIndex, int inlineSize, int outReads) {
            this(testName, atomicType, lat, postList, device, numQps, transport, connection, client, txDepth, rxDepth,
                    cqMod, mtuBytes, linkType, gidIndex, inlineSize, outReads, false);
        }

        /**
         * The ib_write_bw block (the first tool's constructor).
         *
         * @param testName testsStr entry: {@code RDMA_Write}, {@code RDMA_Read}, {@code Send}, {@code Atomic}
         * @param device device name
         * @param numQps number of QPs
         * @param transport transport_str: {@code IB} or {@code IW}
         * @param connection connStr: {@code RC}, {@code UC}, ...
         * @param client true on the client (prints TX depth)
         * @param txDepth TX depth
         * @param cqMod CQ moderation
         * @param mtuBytes the path MTU in bytes
         * @param linkType link_layer_str: {@code IB} or {@code Ethernet}
         * @param gidIndex GID index, -1 when none (not printed)
         * @param inlineSize max inline data
         */
        public TestInfo(String testName, String device, int numQps, String transport, String connection,
                        boolean client, int txDepth, int cqMod, int mtuBytes, String linkType, int gidIndex,
                        int inlineSize) {
            this(testName, null, false, 1, device, numQps, transport, connection, client, txDepth, -1, cqMod, mtuBytes,
                    linkType, gidIndex, inlineSize, -1);
        }

        /** {@return the title words after the test name: "FETCH_AND_ADD BW", "Latency", "Post List BW"} */
        String titleWords(String sep) {
            StringBuilder t = new StringBuilder();
            if (atomicType != null) {
                t.append(atomicType).append(sep);
            }
            if (lat) {
                t.append("Latency");
            } else {
                if (postList > 1) {
                    t.append("Post").append(sep).append("List").append(sep);
                }
                t.append("BW");
            }
            return t.toString();
        }
    }

    /**
     * One side's QP as perftest exchanges and prints it (struct pingpong_dest).
     *
     * @param lid   LID
     * @param qpn   QP number
     * @param psn   starting PSN
     * @param rkey  R_Key of the buffer
     * @param vaddr buffer address
     * @param gid   16 GID bytes, network order
     * @param outReads outstanding reads (the keys message's second field)
     */
    public record Dest(int lid, int qpn, int psn, int rkey, long vaddr, byte[] gid, int outReads) {
        /**
         * A destination without outstanding reads (WRITE, SEND).
         *
         * @param lid LID
         * @param qpn QP number
         * @param psn starting PSN
         * @param rkey R_Key of the buffer
         * @param vaddr buffer address
         * @param gid 16 GID bytes, network order
         */
        public Dest(int lid, int qpn, int psn, int rkey, long vaddr, byte[] gid) {
            this(lid, qpn, psn, rkey, vaddr, gid, 0);
        }
    }

    /**
     * One result line (struct bw_report_data).
     *
     * @param size        message size
     * @param iters       iterations
     * @param bwPeak      peak bandwidth in the report unit
     * @param bwAvg       average bandwidth in the report unit
     * @param msgRateMpps average message rate in Mpps
     */
    public record Report(long size, long iters, double bwPeak, double bwAvg, double msgRateMpps) {
    }

    /** {@return the server's banner before it waits for the client} */
    public static String waitingBanner() {
        return "\n************************************\n"
                + "* Waiting for client to connect... *\n"
                + "************************************\n";
    }

    /**
     * ctx_print_test_info for a BW test (FULL_VERBOSITY, no rdma_cm, built without PCIe relaxed
     * ordering and thread-domain support, which is what a software device is).
     *
     * @param info what to show
     * @return the block, from the opening RESULT_LINE to the closing one
     */
    public static String testInfo(TestInfo info) {
        StringBuilder sb = new StringBuilder(1024);
        sb.append(RESULT_LINE);
        sb.append("                    ").append(info.testName()).append(' ').append(info.titleWords(" "))
                .append(" Test\n");
        sb.append(" Dual-port       : ").append("OFF").append("\t\tDevice         : ").append(info.device()).append('\n');
        sb.append(" Number of qps   : ").append(info.numQps()).append("\t\tTransport type : ").append(info.transport())
                .append('\n');
        sb.append(" Connection type : ").append(info.connection()).append("\t\tUsing SRQ      : ").append("OFF")
                .append('\n');
        sb.append(" PCIe relax order: ").append("Unsupported").append("\t\tLock-free\t: ").append("Unsupported")
                .append('\n');
        sb.append(" ibv_wr* API     : ").append("OFF").append("\t\tUsing Enhanced Reorder      : ").append("OFF")
                .append('\n');
        if (info.client()) {
            sb.append(" TX depth        : ").append(info.txDepth()).append('\n');
        }
        if (info.postList() > 1) {
            sb.append(" Post List       : ").append(info.postList()).append('\n');
        }
        if (info.rxDepth() >= 0) {
            sb.append(" RX depth        : ").append(info.rxDepth()).append('\n');
        }
        if (!info.lat()) {
            sb.append(" CQ Moderation   : ").append(info.cqMod()).append('\n');
            sb.append(" CQE Poll Batch  : Dynamic\n");
        }
        sb.append(" Mtu             : ").append(info.mtuBytes()).append("[B]\n");
        sb.append(" Link type       : ").append(info.linkType()).append('\n');
        if (info.gidIndex() != -1) {
            sb.append(" GID index       : ").append(info.gidIndex()).append('\n');
        }
        if (info.outReads() >= 0) {
            sb.append(" Outstand reads  : ").append(info.outReads()).append('\n');
        } else {
            sb.append(" Max inline data : ").append(info.inlineSize()).append("[B]\n");
        }
        sb.append(" rdma_cm QPs\t : ").append(info.rdmaCm() ? "ON" : "OFF").append('\n');
        sb.append(" Data ex. method : ").append(info.rdmaCm() ? "rdma_cm" : "Ethernet");
        if (info.rdmaCm() && !info.client()) {
            sb.append('\n').append(RESULT_LINE);
            sb.append(" Waiting for client rdma_cm QP to connect\n");
            sb.append(" Please run the same command with the IB/RoCE interface IP");
        }
        sb.append('\n');
        sb.append(RESULT_LINE);
        return sb.toString();
    }

    /**
     * ctx_print_pingpong_data for an RDMA WRITE test: BASIC_ADDR_FMT + RDMA_FMT, then PERF_GID_FMT when
     * a GID index is in use.
     *
     * @param side    {@code local} or {@code remote}
     * @param dest    the QP
     * @param withGid whether a GID index is in use (gid_index &gt; -1)
     * @return one or two lines
     */
    public static String address(String side, Dest dest, boolean withGid) {
        return address(side, dest, withGid, PerftestOptions.Verb.WRITE);
    }

    /**
     * ctx_print_pingpong_data: BASIC_ADDR_FMT, then for READ {@code READ_FMT " OUT %#04x"} followed by
     * RDMA_FMT, for WRITE RDMA_FMT alone, for SEND and ATOMIC nothing more; then PERF_GID_FMT when a
     * GID index is in use.
     *
     * @param side    {@code local} or {@code remote}
     * @param dest    the QP
     * @param withGid whether a GID index is in use (gid_index &gt; -1)
     * @param verb    the test's verb
     * @return one or two lines
     */
    public static String address(String side, Dest dest, boolean withGid, PerftestOptions.Verb verb) {
        StringBuilder sb = new StringBuilder(160);
        // BASIC_ADDR_FMT " %s address: LID %#04x QPN %#06x PSN %#06x"
        sb.append(' ').append(side).append(" address: LID ").append(altHex(dest.lid() & 0xFFFF, 4))
                .append(" QPN ").append(altHex(dest.qpn() & 0xFFFFFFL, 6))
                .append(" PSN ").append(altHex(dest.psn() & 0xFFFFFFL, 6));
        if (verb == PerftestOptions.Verb.READ) {
            sb.append(" OUT ").append(altHex(dest.outReads() & 0xFFFF, 4));
        }
        if (verb == PerftestOptions.Verb.READ || verb == PerftestOptions.Verb.WRITE) {
            // RDMA_FMT " RKey %#08x VAddr %#016llx"
            sb.append(" RKey ").append(altHex(dest.rkey() & 0xFFFFFFFFL, 8))
                    .append(" VAddr ").append(altHex(dest.vaddr(), 16));
        }
        sb.append('\n');
        if (withGid) {
            sb.append(gidLine("GID", dest.gid()));
        }
        return sb.toString();
    }

    /**
     * PERF_GID_FMT {@code " %s: %02d:...:%02d\n"}: the 16 bytes in <em>decimal</em>.
     *
     * @param label {@code GID} or {@code MGID}
     * @param gid   16 bytes
     * @return the line
     */
    public static String gidLine(String label, byte[] gid) {
        StringBuilder sb = new StringBuilder(72);
        sb.append(' ').append(label).append(": ");
        for (int i = 0; i < 16; i++) {
            if (i > 0) {
                sb.append(':');
            }
            sb.append(dec(gid[i] & 0xFF, 2));
        }
        return sb.append('\n').toString();
    }

    /**
     * The header before the results: RESULT_LINE, RESULT_FMT or RESULT_FMT_G, RESULT_EXT.
     *
     * @param gbits {@code --report_gbits}
     * @return two lines
     */
    public static String resultHeader(boolean gbits) {
        return RESULT_LINE + (gbits ? RESULT_FMT_G : RESULT_FMT) + "\n";
    }

    /**
     * print_full_bw_report: REPORT_FMT, or REPORT_FMT_EXT when the average is below 0.1 Gb/s in Gb/s
     * mode, then REPORT_EXT.
     *
     * @param r     the report
     * @param gbits {@code --report_gbits}
     * @return the line
     */
    public static String reportLine(Report r, boolean gbits) {
        StringBuilder sb = new StringBuilder(100);
        if (incAccuracy(r, gbits)) {
            // REPORT_FMT_EXT " %-7lu    %" PRIu64 "           %-7.6lf            %-7.6lf            %-7.6lf"
            sb.append(' ').append(left(unsigned(r.size()), 7)).append("    ").append(unsigned(r.iters()))
                    .append("           ").append(leftFixed(r.bwPeak(), 7, 6))
                    .append("            ").append(leftFixed(r.bwAvg(), 7, 6))
                    .append("            ").append(leftFixed(r.msgRateMpps(), 7, 6));
        } else {
            // REPORT_FMT " %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
            sb.append(' ').append(left(unsigned(r.size()), 7)).append("    ").append(left(unsigned(r.iters()), 10))
                    .append("       ").append(leftFixed(r.bwPeak(), 7, 2))
                    .append("            ").append(leftFixed(r.bwAvg(), 7, 2))
                    .append("\t\t     ").append(leftFixed(r.msgRateMpps(), 7, 6));
        }
        return sb.append('\n').toString();
    }

    private static boolean incAccuracy(Report r, boolean gbits) {
        return gbits && r.bwAvg() < 0.1;
    }

    /**
     * The document perftest writes with {@code --out_json} (write_test_info_to_file and
     * write_bw_report_to_file). With several reports (run over all sizes) {@code results} is an array
     * of the same objects; with one it is the object, as in perftest.
     *
     * @param info    the test info
     * @param reports the results
     * @param gbits   {@code --report_gbits}
     * @return the JSON text
     */
    public static String json(TestInfo info, List<Report> reports, boolean gbits) {
        return jsonDoc(info, reports.stream().map(r -> jsonResult(r, gbits)).toList());
    }

    /**
     * The {@code --out_json} document of a latency test (write_report_lat_to_file's objects).
     *
     * @param info  the test info
     * @param stats the results, one per size
     * @return the JSON text
     */
    public static String jsonLat(TestInfo info, List<LatStats> stats) {
        return jsonDoc(info, stats.stream().map(PerftestFormat::jsonLatResult).toList());
    }

    private static String jsonDoc(TestInfo info, List<String> results) {
        StringBuilder sb = new StringBuilder(1024);
        sb.append("{\n");
        sb.append("\"test_info\": {\n");
        sb.append("\"test\": \"").append(info.testName()).append('_').append(info.titleWords("_")).append("_Test\",\n");
        sb.append("\"Dual_port\": \"OFF\",\n\"Device\": \"").append(info.device()).append("\",\n");
        sb.append("\"Number_of_qps\": ").append(info.numQps()).append(",\n\"Transport_type\": \"")
                .append(info.transport()).append("\",\n");
        sb.append("\"Connection_type\": \"").append(info.connection()).append("\",\n\"Using_SRQ\": \"OFF\",\n");
        sb.append(" \"PCIe_relax_order\": \"Unsupported\",\n");
        sb.append("\"ibv_wr_API\": \"OFF\",\n");
        if (info.client()) {
            sb.append("\"TX_depth\": ").append(info.txDepth()).append(",\n");
        }
        if (info.postList() > 1) {
            sb.append("\"Post_List\": ").append(info.postList()).append(",\n");
        }
        if (info.rxDepth() >= 0) {
            sb.append("\"RX_depth\": ").append(info.rxDepth()).append(",\n");
        }
        if (!info.lat()) {
            sb.append("\"CQ_Moderation\": ").append(info.cqMod()).append(",\n");
        }
        sb.append("\"Mtu\": ").append(info.mtuBytes()).append(",\n");
        sb.append("\"Link_type\": \"").append(info.linkType()).append("\",\n");
        if (info.gidIndex() != -1) {
            sb.append("\"GID_index\": ").append(info.gidIndex()).append(",\n");
        }
        if (info.outReads() >= 0) {
            sb.append("\"Outstand_reads\": ").append(info.outReads()).append(",\n");
        } else {
            sb.append("\"Max_inline_data\": ").append(info.inlineSize()).append(",\n");
        }
        sb.append("\"rdma_cm_QPs\": \"").append(info.rdmaCm() ? "ON" : "OFF").append("\",\n");
        sb.append("\"Use_ROCm_memory\": \"OFF\",\n");
        sb.append("\"Use_MUSA_memory\": \"OFF\",\n");
        sb.append("\"Data_ex_method\": \"").append(info.rdmaCm() ? "rdma_cm" : "Ethernet").append('"');
        sb.append("\n},\n");
        sb.append("\"results\": ");
        if (results.size() == 1) {
            sb.append(results.get(0));
        } else {
            sb.append("[\n");
            for (int i = 0; i < results.size(); i++) {
                sb.append(results.get(i));
                if (i + 1 < results.size()) {
                    sb.setLength(sb.length() - 1);
                    sb.append(",\n");
                }
            }
            sb.append("]\n");
        }
        sb.append("}\n");
        return sb.toString();
    }

    /**
     * write_bw_report_to_file's object: REPORT_FMT_JSON (or _EXT_JSON) and REPORT_EXT_JSON.
     *
     * @param r     the report
     * @param gbits {@code --report_gbits}
     * @return the object, ending in a newline
     */
    public static String jsonResult(Report r, boolean gbits) {
        int p = incAccuracy(r, gbits) ? 6 : 2;
        return "{\n"
                + "\"MsgSize\": " + unsigned(r.size()) + ",\n"
                + "\"n_iterations\": " + unsigned(r.iters()) + ",\n"
                + "\"BW_peak\": " + fixed(r.bwPeak(), p) + ",\n"
                + "\"BW_average\": " + fixed(r.bwAvg(), p) + ",\n"
                + "\"MsgRate\": " + fixed(r.msgRateMpps(), 6)
                + "\n"
                + "}\n";
    }

    /** RESULT_FMT_LAT (printed with %s, so the percent signs are single), without RESULT_EXT. */
    public static final String RESULT_FMT_LAT = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]"
            + "    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
    /** RESULT_FMT_LAT_DUR (duration mode), without RESULT_EXT. */
    public static final String RESULT_FMT_LAT_DUR = " #bytes        #iterations       t_avg[usec]    tps average";

    /**
     * The latency table header: RESULT_LINE, RESULT_FMT_LAT or RESULT_FMT_LAT_DUR, RESULT_EXT.
     *
     * @param duration duration mode (-D)
     * @return two lines
     */
    public static String latHeader(boolean duration) {
        return RESULT_LINE + (duration ? RESULT_FMT_LAT_DUR : RESULT_FMT_LAT) + "\n";
    }

    /**
     * print_report_lat's line: REPORT_FMT_LAT then REPORT_EXT, or REPORT_FMT_LAT_DUR in duration mode.
     *
     * @param s the statistics
     * @return the line
     */
    public static String latLine(LatStats s) {
        StringBuilder sb = new StringBuilder(140);
        if (s.duration()) {
            // REPORT_FMT_LAT_DUR " %-7lu       %" PRIu64 "            %-7.2f        %-7.2f"
            sb.append(' ').append(left(unsigned(s.size()), 7)).append("       ").append(unsigned(s.iters()))
                    .append("            ").append(leftFixed(s.avg(), 7, 2))
                    .append("        ").append(leftFixed(s.tps(), 7, 2));
        } else {
            // REPORT_FMT_LAT " %-7lu %" PRIu64 "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f
            //                 \t%-7.2f\t\t%-7.2f \t\t%-7.2f"
            sb.append(' ').append(left(unsigned(s.size()), 7)).append(' ').append(unsigned(s.iters()))
                    .append("          ").append(leftFixed(s.min(), 7, 2))
                    .append("        ").append(leftFixed(s.max(), 7, 2))
                    .append("      ").append(leftFixed(s.typical(), 7, 2))
                    .append("  \t       ").append(leftFixed(s.avg(), 7, 2))
                    .append("     \t").append(leftFixed(s.stdev(), 7, 2))
                    .append("\t\t").append(leftFixed(s.p99(), 7, 2))
                    .append(" \t\t").append(leftFixed(s.p999(), 7, 2));
        }
        return sb.append('\n').toString();
    }

    /**
     * write_report_lat_to_file's object (REPORT_FMT_LAT_JSON, or REPORT_FMT_LAT_DUR_JSON), then REPORT_EXT_JSON.
     *
     * @param s the statistics
     * @return the object, ending in a newline
     */
    public static String jsonLatResult(LatStats s) {
        if (s.duration()) {
            return "{\n\"MsgSize\": " + unsigned(s.size()) + ",\n\"n_iterations\": " + unsigned(s.iters())
                    + ",\n\"t_avg\": " + fixed(s.avg(), 2) + ",\n\"tps_average\": " + fixed(s.tps(), 2) + "\n}\n";
        }
        return "{\n\"MsgSize\": " + unsigned(s.size()) + ",\n\"n_iterations\": " + unsigned(s.iters())
                + ",\n\"t_min\": " + fixed(s.min(), 2) + ",\n\"t_max\": " + fixed(s.max(), 2)
                + ",\n\"t_typical\": " + fixed(s.typical(), 2) + ",\n\"t_avg\": " + fixed(s.avg(), 2)
                + ",\n\"t_stdev\": " + fixed(s.stdev(), 2) + ",\n\"percentile_99\": " + fixed(s.p99(), 2)
                + ",\n\"percentile_99.9\": " + fixed(s.p999(), 2) + "\n}\n";
    }
}
