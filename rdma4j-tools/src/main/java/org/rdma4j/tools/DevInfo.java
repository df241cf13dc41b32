package org.rdma4j.tools;

import java.io.PrintStream;
import java.util.List;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/** {@code devices} (ibv_devices) and {@code devinfo} (ibv_devinfo without -v), in rdma-core's formats. */
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
        StringBuilder sb = new StringBuilder(512);
        sb.append("hca_id:\t").append(name).append('\n');
        sb.append("\ttransport:\t\t\t").append("InfiniBand").append(" (0)\n");
        if (attr.fwVer() != null && !attr.fwVer().isEmpty()) {
            sb.append("\tfw_ver:\t\t\t\t").append(attr.fwVer()).append('\n');
        }
        sb.append("\tnode_guid:\t\t\t").append(guid(attr.nodeGuid())).append('\n');
        sb.append("\tsys_image_guid:\t\t\t").append(guid(attr.sysImageGuid())).append('\n');
        sb.append("\tvendor_id:\t\t\t").append("0x").append(CFormat.hex(attr.vendorId() & 0xFFFFFFFFL, 4)).append('\n');
        sb.append("\tvendor_part_id:\t\t\t").append(attr.vendorPartId()).append('\n');
        sb.append("\thw_ver:\t\t\t\t").append("0x").append(Integer.toHexString(attr.hwVer()).toUpperCase()).append('\n');
        sb.append("\tphys_port_cnt:\t\t\t").append(attr.physPortCnt()).append('\n');
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
            sb.append('\n');
        }
        return sb.toString();
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
                for (int p = 1; p <= ports.length; p++) {
                    if (port == 0 || port == p) {
                        ports[p - 1] = ctx.queryPort(p);
                    }
                }
                out.print(hcaCap(d.name(), attr, ports, port));
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
        s.println("  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)");
        s.println("  -i, --ib-port=<port>   use port <port> of IB device (default all ports)");
        s.println("  -l, --list             print only the IB devices names");
        return 255;
    }
}
