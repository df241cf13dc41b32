// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;

/** The remote peer's life: shared across fabrics, replaced when it dies. */
class SoftRemotePeerLifecycleTest {
    @Test
    void fabricsShareOnePeerAndADeadPeerIsReplaced() throws Exception {
        long first;
        try (SoftRemoteTestFabric f = new SoftRemoteTestFabric(new ManualClock())) {
            first = f.remotePid();
        }
        try (SoftRemoteTestFabric f = new SoftRemoteTestFabric(new ManualClock())) {
            assertEquals(first, f.remotePid(), "the second fabric reuses the running peer");
        }
        // End the child we started, by its PID, as the JVM-exit hook would.
        ProcessHandle child = ProcessHandle.of(first).orElseThrow();
        child.destroy();
        child.onExit().get(30, TimeUnit.SECONDS);
        try (SoftRemoteTestFabric f = new SoftRemoteTestFabric(new ManualClock())) {
            assertNotEquals(first, f.remotePid(), "a new peer after the old one died");
            assertTrue(ProcessHandle.of(f.remotePid()).map(ProcessHandle::isAlive).orElse(false), "new peer alive");
            Context ctx = f.device(1).open();
            try {
                assertEquals(Gid.ofInetAddress(InetAddress.ofLiteral("127.0.0.2")), ctx.queryGid(1, 0));
            } finally {
                ctx.close();
            }
        }
    }

    @Test
    void aChildThatDoesNotAnswerIsEndedWithAThreadDumpAndTheCallFails() throws Exception {
        RemotePeer peer = RemotePeer.startPrivate(2_000);
        try {
            ProcessHandle child = ProcessHandle.of(peer.pid()).orElseThrow();
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> peer.run(RemoteProtocol.STALL, 0, o -> { }));
            String m = e.getMessage();
            assertTrue(m.contains("did not answer call " + RemoteProtocol.STALL + " within 2000 ms"), m);
            assertTrue(m.contains("stalling on purpose"), "the child's stderr is in the failure: " + m);
            assertTrue(m.contains("\"main\"") && m.contains("CountDownLatch"),
                    "the thread dump (SIGQUIT) shows where the child hung: " + m);
            child.onExit().get(30, TimeUnit.SECONDS);
            assertFalse(child.isAlive(), "the child is ended");
            assertThrows(IllegalStateException.class, () -> peer.run(RemoteProtocol.STALL, 0, o -> { }),
                    "a broken peer refuses further calls");
        } finally {
            peer.end();
        }
    }
}
