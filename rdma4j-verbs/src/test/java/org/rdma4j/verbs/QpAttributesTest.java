// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.EnumSet;

import org.junit.jupiter.api.Test;

class QpAttributesTest {
    @Test
    void shouldSetTheMaskBitOfEveryAttributeGiven() {
        QpAttributes a = new QpAttributes().state(QpState.RTR).pathMtu(Mtu.MTU_1024).destQpNum(0x11).rqPsn(0)
                .maxDestRdAtomic(1).minRnrTimer(12).av(new AhAttributes());
        assertEquals(EnumSet.of(QpAttrMask.STATE, QpAttrMask.PATH_MTU, QpAttrMask.DEST_QPN, QpAttrMask.RQ_PSN,
                QpAttrMask.MAX_DEST_RD_ATOMIC, QpAttrMask.MIN_RNR_TIMER, QpAttrMask.AV), a.maskSet());
        // ibv_qp_attr_mask values
        assertEquals(1 << 20, QpAttrMask.DEST_QPN.bit());
        assertEquals(1 << 7, QpAttrMask.AV.bit());
        assertEquals(0, a.clearMask().mask());
    }

    @Test
    void shouldUseRdmaCoreNumbers() {
        assertEquals(5, WcStatus.WR_FLUSH_ERR.value());
        assertEquals(13, WcStatus.RNR_RETRY_EXC_ERR.value());
        assertEquals("transport retry counter exceeded", WcStatus.RETRY_EXC_ERR.description());
        assertEquals(129, WcOpcode.RECV_RDMA_WITH_IMM.value());
        assertEquals(1 << 3, AccessFlag.REMOTE_ATOMIC.bit());
        assertEquals(Mtu.MTU_4096, Mtu.ofBytes(4096));
        assertEquals(Errno.EINVAL, assertThrows(VerbsException.class, () -> Mtu.ofBytes(1500)).errno());
    }
}
