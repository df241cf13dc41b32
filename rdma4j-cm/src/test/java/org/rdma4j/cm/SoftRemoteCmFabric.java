// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.lang.foreign.Arena;
import java.net.InetAddress;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.soft.RemoteCm;
import org.rdma4j.soft.SoftRemoteTestFabric;
import org.rdma4j.testkit.CmFabric;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * The CM conformance fixture across two JVMs: host A is a RoCEv2 soft device on 127.0.0.1 with a driven
 * {@link UserCm} in this JVM; host B is a RoCEv2 soft device on 127.0.0.2 in the remote peer (the child JVM
 * of {@link SoftRemoteTestFabric}, the verbs suites' two-process fixture) with its own driven UserCm there
 * ({@link UserCmRemoteFactory}). Host B's CM API front ({@link RdmaCm}) runs here over a {@link RemoteCm}
 * provider, as librdmacm runs over the kernel's CM; its MADs and data meet host A's only as RoCEv2 over UDP
 * between the processes. The test's clock moves both CMs' timers (the child's through the fabric's
 * forwarding), buffers come from memory shared with the child. Both devices reach memory in the given DMA
 * mode, each checker's reports failing the fabric's close.
 */
final class SoftRemoteCmFabric implements CmFabric {
    private final ManualClock clock;
    private final SoftRemoteTestFabric fabric;
    private final UserCm local;
    private final RemoteCm remote;
    private final RdmaCm[] cms;

    /**
     * @param clock the test's clock
     * @param mode  how both devices reach memory (with the DMA checker on, as {@link SoftCmFabric} does)
     */
    SoftRemoteCmFabric(ManualClock clock, DmaMode mode) {
        this.clock = clock;
        this.fabric = new SoftRemoteTestFabric(clock, SoftCmFabric.dmaConfig(mode));
        UserCm a = null;
        RemoteCm b = null;
        try {
            a = UserCm.builder().device(fabric.localDevice()).clock(clock).driven(true).seed(0x5eed).build();
            b = fabric.openCm(UserCmRemoteFactory.class, 0x5eed + 1);
        } catch (RuntimeException e) {
            if (a != null) {
                a.close();
            }
            fabric.close(); // closes b too
            throw e;
        }
        this.local = a;
        this.remote = b;
        this.cms = new RdmaCm[] {RdmaCm.of(local), RdmaCm.of(remote)};
    }

    /** @return the child's PID (host B's process) */
    long remotePid() {
        return fabric.remotePid();
    }

    @Override
    public RdmaCm cm(int host) {
        return cms[host];
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
    public void progress() {
        local.progress();
        remote.progress();
    }

    @Override
    public InetAddress unownedAddress() {
        return InetAddress.ofLiteral("127.0.0.3");
    }

    @Override
    public long cmCounter(int host, String name) {
        return (host == 0 ? local.counters() : remote.counters()).getOrDefault(name, -1L);
    }

    /** Buffers in the memory shared with the child, so host B's regions are real memory there. */
    @Override
    public Arena bufferArena() {
        return fabric.bufferArena();
    }

    @Override
    public void close() {
        try {
            try {
                local.close();
            } finally {
                remote.close();
            }
        } finally {
            fabric.close();
        }
    }
}
