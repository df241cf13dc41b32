// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.function.Function;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;
import org.rdma4j.verbs.spi.GsiAccess;

/** The soft device's GSI QP (QP1) as rxe's: numbered 1, GSI_QKEY on receive, one per port, no QP0. */
class SoftGsiTest {
    static Stream<Function<ManualClock, SoftDevicesFixture>> fabrics() {
        return Stream.of(c -> new SoftTestFabric(c), SoftRoceTestFabric::new);
    }

    private record Side(Context ctx, ProtectionDomain pd, CompletionQueue cq, QueuePair qp, MemoryRegion mr) implements AutoCloseable {
        static Side open(SoftDevice d, Arena arena) {
            Context ctx = d.open();
            ProtectionDomain pd = ctx.allocPd();
            CompletionQueue cq = ctx.createCq(16, null, 0);
            QueuePair qp = d.createSpecialQp(pd, GsiAccess.SpecialQp.GSI, 1,
                    new QpInitAttributes().sendCq(cq).recvCq(cq).cap(new QpCapabilities(8, 8, 1, 1, 0)));
            qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1).qkey(GsiAccess.GSI_QKEY));
            qp.modify(new QpAttributes().state(QpState.RTR));
            qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0));
            MemoryRegion mr = pd.regMr(arena.allocate(4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
            return new Side(ctx, pd, cq, qp, mr);
        }

        @Override
        public void close() {
            qp.close();
            mr.close();
            cq.close();
            pd.close();
            ctx.close();
        }
    }

    @ParameterizedTest
    @MethodSource("fabrics")
    void aMadReachesThePeersQp1WithSourceQp1AndTheGrh(Function<ManualClock, SoftDevicesFixture> make) {
        try (SoftDevicesFixture f = make.apply(new ManualClock()); Arena arena = Arena.ofShared()) {
            SoftDevice a = f.softDevice(0);
            SoftDevice b = f.softDevice(1);
            try (Side sa = Side.open(a, arena); Side sb = Side.open(b, arena)) {
                assertEquals(1, sa.qp().qpNum());
                assertEquals(QpType.UD, sa.qp().type());
                recv(sb, 0);
                recv(sb, 1);
                MemorySegment buf = sa.mr().segment();
                for (int i = 0; i < 256; i++) {
                    buf.set(ValueLayout.JAVA_BYTE, 2048 + i, (byte) i);
                }
                try (AddressHandle ah = sa.pd().createAh(new AhAttributes().dgid(b.gid(0)).sgidIndex(0))) {
                    send(sa, ah, 0x0001_0000, 7); // wrong Q_Key (bit 31 clear, so it is sent as given): counted, dropped
                    send(sa, ah, GsiAccess.GSI_QKEY, 8);
                    WorkCompletion wc = poll(sb.cq());
                    assertEquals(WcStatus.SUCCESS, wc.status());
                    assertEquals(40 + 256, wc.byteLen());
                    assertEquals(1, wc.srcQp(), "source QP 1");
                    assertEquals(1, wc.qpNum());
                    assertTrue((wc.wcFlags() & WcFlags.GRH) != 0);
                    assertEquals(0L, wc.wrId(), "the first receive took the valid MAD");
                    MemorySegment got = sb.mr().segment();
                    for (int i = 0; i < 256; i++) {
                        assertEquals((byte) i, got.get(ValueLayout.JAVA_BYTE, 40 + i));
                    }
                    assertEquals(1, b.counter(SoftCounter.DROP_QKEY_VIOLATION));
                }
            }
        }
    }

    @ParameterizedTest
    @MethodSource("fabrics")
    void qp0DoesNotExistAndQp1IsOnePerPort(Function<ManualClock, SoftDevicesFixture> make) {
        try (SoftDevicesFixture f = make.apply(new ManualClock())) {
            SoftDevice a = f.softDevice(0);
            try (Context ctx = a.open(); ProtectionDomain pd = ctx.allocPd(); CompletionQueue cq = ctx.createCq(4, null, 0)) {
                QpInitAttributes init = new QpInitAttributes().sendCq(cq).recvCq(cq);
                VerbsException smi = assertThrows(VerbsException.class,
                        () -> a.createSpecialQp(pd, GsiAccess.SpecialQp.SMI, 1, init));
                assertEquals(Errno.EOPNOTSUPP, smi.errno());
                assertTrue(smi.getMessage().contains("QP0"), smi.getMessage());
                assertEquals(Errno.EINVAL, assertThrows(VerbsException.class,
                        () -> a.createSpecialQp(pd, GsiAccess.SpecialQp.GSI, 2, init)).errno());
                QueuePair gsi = a.createSpecialQp(pd, GsiAccess.SpecialQp.GSI, 1, init);
                assertEquals(Errno.EBUSY, assertThrows(VerbsException.class,
                        () -> a.createSpecialQp(pd, GsiAccess.SpecialQp.GSI, 1, init)).errno());
                QueuePair ordinary = pd.createQp(new QpInitAttributes().type(QpType.UD).sendCq(cq).recvCq(cq));
                assertTrue(ordinary.qpNum() >= 0x11, "ordinary QPs never get 1: " + ordinary.qpNum());
                ordinary.close();
                gsi.close();
                a.createSpecialQp(pd, GsiAccess.SpecialQp.GSI, 1, init).close(); // the slot is free again
            }
        }
    }

    private static void recv(Side s, long id) {
        RecvWorkRequest r = new RecvWorkRequest().wrId(id).singleSge(s.mr().address() + id * 512, 296, s.mr().lkey());
        assertTrue(s.qp().postRecv(r), () -> "post recv: " + r.postError());
    }

    private static void send(Side s, AddressHandle ah, int qkey, long id) {
        SendWorkRequest w = new SendWorkRequest().wrId(id).opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED)
                .singleSge(s.mr().address() + 2048, 256, s.mr().lkey()).ah(ah).remoteQpn(1).remoteQkey(qkey);
        assertTrue(s.qp().postSend(w), () -> "post send: " + w.postError());
        assertEquals(WcStatus.SUCCESS, poll(s.cq()).status());
    }

    private static WorkCompletion poll(CompletionQueue cq) {
        WorkCompletion wc = new WorkCompletion();
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (!cq.poll(wc)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no completion within 5 s");
            }
            Thread.onSpinWait();
        }
        return wc;
    }
}
