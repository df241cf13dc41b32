// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.time.Duration;

import org.junit.jupiter.api.Assumptions;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.AbstractCmTest;
import org.rdma4j.testkit.CmFabric;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.RdmaCm;

/**
 * The CM conformance suite over librdmacm on a kernel device ({@code -Drdma4j.ibverbs.test.device}, as the
 * verbs suites): both "hosts" are this host's kernel rdma_cm (one port table), reaching the device's own IP
 * address, whose traffic rxe loops back in the kernel and siw carries over TCP loopback. The kernel's CM
 * timers are real ({@link CmFabric#manualTimers()} false). Skipped without a device.
 */
class IbvCmTest extends AbstractCmTest {
    @Override
    protected CmFabric createCmFabric(ManualClock clock) {
        IbvDevice dev = IbvTestFabric.device();
        RdmaCmProvider p = new RdmaCmProvider();
        InetAddress ip = null;
        for (CmAddress a : p.addresses()) {
            if (a.device().name().equals(dev.name()) && a.address() instanceof Inet4Address) {
                ip = a.address();
                break;
            }
        }
        Assumptions.assumeTrue(ip != null, () -> "librdmacm gives no IPv4 address of " + dev.name() + ": "
                + RdmaCmProvider.state());
        RdmaCm cm = RdmaCm.of(p);
        InetAddress addr = ip;
        return new CmFabric() {
            @Override
            public RdmaCm cm(int host) {
                return cm;
            }

            @Override
            public InetAddress address(int host) {
                return addr;
            }

            @Override
            public ManualClock clock() {
                return clock;
            }

            @Override
            public boolean manualTimers() {
                return false;
            }

            @Override
            public void close() {
                // the kernel's CM stays
            }
        };
    }

    @Override
    protected Duration quietWindow() {
        return IbvTestFabric.QUIET;
    }
}
