// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.io.PrintStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/**
 * {@code rdma4j ipoib -d rxe0 --ifname ib0 --addr 10.200.0.1/24}: runs an IPoIB interface until stopped
 * (Ctrl-C), printing one line per neighbour learned and the counters on exit.
 */
public final class IpoibMain {
    private IpoibMain() {
    }

    /** The usage text. */
    public static final String USAGE = """
            Usage: rdma4j ipoib [options] --addr A.B.C.D/PREFIX
              -d, --ib-dev DEV     verbs device (default: the first one)
              --ifname NAME        TUN interface to create (default ib0)
              --addr A.B.C.D/N     the interface's IPv4 address and prefix length (required)
              --mode MODE          datagram (RFC 4391, the default) or connected (RFC 4755: RC connections to
                                   neighbours that offer them, set up with the IB CM, as /sys/class/net/ib0/mode
                                   in Linux)
              --mtu N              interface MTU (default: min(2044, port MTU - 4) in datagram mode, 65520 in
                                   connected mode)
              --pkey HEX           partition key (default ffff)
              --qkey HEX           broadcast group Q_Key (default 0x0b1b, OpenSM's)
              --reachable-ms N     how long a learned neighbour stays valid without ARP traffic (default 60000)
            Needs root (or CAP_NET_ADMIN) and /dev/net/tun.""";

    /**
     * Runs the daemon until {@code stopped} returns true.
     *
     * @param args    options
     * @param out     neighbour lines and the exit report
     * @param err     errors
     * @param stopped polled a few times a second
     * @return exit status: 0 after a stop, 1 on a usage or set-up error
     */
    public static int run(String[] args, PrintStream out, PrintStream err, BooleanSupplier stopped) {
        String dev = null;
        String ifname = "ib0";
        String addr = null;
        int mtu = 0;
        int pkey = Ipoib.DEFAULT_PKEY;
        int qkey = Ipoib.DEFAULT_QKEY;
        long reachableMs = 60_000;
        IpoibInterface.Mode mode = IpoibInterface.Mode.DATAGRAM;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "-d", "--ib-dev" -> dev = value(args, ++i, a);
                    case "--ifname" -> ifname = value(args, ++i, a);
                    case "--addr" -> addr = value(args, ++i, a);
                    case "--mtu" -> mtu = Integer.parseInt(value(args, ++i, a));
                    case "--mode" -> mode = switch (value(args, ++i, a)) {
                        case "datagram" -> IpoibInterface.Mode.DATAGRAM;
                        case "connected" -> IpoibInterface.Mode.CONNECTED;
                        default -> throw new IllegalArgumentException("--mode is datagram or connected");
                    };
                    case "--pkey" -> pkey = Integer.parseInt(strip(value(args, ++i, a)), 16);
                    case "--qkey" -> qkey = (int) Long.parseLong(strip(value(args, ++i, a)), 16);
                    case "--reachable-ms" -> reachableMs = Long.parseLong(value(args, ++i, a));
                    case "-h", "--help" -> {
                        out.println(USAGE);
                        return 0;
                    }
                    default -> throw new IllegalArgumentException("unknown option " + a);
                }
            }
            if (addr == null) {
                throw new IllegalArgumentException("--addr is required");
            }
            if (pkey < 1 || pkey > 0xFFFF || reachableMs < 1) {
                throw new IllegalArgumentException("P_Key must be 1..ffff and --reachable-ms positive");
            }
        } catch (IllegalArgumentException e) {
            err.println("ipoib: " + e.getMessage());
            err.println(USAGE);
            return 1;
        }
        int slash = addr.indexOf('/');
        Inet4Address ip;
        int prefix;
        try {
            InetAddress ia = InetAddress.getByName(slash < 0 ? addr : addr.substring(0, slash));
            if (!(ia instanceof Inet4Address v4)) {
                throw new UnknownHostException("not an IPv4 address");
            }
            ip = v4;
            prefix = slash < 0 ? 24 : Integer.parseInt(addr.substring(slash + 1));
        } catch (UnknownHostException | NumberFormatException e) {
            err.println("ipoib: bad --addr " + addr + ": " + e.getMessage());
            return 1;
        }
        IpoibInterface.Config cfg = new IpoibInterface.Config(ifname, ip, prefix, mtu, pkey, qkey, null,
                NanoClock.SYSTEM, TimeUnit.MILLISECONDS.toNanos(reachableMs), mode);
        IpoibInterface iface;
        Device device;
        try {
            device = dev == null ? firstDevice() : Verbs.device(dev);
            iface = IpoibInterface.start(device, cfg, line -> {
                synchronized (out) {
                    out.println(line);
                    out.flush();
                }
            });
        } catch (IOException | VerbsException | IllegalArgumentException e) {
            err.println("ipoib: " + e.getMessage());
            return 1;
        }
        synchronized (out) {
            out.println("ipoib: " + iface.name() + " up on " + device.name() + ", " + addr + ", mode "
                    + mode.name().toLowerCase(java.util.Locale.ROOT) + ", mtu " + iface.mtu()
                    + ", lladdr " + iface.hardwareAddress() + ", broadcast " + iface.broadcastGid());
            out.flush();
        }
        try {
            while (!stopped.getAsBoolean()) {
                Thread.sleep(100);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<String> neigh = iface.neighbourLines();
        iface.close();
        synchronized (out) {
            out.println("ipoib: " + cfg.ifname() + " down; neighbours at exit: " + neigh);
            out.print(iface.countersText());
            out.flush();
        }
        return 0;
    }

    private static Device firstDevice() {
        List<Device> all = Verbs.devices();
        if (all.isEmpty()) {
            throw new IllegalArgumentException("no RDMA device (configure one: RDMA4J_DEVICES=rxe0=10.0.0.1 or 'rdma4j link add')");
        }
        return all.getFirst();
    }

    private static String strip(String hex) {
        return hex.startsWith("0x") || hex.startsWith("0X") ? hex.substring(2) : hex;
    }

    private static String value(String[] args, int i, String opt) {
        if (i >= args.length) {
            throw new IllegalArgumentException(opt + " needs a value");
        }
        return args[i];
    }

    /**
     * Runs the daemon in its own JVM; SIGINT or SIGTERM stops it and the exit report is printed before the
     * JVM ends.
     *
     * @param args options
     */
    public static void main(String[] args) {
        CountDownLatch done = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            try {
                done.await(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "ipoib-stop"));
        int rc;
        try {
            rc = run(args, System.out, System.err, stop::get); // console: the ipoib command's output
        } finally {
            System.out.flush(); // console: the ipoib command's output
            done.countDown();
        }
        if (!stop.get()) {
            System.exit(rc);
        }
    }
}
