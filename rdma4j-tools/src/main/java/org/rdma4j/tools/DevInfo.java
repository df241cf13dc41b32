// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.util.List;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.TransportType;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/** {@code devices} (ibv_devices) and {@code devinfo} (ibv_devinfo, with -v), in rdma-core's formats. */
public final class DevInfo {
    private DevInfo() {
    }

    /**
     * ibv_devices.
     *
     * @param devices the devices
     * @return the listing
     */
    public static String devices(List<Device> devices) {
        StringBuilder sb = new StringBuilder();
        sb.append("    ").append(CFormat.left("device", 16)).append("\t   node GUID\n");
        sb.append("    ").append(CFormat.left("------", 16)).append("\t----------------\n");
        for (Device d : devices) {
            sb.append("    ").append(CFormat.left(d.name(), 16)).append('\t').append(CFormat.hex(d.guid(), 16))
                    .append('\n');
        }
        return sb.toString();
    }

    /**
     * guid_str: four groups of four hex digits.
     *
     * @param guid the GUID
     * @return e.g. {@code 0002:c903:0000:1234}
     */
    public static String guid(long guid) {
        return CFormat.hex((guid >>> 48) & 0xFFFF, 4) + ':' + CFormat.hex((guid >>> 32) & 0xFFFF, 4) + ':'
                + CFormat.hex((guid >>> 16) & 0xFFFF, 4) + ':' + CFormat.hex(guid & 0xFFFF, 4);
    }

    /**
     * print_hca_cap without -v.
     *
     * @param name  device name
     * @param attr  device attributes
     * @param ports attributes of ports 1..n (null entries are skipped)
     * @param only  the one port to show, or 0 for all
     * @return the block
     */
    public static String hcaCap(String name, DeviceAttributes attr, PortAttributes[] ports, int only) {
        return hcaCap(name, attr, ports, null, only);
    }

    /**
     * print_hca_cap, with {@code -v} when {@code gids} is given: the attributes the verbs API
     * exposes, each on the line and in the place ibv_devinfo -v prints it. Lines for attributes the
     * API does not report (max_sge_rd, max_mw, ODP caps, num_comp_vectors, port_cap_flags2, ...) are
     * left out rather than filled with made-up values.
     *
     * @param name  device name
     * @param attr  device attributes
     * @param ports attributes of ports 1..n (null entries are skipped)
     * @param gids  for -v: the GID table of each port (index = port - 1), or null without -v
     * @param only  the one port to show, or 0 for all
     * @return the block
     */
    public static String hcaCap(String name, DeviceAttributes attr, PortAttributes[] ports, Gid[][] gids, int only) {
        return hcaCap(name, TransportType.IB, attr, ports, gids, only);
    }

    /**
     * As {@link #hcaCap(String, DeviceAttributes, PortAttributes[], Gid[][], int)} for a device of any transport.
     *
     * @param name      device name
     * @param transport its transport (ibv_devinfo prints it on the second line)
     * @param attr      device attributes
     * @param ports     attributes of ports 1..n (null entries are skipped)
     * @param gids      for -v: the GID table of each port (index = port - 1), or null without -v
     * @param only      the one port to show, or 0 for all
     * @return the block
     */
    public static String hcaCap(String name, TransportType transport, DeviceAttributes attr, PortAttributes[] ports,
            Gid[][] gids, int only) {
        boolean verbose = gids != null;
        StringBuilder sb = new StringBuilder(512);
        sb.append("hca_id:\t").append(name).append('\n');
        TransportType tt = transport;
        sb.append("\ttransport:\t\t\t").append(tt.text()).append(" (").append(tt.value()).append(")\n");
        if (attr.fwVer() != null && !attr.fwVer().isEmpty()) {
            sb.append("\tfw_ver:\t\t\t\t").append(attr.fwVer()).append('\n');
        }
        sb.append("\tnode_guid:\t\t\t").append(guid(attr.nodeGuid())).append('\n');
        sb.append("\tsys_image_guid:\t\t\t").append(guid(attr.sysImageGuid())).append('\n');
        sb.append("\tvendor_id:\t\t\t").append("0x").append(CFormat.hex(attr.vendorId() & 0xFFFFFFFFL, 4)).append('\n');
        sb.append("\tvendor_part_id:\t\t\t").append(attr.vendorPartId()).append('\n');
        sb.append("\thw_ver:\t\t\t\t").append("0x").append(Integer.toHexString(attr.hwVer()).toUpperCase()).append('\n');
        sb.append("\tphys_port_cnt:\t\t\t").append(attr.physPortCnt()).append('\n');
        if (verbose) {
            verboseDevice(sb, attr);
        }
        for (int p = 1; p <= ports.length; p++) {
            PortAttributes pa = ports[p - 1];
            if (pa == null || (only != 0 && only != p)) {
                continue;
            }
            sb.append("\t\tport:\t").append(p).append('\n');
            sb.append("\t\t\tstate:\t\t\t").append(portState(pa.state())).append(" (").append(pa.state().ordinal())
                    .append(")\n");
            sb.append("\t\t\tmax_mtu:\t\t").append(mtu(pa.maxMtu())).append('\n');
            sb.append("\t\t\tactive_mtu:\t\t").append(mtu(pa.activeMtu())).append('\n');
            sb.append("\t\t\tsm_lid:\t\t\t").append(pa.smLid()).append('\n');
            sb.append("\t\t\tport_lid:\t\t").append(pa.lid()).append('\n');
            sb.append("\t\t\tport_lmc:\t\t").append("0x").append(CFormat.hex(pa.lmc(), 2)).append('\n');
            sb.append("\t\t\tlink_layer:\t\t").append(linkLayer(pa.linkLayer())).append('\n');
            if (verbose) {
                verbosePort(sb, pa, gids[p - 1], transport);
            }
            sb.append('\n');
        }
        return sb.toString();
    }

    /** ibv_device_cap_flags bits and the names print_device_cap_flags gives them, in its order. */
    private static final long[] CAP_BITS = {1, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9,
        1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 17, 1 << 18, 1 << 20, 1 << 21, 1 << 23, 1 << 24, 1 << 25,
        1 << 26, 1 << 29};
    private static final String[] CAP_NAMES = {"RESIZE_MAX_WR", "BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "RAW_MULTI",
        "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE", "CURR_QP_STATE_MOD", "SHUTDOWN_PORT", "INIT_TYPE",
        "PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "N_NOTIFY_CQ", "MEM_WINDOW",
        "UD_IP_CSUM", "XRC", "MEM_MGT_EXTENSIONS", "MEM_WINDOW_TYPE_2A", "MEM_WINDOW_TYPE_2B", "RC_IP_CSUM",
        "RAW_IP_CSUM", "MANAGED_FLOW_STEERING"};

    private static void verboseDevice(StringBuilder sb, DeviceAttributes a) {
        sb.append("\tmax_mr_size:\t\t\t0x").append(Long.toHexString(a.maxMrSize())).append('\n');
        sb.append("\tpage_size_cap:\t\t\t0x").append(Long.toHexString(a.pageSizeCap())).append('\n');
        sb.append("\tmax_qp:\t\t\t\t").append(a.maxQp()).append('\n');
        sb.append("\tmax_qp_wr:\t\t\t").append(a.maxQpWr()).append('\n');
        long flags = a.deviceCapFlags() & 0xFFFF_FFFFL;
        sb.append("\tdevice_cap_flags:\t\t0x").append(CFormat.hex(flags, 8)).append('\n');
        long known = 0;
        for (int i = 0; i < CAP_BITS.length; i++) {
            known |= CAP_BITS[i];
            if ((flags & CAP_BITS[i]) != 0) {
                sb.append("\t\t\t\t\t").append(CAP_NAMES[i]).append('\n');
            }
        }
        if ((flags & ~known) != 0) {
            sb.append("\t\t\t\t\tUnknown flags: 0x").append(Long.toHexString(flags & ~known).toUpperCase()).append('\n');
        }
        sb.append("\tmax_sge:\t\t\t").append(a.maxSge()).append('\n');
        sb.append("\tmax_cq:\t\t\t\t").append(a.maxCq()).append('\n');
        sb.append("\tmax_cqe:\t\t\t").append(a.maxCqe()).append('\n');
        sb.append("\tmax_mr:\t\t\t\t").append(a.maxMr()).append('\n');
        sb.append("\tmax_pd:\t\t\t\t").append(a.maxPd()).append('\n');
        sb.append("\tmax_qp_rd_atom:\t\t\t").append(a.maxQpRdAtom()).append('\n');
        sb.append("\tmax_qp_init_rd_atom:\t\t").append(a.maxQpInitRdAtom()).append('\n');
        int atomic = switch (a.atomicCap() == null ? "" : a.atomicCap()) {
            case "ATOMIC_NONE" -> 0;
            case "ATOMIC_HCA" -> 1;
            case "ATOMIC_GLOB" -> 2;
            default -> -1;
        };
        sb.append("\tatomic_cap:\t\t\t").append(atomic < 0 ? "invalid atomic capability" : a.atomicCap())
                .append(" (").append(atomic).append(")\n");
        sb.append("\tmax_ah:\t\t\t\t").append(a.maxAh()).append('\n');
        sb.append("\tmax_srq:\t\t\t").append(a.maxSrq()).append('\n');
        if (a.maxSrq() != 0) {
            sb.append("\tmax_srq_wr:\t\t\t").append(a.maxSrqWr()).append('\n');
            sb.append("\tmax_srq_sge:\t\t\t").append(a.maxSrqSge()).append('\n');
        }
        sb.append("\tlocal_ca_ack_delay:\t\t").append(a.localCaAckDelay()).append('\n');
    }

    private static void verbosePort(StringBuilder sb, PortAttributes pa, Gid[] gids, TransportType transport) {
        sb.append("\t\t\tmax_msg_sz:\t\t0x").append(Long.toHexString(pa.maxMsgSz() & 0xFFFF_FFFFL)).append('\n');
        sb.append("\t\t\tport_cap_flags:\t\t0x").append(CFormat.hex(pa.portCapFlags() & 0xFFFF_FFFFL, 8)).append('\n');
        sb.append("\t\t\tpkey_tbl_len:\t\t").append(pa.pkeyTblLen()).append('\n');
        sb.append("\t\t\tgid_tbl_len:\t\t").append(pa.gidTblLen()).append('\n');
        sb.append("\t\t\tactive_width:\t\t").append(width(pa.activeWidth())).append("X (").append(pa.activeWidth())
                .append(")\n");
        sb.append("\t\t\tactive_speed:\t\t").append(speed(pa.activeSpeed())).append(" (").append(pa.activeSpeed())
                .append(")\n");
        // ibv_devinfo shows the physical state for transport InfiniBand (rxe, the soft device), not for iWARP
        if (transport == TransportType.IB) {
            sb.append("\t\t\tphys_state:\t\t").append(physState(pa.physState())).append(" (").append(pa.physState())
                    .append(")\n");
        }
        boolean ethernet = "Ethernet".equals(linkLayer(pa.linkLayer()));
        for (int i = 0; i < gids.length; i++) {
            Gid g = gids[i];
            // ibv_devinfo's null_gid: an entry whose interface id (bytes 8..15) is zero is not shown.
            if (g == null || g.lo() == 0) {
                continue;
            }
            sb.append("\t\t\tGID[").append(CFormat.right(Integer.toString(i), 3)).append("]:\t\t");
            if (ethernet) {
                // RoCE v2 GIDs print as IPv6 addresses; the devices rdma4j drives are RoCE v2.
                sb.append(PingPongDest.ntop(g)).append(", RoCE v2\n");
            } else {
                // IB GIDs print as eight groups of four hex digits (the "IB/RoCE v1" GID type).
                sb.append(g).append('\n');
            }
        }
    }

    private static String width(int w) {
        return switch (w) {
            case 1 -> "1";
            case 2 -> "4";
            case 4 -> "8";
            case 8 -> "12";
            case 16 -> "2";
            default -> "invalid width";
        };
    }

    private static String speed(int s) {
        return switch (s) {
            case 1 -> "2.5 Gbps";
            case 2 -> "5.0 Gbps";
            case 4, 8 -> "10.0 Gbps";
            case 16 -> "14.0 Gbps";
            case 32 -> "25.0 Gbps";
            case 64 -> "50.0 Gbps";
            case 128 -> "100.0 Gbps";
            case 256 -> "200.0 Gbps";
            default -> "invalid speed";
        };
    }

    private static String physState(int s) {
        return switch (s) {
            case 1 -> "SLEEP";
            case 2 -> "POLLING";
            case 3 -> "DISABLED";
            case 4 -> "PORT_CONFIGURATION TRAINNING";
            case 5 -> "LINK_UP";
            case 6 -> "LINK_ERROR_RECOVERY";
            case 7 -> "PHY TEST";
            default -> "invalid physical state";
        };
    }

    private static String portState(PortState s) {
        return switch (s) {
            case DOWN, INIT, ARMED, ACTIVE -> s.portStateString();
            default -> "invalid state";
        };
    }

    private static String mtu(Mtu m) {
        return m.bytes() + " (" + m.value() + ")";
    }

    private static String linkLayer(String l) {
        if (l == null || l.equalsIgnoreCase("InfiniBand") || l.equalsIgnoreCase("IB") || l.isEmpty()) {
            return "InfiniBand";
        }
        if (l.equalsIgnoreCase("Ethernet")) {
            return "Ethernet";
        }
        return "Unknown";
    }

    /**
     * The devinfo subcommand: {@code [-d dev] [-i port] [-l]}.
     *
     * @param args arguments
     * @param out  output
     * @param err  errors
     * @return exit status
     */
    public static int devinfoMain(String[] args, PrintStream out, PrintStream err) {
        String dev = null;
        int port = 0;
        boolean list = false;
        boolean verbose = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "-d", "--ib-dev" -> {
                    if (++i >= args.length) {
                        return usage(err);
                    }
                    dev = args[i];
                }
                case "-i", "--ib-port" -> {
                    if (++i >= args.length) {
                        return usage(err);
                    }
                    try {
                        port = Integer.decode(args[i]);
                    } catch (NumberFormatException e) {
                        return usage(err);
                    }
                    if (port <= 0) {
                        return usage(err);
                    }
                }
                case "-l", "--list" -> list = true;
                case "-v", "--verbose" -> verbose = true;
                case "-h", "--help" -> {
                    usage(out);
                    return 0;
                }
                default -> {
                    if (a.startsWith("--ib-dev=")) {
                        dev = a.substring("--ib-dev=".length());
                    } else if (a.startsWith("-d") && a.length() > 2) {
                        dev = a.substring(2);
                    } else {
                        err.println("devinfo: unrecognized option '" + a + "'");
                        return usage(err);
                    }
                }
            }
        }
        List<Device> devices = Verbs.devices();
        if (list) {
            out.printf("%d HCA%s found:%n", devices.size(), devices.size() != 1 ? "s" : "");
            for (Device d : devices) {
                out.println("\t" + d.name());
            }
            out.println();
            return 0;
        }
        List<Device> chosen;
        if (dev != null) {
            final String want = dev;
            chosen = devices.stream().filter(d -> d.name().equals(want)).toList();
            if (chosen.isEmpty()) {
                err.println("IB device '" + dev + "' wasn't found; known devices: "
                        + devices.stream().map(Device::name).toList());
                return 255;
            }
        } else {
            if (devices.isEmpty()) {
                err.println("No IB devices found");
                return 255;
            }
            chosen = devices;
        }
        int rc = 0;
        for (Device d : chosen) {
            try (Context ctx = d.open()) {
                DeviceAttributes attr = ctx.queryDevice();
                if (port > attr.physPortCnt()) {
                    err.println("Invalid port requested for device");
                    rc |= 4;
                    continue;
                }
                PortAttributes[] ports = new PortAttributes[attr.physPortCnt()];
                Gid[][] gids = verbose ? new Gid[ports.length][] : null;
                for (int p = 1; p <= ports.length; p++) {
                    if (port == 0 || port == p) {
                        ports[p - 1] = ctx.queryPort(p);
                        if (verbose) {
                            gids[p - 1] = new Gid[ports[p - 1].gidTblLen()];
                            for (int i = 0; i < gids[p - 1].length; i++) {
                                gids[p - 1][i] = ctx.queryGid(p, i);
                            }
                        }
                    }
                }
                out.print(hcaCap(d.name(), d.transportType(), attr, ports, gids, port));
            } catch (VerbsException e) {
                err.println("Failed to query device " + d.name() + ": " + e.getMessage());
                rc |= 2;
            }
        }
        return rc;
    }

    private static int usage(PrintStream s) {
        s.println("Usage: rdma4j devinfo             print the ca attributes");
        s.println();
        s.println("Options:");
        s.println("  -d, --ib-dev=<dev>     use IB device <dev> (default all devices)");
        s.println("  -i, --ib-port=<port>   use port <port> of IB device (default all ports)");
        s.println("  -l, --list             print only the IB devices names");
        s.println("  -v, --verbose          print all the attributes of the IB device(s)");
        return 255;
    }
}
