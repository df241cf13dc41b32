// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.rdma4j.common.ManualClock;
import org.rdma4j.common.NanoClock;
import org.rdma4j.dma.DmaChecker;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.dma.DmaReport;
import org.rdma4j.soft.RoceConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.testkit.CmFabric;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * The CM conformance fixture over the soft device: two hosts, each a soft device with its own driven
 * {@link UserCm} on the test's manual clock. In process (one {@link SoftFabric}, whole messages or cut at
 * the path MTU, in a given DMA mode with the checker on), or over RoCEv2 (two fabrics whose devices are
 * bound to 127.0.0.1 and 127.0.0.2 on a free UDP port and meet only through UDP).
 */
final class SoftCmFabric implements CmFabric {
    private final ManualClock clock;
    private final NanoClock timers;
    private final List<SoftFabric> fabrics = new ArrayList<>();
    private final SoftDevice[] devices = new SoftDevice[2];
    private final UserCm[] cms = new UserCm[2];
    private final RdmaCm[] rdmaCms = new RdmaCm[2];
    private final boolean roce;
    private int udpPort;

    private SoftCmFabric(ManualClock clock, boolean roce) {
        this.clock = clock;
        this.timers = clock == null ? NanoClock.SYSTEM : clock;
        this.roce = roce;
    }

    /**
     * Two in-process devices of one fabric.
     *
     * @param clock the clock of the fabric and the CMs, or null for real time with CMs on their own threads
     */
    static SoftCmFabric inProcess(ManualClock clock, boolean segmentAtMtu, DmaMode mode) {
        SoftCmFabric f = new SoftCmFabric(clock, false);
        SoftFabric sf = new SoftFabric(f.timers, segmentAtMtu);
        f.fabrics.add(sf);
        DmaConfig dma = dmaConfig(mode);
        f.devices[0] = sf.addDevice("soft0", dma);
        f.devices[1] = sf.addDevice("soft1", dma);
        f.startCms();
        return f;
    }

    /** The suites' DMA configuration of a mode: the checker on unless {@code -Drdma4j.soft.test.checker=false}. */
    static DmaConfig dmaConfig(DmaMode mode) {
        return DmaConfig.virtual().withMode(mode)
                .withChecker(Boolean.parseBoolean(System.getProperty("rdma4j.soft.test.checker", "true")));
    }

    /**
     * Two RoCE devices on separate fabrics, on 127.0.0.1 and 127.0.0.2, reaching memory as the
     * {@code rdma4j.soft.dma} properties say.
     *
     * @param clock the clock of the fabrics and the CMs, or null for real time with CMs on their own threads
     */
    static SoftCmFabric roce(ManualClock clock) {
        return roce(clock, null);
    }

    /**
     * Two RoCE devices on separate fabrics, on 127.0.0.1 and 127.0.0.2.
     *
     * @param clock the clock of the fabrics and the CMs, or null for real time with CMs on their own threads
     * @param mode  how the devices reach memory (checker on), or null for the properties' way
     */
    static SoftCmFabric roce(ManualClock clock, DmaMode mode) {
        SoftCmFabric f = new SoftCmFabric(clock, true);
        int port = freeUdpPort();
        f.udpPort = port;
        SoftFabric a = new SoftFabric(f.timers);
        SoftFabric b = new SoftFabric(f.timers);
        f.fabrics.add(a);
        f.fabrics.add(b);
        RoceConfig ra = new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.1")), port, null);
        RoceConfig rb = new RoceConfig(List.of(InetAddress.ofLiteral("127.0.0.2")), port, null);
        f.devices[0] = mode == null ? a.addRoceDevice("rxe0", ra) : a.addRoceDevice("rxe0", ra, dmaConfig(mode));
        f.devices[1] = mode == null ? b.addRoceDevice("rxe1", rb) : b.addRoceDevice("rxe1", rb, dmaConfig(mode));
        f.startCms();
        return f;
    }

    private void startCms() {
        for (int i = 0; i < 2; i++) {
            cms[i] = UserCm.builder().device(devices[i]).clock(timers).driven(clock != null).seed(0x5eed + i).build();
            rdmaCms[i] = RdmaCm.of(cms[i]);
        }
    }

    /** The DMA modes the suites run in: {@code -Drdma4j.soft.test.dma=virtual,iommu,bounce} (default: all). */
    static List<DmaMode> modes() {
        List<DmaMode> modes = new ArrayList<>();
        for (String s : System.getProperty("rdma4j.soft.test.dma", "virtual,iommu,bounce").split(",")) {
            if (!s.isBlank()) {
                modes.add(DmaMode.valueOf(s.trim().toUpperCase(Locale.ROOT)));
            }
        }
        return modes;
    }

    @SuppressWarnings("try") // b only proves the port is free on 127.0.0.2 too
    static int freeUdpPort() {
        for (int attempt = 0; attempt < 50; attempt++) {
            try (DatagramSocket a = new DatagramSocket(new InetSocketAddress("127.0.0.1", 0))) {
                int p = a.getLocalPort();
                try (DatagramSocket b = new DatagramSocket(new InetSocketAddress("127.0.0.2", p))) {
                    return p;
                } catch (IOException busy) {
                    // try another
                }
            } catch (IOException e) {
                throw new IllegalStateException("no UDP port on loopback", e);
            }
        }
        throw new IllegalStateException("no UDP port free on both 127.0.0.1 and 127.0.0.2");
    }

    /** @return the UDP port of the RoCE devices (0 in process) */
    int udpPort() {
        return udpPort;
    }

    UserCm userCm(int host) {
        return cms[host];
    }

    SoftDevice device(int host) {
        return devices[host];
    }

    @Override
    public RdmaCm cm(int host) {
        return rdmaCms[host];
    }

    @Override
    public InetAddress address(int host) {
        return cms[host].addresses().getFirst().address();
    }

    @Override
    public ManualClock clock() {
        return clock;
    }

    @Override
    public boolean manualTimers() {
        return clock != null;
    }

    @Override
    public void progress() {
        cms[0].progress();
        cms[1].progress();
    }

    @Override
    public InetAddress unownedAddress() {
        return roce ? InetAddress.ofLiteral("127.0.0.3")
                : new Gid(0xFE80_0000_0000_0000L, 0x0200_00FF_FEDE_AD01L).toInetAddress();
    }

    @Override
    public long cmCounter(int host, String name) {
        return cms[host].counters().getOrDefault(name, -1L);
    }

    @Override
    public void close() {
        RuntimeException first = null;
        for (UserCm c : cms) {
            try {
                if (c != null) {
                    c.close();
                }
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        for (SoftFabric f : fabrics) {
            f.close();
        }
        List<DmaReport> reports = new ArrayList<>();
        for (SoftDevice d : devices) {
            DmaChecker c = d == null ? null : d.dma().checker();
            if (c != null) {
                reports.addAll(c.reports());
            }
        }
        if (first != null) {
            throw first;
        }
        if (!reports.isEmpty()) {
            throw new AssertionError("the DMA checker reported " + reports.size() + " misuse(s); first: " + reports.getFirst());
        }
    }
}
