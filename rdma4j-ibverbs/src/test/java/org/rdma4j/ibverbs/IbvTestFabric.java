// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Gid;

/**
 * The conformance fabric of a libibverbs device: both "hosts" are the same kernel device (rxe loops a
 * packet to its own GID back in the kernel, rxe_loopback; siw connects over TCP loopback), each test side
 * with its own context. The device is {@code -Drdma4j.ibverbs.test.device=NAME}, else the first one
 * libibverbs lists; with none the suites are skipped with the provider's reason (this is what CI sees).
 *
 * <p>The device's timers are the kernel's: {@link #clock()} drives nothing, so a test that waits for a
 * retransmit or RNR timer waits in real time (the subclasses' longer settle windows).
 */
final class IbvTestFabric implements Fabric {
    /** How long to look for something that must not happen, and to poll after each clock step. */
    static final Duration QUIET = Duration.ofMillis(Long.getLong("rdma4j.ibverbs.test.quietMs", 200));
    static final Duration SETTLE = Duration.ofMillis(Long.getLong("rdma4j.ibverbs.test.settleMs", 50));

    private final ManualClock clock;
    private final IbvDevice device;

    private IbvTestFabric(ManualClock clock, IbvDevice device) {
        this.clock = clock;
        this.device = device;
    }

    /** @return the device the suites run on, or a skip saying why there is none */
    static IbvDevice device() {
        IbvProvider p = new IbvProvider();
        List<Device> all = p.devices();
        String want = System.getProperty("rdma4j.ibverbs.test.device");
        for (Device d : all) {
            if (want == null || d.name().equals(want)) {
                return (IbvDevice) d;
            }
        }
        Assumptions.abort("no libibverbs device" + (want == null ? "" : " named " + want) + " on this host: "
                + (p.status().isEmpty() ? "devices " + all.stream().map(Device::name).toList() : p.status()));
        throw new AssertionError("unreachable");
    }

    static IbvTestFabric create(ManualClock clock) {
        return new IbvTestFabric(clock, device());
    }

    /** Skips a suite the device's transport has no QPs for (iWARP: RC only, connected through rdma_cm). */
    static void assumeIb(String what) {
        IbvDevice d = device();
        Assumptions.assumeFalse(d.isIwarp(), () -> d.name() + " is an iWARP device: " + what);
    }

    IbvDevice ibvDevice() {
        return device;
    }

    @Override
    public Device device(int index) {
        if (index < 0 || index > 1) {
            throw new IndexOutOfBoundsException(index);
        }
        return device;
    }

    @Override
    public int deviceCount() {
        return 2;
    }

    /** Joins the group on the device's network interface, as rdma_cm's join does for RoCEv2 (IGMP). */
    @Override
    public AutoCloseable joinIpMulticast(Gid group) {
        if (device.isIwarp()) {
            return () -> { };
        }
        try (org.rdma4j.verbs.Context ctx = device.open()) {
            java.net.NetworkInterface nif = null;
            int n = ctx.queryPort(1).gidTblLen();
            for (int i = 0; i < n && nif == null; i++) {
                Gid g = ctx.queryGid(1, i);
                if (!g.equals(Gid.ZERO) && g.isIpv4Mapped() == group.isIpv4Mapped()) {
                    nif = java.net.NetworkInterface.getByInetAddress(g.toInetAddress());
                }
            }
            if (nif == null) {
                throw new IllegalStateException("no network interface of " + device.name() + " for " + group);
            }
            java.nio.channels.DatagramChannel dc = java.nio.channels.DatagramChannel.open(group.isIpv4Mapped()
                    ? java.net.StandardProtocolFamily.INET : java.net.StandardProtocolFamily.INET6);
            dc.join(group.toInetAddress(), nif);
            return dc;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("IP join of " + group + " on " + device.name(), e);
        }
    }

    /**
     * On iWARP, side 1 works on librdmacm's context for the device: the passive CM ID makes side 1's QPs there
     * (rdma_accept needs id->qp), so the test's PDs, CQs and SRQs of side 1 must live on it. Elsewhere, and for
     * side 0, a context of the test's own.
     */
    @Override
    public org.rdma4j.verbs.Context openContext(int index) {
        Device d = device(index);
        return device.isIwarp() && index == 1 ? RdmaCmProvider.deviceContext(device) : d.open();
    }

    /** iWARP: RC QPs are connected through librdmacm (the kernel's iw_cm); null on RoCE. */
    @Override
    public org.rdma4j.verbs.cm.RdmaCm cm() {
        return device.isIwarp() ? org.rdma4j.verbs.cm.RdmaCm.of(new RdmaCmProvider()) : null;
    }

    /** @return the device's first IPv4 address as librdmacm lists it (siw0: its netdev's), or null */
    @Override
    public java.net.InetAddress cmAddress() {
        for (org.rdma4j.verbs.cm.CmAddress a : new RdmaCmProvider().addresses()) {
            if (a.device().name().equals(device.name()) && a.address() instanceof java.net.Inet4Address) {
                return a.address();
            }
        }
        return null;
    }

    @Override
    public boolean realTimeTimers() {
        return true;
    }

    @Override
    public boolean loopback() {
        return true;
    }

    @Override
    public ManualClock clock() {
        return clock;
    }

    @Override
    public void close() {
        // the device belongs to the kernel
    }
}
