// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaConfig;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.soft.SoftFabric;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.cm.CmEvent;
import org.rdma4j.verbs.cm.CmEventChannel;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.CmId;
import org.rdma4j.verbs.cm.ConnParam;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.cm.RdmaCm;

class UserCmSmokeTest {
    private static final Duration T = Duration.ofSeconds(5);

    static CmEvent await(CmEventChannel ch, CmEventType type, UserCm... cms) {
        long deadline = System.nanoTime() + T.toNanos();
        while (System.nanoTime() < deadline) {
            for (UserCm c : cms) {
                c.progress();
            }
            CmEvent e = ch.pollEvent();
            if (e != null) {
                if (e.type() != type) {
                    e.ack();
                    throw new AssertionError("expected " + type + ", got " + e);
                }
                return e;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no " + type + " within " + T);
    }

    /**
     * A device that reaches memory only through bounce buffers refuses registrations; the MAD layer maps its
     * buffers as mad.c does, so the CM runs on it (the connection's own traffic is the application's affair).
     */
    @Test
    void connectsOnDevicesThatOnlyBounce() {
        ManualClock clock = new ManualClock();
        try (SoftFabric f = new SoftFabric(clock)) {
            DmaConfig bounce = DmaConfig.bounce().withForceBounce(true);
            SoftDevice a = f.addDevice("bounceA", bounce);
            SoftDevice b = f.addDevice("bounceB", bounce);
            try (UserCm cmA = UserCm.builder().device(a).clock(clock).driven(true).seed(1).build();
                 UserCm cmB = UserCm.builder().device(b).clock(clock).driven(true).seed(2).build();
                 CmEventChannel chA = RdmaCm.of(cmA).createEventChannel();
                 CmEventChannel chB = RdmaCm.of(cmB).createEventChannel()) {
                InetAddress ipB = cmB.addresses().getFirst().address();
                CmId listener = chB.createId(PortSpace.TCP);
                listener.bindAddr(new InetSocketAddress(ipB, 7174));
                listener.listen(4);
                CmId client = chA.createId(PortSpace.TCP);
                client.resolveAddr(null, new InetSocketAddress(ipB, 7174), T);
                await(chA, CmEventType.ADDR_RESOLVED, cmA, cmB).ack();
                client.resolveRoute(T);
                await(chA, CmEventType.ROUTE_RESOLVED, cmA, cmB).ack();
                ProtectionDomain pdA = client.context().allocPd();
                client.createQp(pdA, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(4, 4, 1, 1, 0)));
                client.connect(new ConnParam().retryCount(7).rnrRetryCount(7));
                CmEvent req = await(chB, CmEventType.CONNECT_REQUEST, cmA, cmB);
                CmId server = req.id();
                req.ack();
                ProtectionDomain pdB = server.context().allocPd();
                server.createQp(pdB, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(4, 4, 1, 1, 0)));
                server.accept(null);
                await(chA, CmEventType.ESTABLISHED, cmA, cmB).ack();
                await(chB, CmEventType.ESTABLISHED, cmA, cmB).ack();
                assertTrue(cmA.counters().get("mads_sent") >= 2, cmA.counters().toString());
                client.close();
                server.close();
                listener.close();
                pdA.close();
                pdB.close();
            }
        }
    }

    @Test
    void connectSendDisconnectInProcess() {
        ManualClock clock = new ManualClock();
        try (SoftFabric f = new SoftFabric(clock); Arena arena = Arena.ofShared()) {
            SoftDevice a = f.addDevice("softA");
            SoftDevice b = f.addDevice("softB");
            try (UserCm cmA = UserCm.builder().device(a).clock(clock).driven(true).seed(1).build();
                 UserCm cmB = UserCm.builder().device(b).clock(clock).driven(true).seed(2).build()) {
                InetAddress ipA = cmA.addresses().getFirst().address();
                InetAddress ipB = cmB.addresses().getFirst().address();
                try (CmEventChannel chA = RdmaCm.of(cmA).createEventChannel();
                     CmEventChannel chB = RdmaCm.of(cmB).createEventChannel()) {
                    CmId listener = chB.createId(PortSpace.TCP);
                    listener.bindAddr(new InetSocketAddress(ipB, 7174));
                    listener.listen(4);
                    CmId client = chA.createId(PortSpace.TCP);
                    client.resolveAddr(new InetSocketAddress(ipA, 0), new InetSocketAddress(ipB, 7174), T);
                    await(chA, CmEventType.ADDR_RESOLVED, cmA, cmB).ack();
                    client.resolveRoute(T);
                    await(chA, CmEventType.ROUTE_RESOLVED, cmA, cmB).ack();
                    ProtectionDomain pdA = client.context().allocPd();
                    QueuePair qpA = client.createQp(pdA, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(16, 16, 1, 1, 0)));
                    assertEquals(QpState.INIT, qpA.state());
                    client.connect(new ConnParam().responderResources(1).initiatorDepth(1).retryCount(7).rnrRetryCount(7)
                            .privateData("hello".getBytes()));
                    CmEvent req = await(chB, CmEventType.CONNECT_REQUEST, cmA, cmB);
                    assertEquals(56, req.privateDataLength());
                    assertEquals("hello", new String(req.privateData(), 0, 5));
                    CmId server = req.id();
                    req.ack();
                    ProtectionDomain pdB = server.context().allocPd();
                    QueuePair qpB = server.createQp(pdB, new QpInitAttributes().type(QpType.RC).cap(new QpCapabilities(16, 16, 1, 1, 0)));
                    MemoryRegion mrB = pdB.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
                    assertTrue(qpB.postRecv(new RecvWorkRequest().wrId(1).singleSge(mrB.address(), 64, mrB.lkey())));
                    server.accept(new ConnParam().responderResources(1).initiatorDepth(1).rnrRetryCount(7));
                    assertEquals(QpState.RTS, qpB.state());
                    CmEvent est = await(chA, CmEventType.ESTABLISHED, cmA, cmB);
                    assertEquals(196, est.privateDataLength());
                    est.ack();
                    assertEquals(QpState.RTS, qpA.state());
                    await(chB, CmEventType.ESTABLISHED, cmA, cmB).ack();
                    MemoryRegion mrA = pdA.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
                    mrA.segment().setString(0, "over RC");
                    assertTrue(qpA.postSend(new SendWorkRequest().opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                            .singleSge(mrA.address(), 8, mrA.lkey())));
                    WorkCompletion wc = new WorkCompletion();
                    long dl = System.nanoTime() + T.toNanos();
                    while (!server.recvCq().poll(wc) && System.nanoTime() < dl) {
                        Thread.onSpinWait();
                    }
                    assertEquals(WcStatus.SUCCESS, wc.status());
                    assertEquals("over RC", mrB.segment().getString(0));
                    client.disconnect();
                    await(chB, CmEventType.DISCONNECTED, cmA, cmB).ack();
                    server.disconnect();
                    await(chA, CmEventType.DISCONNECTED, cmA, cmB).ack();
                    clock.advance(Duration.ofSeconds(1).toNanos());
                    await(chA, CmEventType.TIMEWAIT_EXIT, cmA, cmB).ack();
                    await(chB, CmEventType.TIMEWAIT_EXIT, cmA, cmB).ack();
                    client.close();
                    server.close();
                    listener.close();
                    mrA.close();
                    mrB.close();
                    pdA.close();
                    pdB.close();
                    assertNotNull(cmA.counters());
                }
            }
        }
    }
}
