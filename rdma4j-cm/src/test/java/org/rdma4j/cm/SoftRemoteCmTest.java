// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.soft.RemoteCm;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;

/**
 * The CM conformance suite across two JVMs: host B (its RoCEv2 device and its CM) in the remote peer, host A
 * here; they meet only through RoCEv2 over UDP on loopback.
 */
class SoftRemoteCmTest extends AbstractCmTest {
    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        return new SoftRemoteCmFabric(clock);
    }

    @Override
    protected Duration quietWindow() {
        return Duration.ofMillis(300);
    }

    /** Not a suite test: that this mode is what it says, host B's CM and device in the other JVM. */
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
    }
}
