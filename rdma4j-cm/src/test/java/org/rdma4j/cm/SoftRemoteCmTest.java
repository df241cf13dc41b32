// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.soft.RemoteCm;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;

/**
 * The CM conformance suite across two JVMs: host B (its RoCEv2 device and its CM) in the remote peer, host A
 * here; they meet only through RoCEv2 over UDP on loopback. In each DMA mode (both devices).
 */
@ParameterizedClass(name = "{0}")
@MethodSource("org.rdma4j.cm.SoftCmFabric#modes")
class SoftRemoteCmTest extends AbstractCmTest {
    /** How the devices reach memory. */
    @Parameter
    DmaMode mode;

    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        return new SoftRemoteCmFabric(clock, mode);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(300);
    }

    /** Not a suite test: that this mode is what it says, host B's CM and device in the other JVM, in the DMA mode. */
    @Test
    void hostBsCmAndDeviceAreInTheChildJvm() {
        SoftRemoteCmFabric f = (SoftRemoteCmFabric) fabric;
        assertNotEquals(ProcessHandle.current().pid(), f.remotePid());
        assertTrue(ProcessHandle.of(f.remotePid()).map(ProcessHandle::isAlive).orElse(false), "the child runs");
        assertInstanceOf(RemoteCm.class, fabric.cm(1).providers().getFirst());
        assertEquals(InetAddress.ofLiteral("127.0.0.2"), fabric.address(1));
        assertTrue(!(fabric.cm(1).addresses().getFirst().device() instanceof SoftDevice),
                "host B's device is a proxy here: " + fabric.cm(1).addresses().getFirst().device());
        long before = fabric.cmCounter(1, "mads_received");
        Side[] p = connectPair();
        assertTrue(fabric.cmCounter(1, "mads_received") >= before + 2, "the child's CM took the REQ and the RTU");
        assertTrue(p[1].qp().toString().endsWith("@remote"), "the passive QP lives in the child: " + p[1].qp());
        // virtual DMA (no mapping calls) only for a virtual device without a checker: the child's device has the
        // configuration this JVM's has, not the child's default (virtual, no checker)
        boolean virt = mode == DmaMode.VIRTUAL && !Boolean.parseBoolean(System.getProperty("rdma4j.soft.test.checker", "true"));
        assertEquals(virt, p[0].id().context().dma().usesVirtDma(), "this JVM's device: " + mode);
        assertEquals(virt, p[1].id().context().dma().usesVirtDma(), "the child's device: " + mode);
    }
}
