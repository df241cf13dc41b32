// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpAttributes;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/** The verbs example of README.md, kept compiling and working. */
class ReadmeExampleTest {
    @Test
    void readmeExample() {
        assumeTrue(Verbs.devices().size() >= 2, "needs soft0 and soft1");
        // --- README begin
        try (Arena arena = Arena.ofShared(); // the device uses it from its own threads: not ofConfined()
             Context a = Verbs.device("soft0").open();
             Context b = Verbs.device("soft1").open();
             ProtectionDomain pdA = a.allocPd();
             ProtectionDomain pdB = b.allocPd();
             CompletionQueue cqA = a.createCq(16, null, 0);
             CompletionQueue cqB = b.createCq(16, null, 0)) {
            MemorySegment src = arena.allocate(4096);
            MemorySegment dst = arena.allocate(4096);
            src.setString(0, "hello, RDMA");
            try (MemoryRegion mrA = pdA.regMr(src, AccessFlag.of(AccessFlag.LOCAL_WRITE));
                 MemoryRegion mrB = pdB.regMr(dst, AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE));
                 QueuePair qpA = pdA.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqA).recvCq(cqA));
                 QueuePair qpB = pdB.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cqB).recvCq(cqB))) {
                // RESET -> INIT -> RTR -> RTS, each QP pointing at the other (GID index 0 of port 1)
                connect(qpA, qpB.qpNum(), b.queryGid(1, 0));
                connect(qpB, qpA.qpNum(), a.queryGid(1, 0));

                SendWorkRequest wr = new SendWorkRequest()
                        .opcode(WrOpcode.RDMA_WRITE).sendFlags(SendFlags.SIGNALED).wrId(1)
                        .singleSge(mrA.address(), 12, mrA.lkey())
                        .remoteAddr(mrB.address()).rkey(mrB.rkey());
                if (!qpA.postSend(wr)) {
                    throw new IllegalStateException("post failed: " + wr.postErrorMessage());
                }
                WorkCompletion wc = new WorkCompletion();
                while (!cqA.poll(wc)) {
                    Thread.onSpinWait();
                }
                System.out.println(wc.status() + ": " + dst.getString(0)); // SUCCESS: hello, RDMA
                // --- README end
                assertEquals(WcStatus.SUCCESS, wc.status());
                assertEquals("hello, RDMA", dst.getString(0));
            }
        }
    }

    // --- README connect begin
    static void connect(QueuePair qp, int peerQpn, Gid peerGid) {
        qp.modify(new QpAttributes().state(QpState.INIT).pkeyIndex(0).port(1)
                .accessFlags(AccessFlag.of(AccessFlag.LOCAL_WRITE, AccessFlag.REMOTE_WRITE)));
        qp.modify(new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_1024).destQpNum(peerQpn).rqPsn(0)
                .maxDestRdAtomic(1).minRnrTimer(12).av(new AhAttributes().dgid(peerGid).sgidIndex(0)));
        // retry_cnt 6: a dead peer fails the WR with RETRY_EXC_ERR after 7 timeouts of 67 ms; 7 would
        // retry forever (rxe, and the soft device, treat it as infinite, like rnr_retry 7)
        qp.modify(new QpAttributes().state(QpState.RTS).sqPsn(0)
                .timeout(14).retryCnt(6).rnrRetry(7).maxRdAtomic(1));
    }
    // --- README connect end
}
