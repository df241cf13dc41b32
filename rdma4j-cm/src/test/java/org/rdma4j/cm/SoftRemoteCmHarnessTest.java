// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.soft.RemoteCm;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/** The two-JVM CM fixture's own failure paths: they must show, not hang or pass silently. */
class SoftRemoteCmHarnessTest {
    /** A front that cannot take the events of the child's CM. */
    private static final CmEventSink REFUSING = new CmEventSink() {
        @Override
        public void post(CmEventInfo event) {
            throw new IllegalStateException("this front refuses " + event.type());
        }

        @Override
        public CmEventSink connectRequest(CmIdSpi newId, CmEventInfo event) {
            throw new IllegalStateException("this front refuses requests");
        }
    };

    @Test
    void anEventTheFrontCannotTakeFailsTheNextProgress() {
        try (SoftRemoteCmFabric f = new SoftRemoteCmFabric(new ManualClock(), DmaMode.VIRTUAL)) {
            RemoteCm cm = (RemoteCm) f.cm(1).providers().getFirst();
            CmIdSpi id = cm.createId(REFUSING, PortSpace.TCP, QpType.RC);
            id.resolveAddr(new InetSocketAddress(f.address(1), 0),
                    new InetSocketAddress(InetAddress.ofLiteral("127.0.0.1"), 7000), Duration.ofSeconds(2));
            IllegalStateException e = assertThrows(IllegalStateException.class, cm::progress);
            assertTrue(e.getMessage().contains("could not be delivered") && e.getMessage().contains("ADDR_RESOLVED")
                    && e.getMessage().contains("this front refuses"), e.getMessage());
            cm.progress(); // reported once: the CM goes on (this would throw if the report stayed)
            id.close();
        }
    }

    @Test
    void aChildThatDiesFailsTheNextCallNamingItAndIsReplaced() throws Exception {
        long pid;
        SoftRemoteCmFabric f = new SoftRemoteCmFabric(new ManualClock(), DmaMode.VIRTUAL);
        pid = f.remotePid();
        ProcessHandle child = ProcessHandle.of(pid).orElseThrow();
        child.destroy(); // the child we started, by its PID
        child.onExit().get(30, TimeUnit.SECONDS);
        RemoteCm cm = (RemoteCm) f.cm(1).providers().getFirst();
        IllegalStateException e = assertThrows(IllegalStateException.class, cm::progress);
        assertTrue(e.getMessage().contains("pid " + pid) && e.getMessage().contains("stderr"), e.getMessage());
        assertThrows(IllegalStateException.class, f::close, "closing a fabric whose child is gone says so");
        try (SoftRemoteCmFabric g = new SoftRemoteCmFabric(new ManualClock(), DmaMode.VIRTUAL)) {
            assertTrue(g.remotePid() != pid && ProcessHandle.of(g.remotePid()).map(ProcessHandle::isAlive).orElse(false),
                    "a new child");
            g.progress();
        }
    }
}
