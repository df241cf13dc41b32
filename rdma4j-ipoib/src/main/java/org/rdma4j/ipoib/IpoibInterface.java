// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.IOException;
import java.net.Inet4Address;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;

import org.rdma4j.common.NanoClock;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.IbSocketAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * An IPoIB interface: a TUN interface whose IPv4 packets travel as UD messages with the 4-byte IPoIB header
 * (RFC 4391 datagram mode), and ARP with 20-byte hardware addresses over the partition's broadcast group,
 * which the interface's UD QP joins; in connected mode (RFC 4755) unicast packets to neighbours that offer
 * it travel on RC connections with a 65520-byte MTU, set up with the InfiniBand CM (REQ, REP, RTU to service ID
 * {@code 0x1000000000000000 | UD QPN}, as Linux's ipoib_cm.c does).
 *
 * <p>This class is the facade and the lifecycle (Linux {@code ipoib_main.c}'s {@code ipoib_open}/{@code ipoib_stop});
 * the parts follow Linux's {@code drivers/infiniband/ulp/ipoib}:
 * <ul>
 *   <li>{@link IpoibResources}: PD, CQs, the UD QP and the group ({@code ipoib_verbs.c}), the shared state and the
 *   interface lock;</li>
 *   <li>{@link UdSender} with two {@link SendRing}s: the UD send side ({@code ipoib_ib.c} {@code ipoib_send});</li>
 *   <li>{@link IpoibTransmitter}: thread {@code ipoib-tx-<if>}, TUN to fabric ({@code ipoib_start_xmit});</li>
 *   <li>{@link IpoibReceiver}: thread {@code ipoib-rx-<if>}, fabric to TUN, and the timers ({@code ipoib_ib.c}
 *   {@code ipoib_ib_handle_rx_wc});</li>
 *   <li>{@link ArpNeighbours}: ARP and the neighbour table;</li>
 *   <li>{@link ConnectedMode} with {@link TxConn} and {@link RxConn}: RFC 4755 ({@code ipoib_cm.c}), thread
 *   {@code ipoib-cm-<if>} for the CM's events.</li>
 * </ul>
 * Both threads share the interface lock ({@link IpoibResources}); nothing is allocated per packet on the data paths.
 */
public final class IpoibInterface implements AutoCloseable {
    /**
     * How to set an interface up.
     *
     * @param ifname      TUN interface name
     * @param address     the interface's IPv4 address
     * @param prefixLen   its prefix length
     * @param mtu         the interface MTU, or 0 for the mode's default: min(2044, port MTU - 4) in datagram
     *                    mode, 65520 in connected mode (Linux IPOIB_CM_MTU)
     * @param pkey        partition key (0xFFFF: default partition)
     * @param qkey        the broadcast group's Q_Key
     * @param broadcast   the broadcast group, or null to derive it from the P_Key and the port's GID type
     * @param clock       time for neighbour aging
     * @param reachableNs how long a learned neighbour stays usable without a new ARP packet
     * @param mode        datagram (RFC 4391) or connected (RFC 4755)
     */
    public record Config(String ifname, Inet4Address address, int prefixLen, int mtu, int pkey, int qkey, Gid broadcast,
                         NanoClock clock, long reachableNs, Mode mode) {
        /**
         * As the canonical constructor, in datagram mode.
         *
         * @param ifname TUN interface name
         * @param address the interface's IPv4 address
         * @param prefixLen its prefix length
         * @param mtu the interface MTU, or 0 for the mode's default: min(2044, port MTU - 4) in datagram mode,
         *     65520 in connected mode (Linux IPOIB_CM_MTU)
         * @param pkey partition key (0xFFFF: default partition)
         * @param qkey the broadcast group's Q_Key
         * @param broadcast the broadcast group, or null to derive it from the P_Key and the port's GID type
         * @param clock time for neighbour aging
         * @param reachableNs how long a learned neighbour stays usable without a new ARP packet
         */
        public Config(String ifname, Inet4Address address, int prefixLen, int mtu, int pkey, int qkey, Gid broadcast,
                      NanoClock clock, long reachableNs) {
            this(ifname, address, prefixLen, mtu, pkey, qkey, broadcast, clock, reachableNs, Mode.DATAGRAM);
        }

        /**
         * {@return this configuration in that mode}
         *
         * @param m the mode
         */
        public Config withMode(Mode m) {
            return new Config(ifname, address, prefixLen, mtu, pkey, qkey, broadcast, clock, reachableNs, m);
        }

        /**
         * {@return defaults for the rest: derived MTU, P_Key 0xFFFF, Q_Key 0x0B1B, derived group, system clock,
         * neighbours reachable for 60 s}
         *
         * @param ifname    TUN interface name
         * @param address   IPv4 address
         * @param prefixLen prefix length
         */
        public static Config of(String ifname, Inet4Address address, int prefixLen) {
            return new Config(ifname, address, prefixLen, 0, Ipoib.DEFAULT_PKEY, Ipoib.DEFAULT_QKEY, null,
                    NanoClock.SYSTEM, 60_000_000_000L);
        }
    }

    /** IPoIB modes, as Linux's /sys/class/net/ib0/mode: "datagram" (RFC 4391) or "connected" (RFC 4755). */
    public enum Mode {
        /** Every packet is a UD message of at most the UD MTU. */
        DATAGRAM,
        /** Unicast packets to neighbours that offer it travel on an RC connection, up to a 64 KiB MTU. */
        CONNECTED
    }

    /** Linux IPOIB_CM_MTU: 64 KiB less 16, the largest connected-mode MTU. */
    public static final int CM_MAX_MTU = 65520;
    private final IpoibResources res;
    private final UdSender ud;
    private final ConnectedMode cm;
    private final ArpNeighbours neighbours;
    private final IpoibReceiver receiver;
    private final IpoibTransmitter transmitter;
    private PacketPort tun;

    private IpoibInterface(IpoibResources res, CmEventChannel events) {
        this.res = res;
        this.ud = new UdSender(res);
        this.cm = new ConnectedMode(res, events);
        this.neighbours = new ArpNeighbours(res, ud, cm);
        this.transmitter = new IpoibTransmitter(res, ud, neighbours, cm);
        this.receiver = new IpoibReceiver(res, ud, neighbours, cm, transmitter);
    }

    /**
     * Opens the device, creates the UD QP, joins the broadcast group, creates and configures the TUN
     * interface, and starts the data path.
     *
     * @param device the verbs device (port 1)
     * @param cfg    configuration
     * @param log    receives one line per learned or expired neighbour
     * @return the running interface
     * @throws IOException     if the TUN interface cannot be created or configured
     * @throws VerbsException if a verbs call fails
     */
    public static IpoibInterface start(Device device, Config cfg, Consumer<String> log) throws IOException {
        return start(device, cfg, null, log);
    }

    /**
     * As {@link #start(Device, Config, Consumer)}, exchanging packets with a given port instead of a TUN
     * interface it creates (tests without root).
     *
     * @param device the verbs device (port 1)
     * @param cfg    configuration (its ifname and address are not applied to the port)
     * @param port   the IP side, or null to create and configure a TUN interface
     * @param log    receives one line per learned or expired neighbour
     * @return the running interface
     * @throws IOException     if the TUN interface cannot be created or configured
     * @throws VerbsException if a verbs call fails
     */
    public static IpoibInterface start(Device device, Config cfg, PacketPort port, Consumer<String> log)
            throws IOException {
        return start(device, cfg, null, port, log);
    }

    /**
     * As {@link #start(Device, Config, PacketPort, Consumer)}, with the connection manager connected mode uses.
     *
     * @param device the verbs device (port 1)
     * @param cfg    configuration
     * @param cm     the CM that serves the device ({@link RdmaCm#system()} when null); used in connected mode only
     * @param port   the IP side, or null to create and configure a TUN interface
     * @param log    receives one line per learned or expired neighbour and per connection
     * @return the running interface
     * @throws IOException     if the TUN interface cannot be created or configured
     * @throws VerbsException if a verbs or CM call fails
     */
    public static IpoibInterface start(Device device, Config cfg, RdmaCm cm, PacketPort port, Consumer<String> log)
            throws IOException {
        if (cfg.prefixLen() < 1 || cfg.prefixLen() > 30) {
            throw new IllegalArgumentException("prefix length " + cfg.prefixLen() + " (1..30)");
        }
        boolean connected = cfg.mode() == Mode.CONNECTED;
        int mtu;
        int udMtu;
        Gid gid;
        try (Context probe = device.open()) {
            int portMtu = probe.queryPort(1).activeMtu().bytes();
            udMtu = cfg.mtu() == 0 || connected ? Math.min(Ipoib.DEFAULT_MTU, portMtu - Ipoib.HEADER_BYTES) : cfg.mtu();
            if (udMtu < 576 || udMtu + Ipoib.HEADER_BYTES > portMtu) {
                throw new VerbsException(Errno.EINVAL, "IPoIB MTU " + udMtu + " does not fit the port's MTU " + portMtu
                        + " less the 4-byte header (and IPv4 needs at least 576)");
            }
            mtu = udMtu;
            if (connected) {
                // RFC 4755 section 4: the connected-mode MTU may be up to 2^31; Linux caps it at IPOIB_CM_MTU
                mtu = cfg.mtu() == 0 ? CM_MAX_MTU : cfg.mtu();
                if (mtu < 576 || mtu > CM_MAX_MTU) {
                    throw new VerbsException(Errno.EINVAL, "connected-mode MTU " + mtu + " (576.." + CM_MAX_MTU + ")");
                }
                if (probe.queryDevice().maxSrq() < 1) {
                    throw new VerbsException(Errno.EOPNOTSUPP, "connected mode needs a device with shared receive queues");
                }
            }
            gid = probe.queryGid(1, 0);
        }
        // Connected mode: the RC QPs are the CM's (rdma_create_qp on its IDs), so every verbs object they share (PD,
        // CQs, SRQ) lives on the CM's context of the device, as a librdmacm program allocates on id->verbs
        CmEventChannel events = null;
        Context ctx;
        if (connected) {
            events = (cm != null ? cm : RdmaCm.system()).createEventChannel();
            try (CmId id = events.createId(PortSpace.IB, QpType.RC)) {
                id.bindAddr(new IbSocketAddress(gid, 0));
                ctx = id.context();
            } catch (RuntimeException e) {
                events.close();
                throw new VerbsException(e instanceof VerbsException v ? v.errno() : Errno.ENODEV, "connected mode needs"
                        + " the IB CM on device " + device.name() + " (GID " + gid + "): " + e.getMessage());
            }
        } else {
            ctx = device.open();
        }
        IpoibResources res;
        try {
            res = new IpoibResources(ctx, !connected, cfg, mtu, udMtu, log, UdSender.SEND_WRS, IpoibReceiver.RX_RING,
                    IpoibReceiver.RX_RING + (connected ? ConnectedMode.RX_RING : 0));
        } catch (RuntimeException e) {
            if (connected) {
                events.close();
            } else {
                ctx.close();
            }
            throw e;
        }
        IpoibInterface i;
        try {
            i = new IpoibInterface(res, events);
        } catch (RuntimeException e) {
            res.releaseVerbs();
            if (events != null) {
                events.close();
            }
            res.close();
            throw e;
        }
        try {
            i.open(port);
        } catch (IOException | RuntimeException e) {
            i.close();
            throw e;
        }
        return i;
    }

    /** Posts the receive buffers, brings the TUN interface up, starts both threads and announces us. */
    private void open(PacketPort port) throws IOException {
        receiver.postReceives();
        cm.postReceives();
        if (port != null) {
            tun = port;
        } else {
            TunDevice t = TunDevice.open(res.cfg.ifname());
            tun = t;
            disableIpv6(t.name());
            t.configure(res.mtu, res.cfg.address(), res.cfg.prefixLen());
        }
        cm.listen(tun.name());
        transmitter.start(tun);
        receiver.start(tun);
        neighbours.announce();
    }

    /**
     * IPv6 over this link would need neighbour discovery with the IPoIB link-layer option (RFC 4391 section
     * 9.1); until then the interface is IPv4-only, so the kernel does not send router solicitations that
     * would only be counted as drops.
     */
    private static void disableIpv6(String ifname) {
        Path p = Path.of("/proc/sys/net/ipv6/conf", ifname, "disable_ipv6");
        try {
            if (Files.exists(p)) {
                Files.writeString(p, "1");
            }
        } catch (IOException e) {
            // not fatal: IPv6 packets are dropped and counted anyway
        }
    }

    /** {@return the TUN interface name} */
    public String name() {
        return tun.name();
    }

    /** {@return the interface's MTU} */
    public int mtu() {
        return res.mtu;
    }

    /** {@return this interface's 20-byte hardware address (QPN and GID)} */
    public HardwareAddress hardwareAddress() {
        return res.self;
    }

    /** {@return the broadcast group the interface joined} */
    public Gid broadcastGid() {
        return res.broadcast;
    }

    /**
     * {@return its value}
     *
     * @param c a counter
     */
    public long counter(IpoibCounter c) {
        return res.counters.get(c);
    }

    /** {@return every counter, one "name value" per line} */
    public String countersText() {
        return res.counters.text();
    }

    /** {@return the neighbour table, one line per entry} */
    public List<String> neighbourLines() {
        return neighbours.lines();
    }

    private interface Joiner {
        void join() throws InterruptedException;
    }

    private static void join(Joiner j) {
        try {
            j.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops the threads, removes the TUN interface, leaves the group and releases every verbs object. */
    @Override
    public void close() {
        transmitter.stop();
        receiver.stop();
        cm.stop();
        join(transmitter::join);
        join(receiver::join);
        join(cm::join);
        if (tun != null) {
            tun.close();
        }
        cm.closeConnections(); // DREQs; the RC QPs go with their CM IDs, before the SRQ and CQs they use
        res.releaseVerbs();
        // the QPs are gone: unmap what the device still held (sends not yet reaped, the receive rings)
        ud.unmapOutstanding();
        receiver.unmapRing();
        cm.unmapAll();
        res.close(); // refuses (EBUSY) if anything above leaked
    }
}
