// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;

/** ibv_get_device_list / ibv_query_device / ibv_query_port / ibv_query_gid. */
public abstract class AbstractDeviceQueryTest extends ConformanceTestBase {
    /** Constructor for subclasses. */
    protected AbstractDeviceQueryTest() {
    }


    /** Should list distinct devices when fabric has two hosts. */
    @Test
    public void shouldListDistinctDevicesWhenFabricHasTwoHosts() {
        Set<String> names = new HashSet<>();
        Set<Long> guids = new HashSet<>();
        for (int i = 0; i < fabric.deviceCount(); i++) {
            Device d = fabric.device(i);
            assertNotNull(d.name(), "device name");
            assertTrue(!d.name().isEmpty(), "device name empty");
            assertNotNull(d.providerName(), "provider name");
            if (!fabric.loopback()) {
                assertTrue(names.add(d.name()), "duplicate device name " + d.name());
                assertTrue(guids.add(d.guid()), "duplicate node GUID 0x" + Long.toHexString(d.guid()));
            }
        }
        assertEquals(fabric.device(0), ctxA.device(), "ctx.device() of device 0's context");
        assertEquals(fabric.device(1), ctxB.device(), "ctx.device() of device 1's context");
    }

    /** Should report sane limits when device is queried. */
    @Test
    public void shouldReportSaneLimitsWhenDeviceIsQueried() {
        DeviceAttributes a = ctxA.queryDevice();
        assertEquals(fabric.device(0).guid(), a.nodeGuid(), "node_guid equals Device.guid()");
        assertTrue(a.maxQp() > 0, "max_qp " + a.maxQp());
        assertTrue(a.maxQpWr() >= 64, "max_qp_wr " + a.maxQpWr());
        assertTrue(a.maxSge() >= 4, "max_sge " + a.maxSge());
        assertTrue(a.maxCq() > 0, "max_cq " + a.maxCq());
        assertTrue(a.maxCqe() >= 64, "max_cqe " + a.maxCqe());
        assertTrue(a.maxMr() > 0, "max_mr " + a.maxMr());
        assertTrue(a.maxPd() > 0, "max_pd " + a.maxPd());
        // unsigned: rxe reports 2^64 - 1 (rxe_param.h RXE_MAX_MR_SIZE = -1ull), ibv_devinfo prints 0xffffffffffffffff
        assertTrue(a.maxMrSize() != 0, "max_mr_size 0x" + Long.toHexString(a.maxMrSize()));
        assertTrue(a.maxQpRdAtom() >= 1, "max_qp_rd_atom " + a.maxQpRdAtom());
        assertTrue(a.maxQpInitRdAtom() >= 1, "max_qp_init_rd_atom " + a.maxQpInitRdAtom());
        assertTrue(a.maxSrq() > 0, "max_srq " + a.maxSrq());
        assertTrue(a.maxSrqWr() > 0, "max_srq_wr " + a.maxSrqWr());
        if (!iwarp()) { // iWARP has no address handles: siw reports max_ah 0
            assertTrue(a.maxAh() > 0, "max_ah " + a.maxAh());
        }
        assertTrue(a.maxInlineData() >= 64, "max_inline_data " + a.maxInlineData());
        assertTrue(a.physPortCnt() >= 1, "phys_port_cnt " + a.physPortCnt());
        assertTrue(a.atomicCap().equals("ATOMIC_HCA") || a.atomicCap().equals("ATOMIC_NONE"),
                "atomic_cap " + a.atomicCap());
    }

    /** Should report active port with MTU when port one is queried. */
    @Test
    public void shouldReportActivePortWithMtuWhenPortOneIsQueried() {
        for (Context ctx : new Context[] {ctxA, ctxB}) {
            PortAttributes p = ctx.queryPort(1);
            assertEquals(PortState.ACTIVE, p.state(), "port 1 state of " + ctx.device().name());
            assertNotNull(p.activeMtu(), "active_mtu");
            assertNotNull(p.maxMtu(), "max_mtu");
            assertTrue(p.activeMtu().bytes() <= p.maxMtu().bytes(), "active_mtu " + p.activeMtu()
                    + " > max_mtu " + p.maxMtu());
            assertTrue(p.gidTblLen() >= 1, "gid_tbl_len " + p.gidTblLen());
            if (!iwarp()) { // iWARP has no P_Keys: siw reports pkey_tbl_len 0
                assertTrue(p.pkeyTblLen() >= 1, "pkey_tbl_len " + p.pkeyTblLen());
            }
            assertTrue(p.maxMsgSz() >= p.activeMtu().bytes(), "max_msg_sz " + p.maxMsgSz());
            assertTrue("Ethernet".equals(p.linkLayer()) || "InfiniBand".equals(p.linkLayer()),
                    "link_layer " + p.linkLayer());
        }
    }

    /** Should have distinct non-zero GID at index zero. */
    @Test
    public void shouldHaveDistinctNonZeroGidAtIndexZero() {
        Gid a = ctxA.queryGid(1, 0);
        Gid b = ctxB.queryGid(1, 0);
        assertNotEquals(Gid.ZERO, a, "GID[0] of device 0");
        assertNotEquals(Gid.ZERO, b, "GID[0] of device 1");
        if (!fabric.loopback()) {
            assertNotEquals(a, b, "the two hosts share a GID");
        } else {
            assertEquals(a, b, "one device seen from two contexts");
        }
        assertEquals(a, ctxA.queryGid(1, 0), "GID[0] is stable");
    }

    /** Should reject with EINVAL when port number is invalid. */
    @Test
    public void shouldRejectWithEinvalWhenPortNumberIsInvalid() {
        int ports = ctxA.queryDevice().physPortCnt();
        assertVerbsError(Errno.EINVAL, () -> ctxA.queryPort(0));
        assertVerbsError(Errno.EINVAL, () -> ctxA.queryPort(ports + 1));
        assertVerbsError(Errno.EINVAL, () -> ctxA.queryGid(0, 0));
        assertVerbsError(Errno.EINVAL, () -> ctxA.queryGid(ports + 1, 0));
    }

    /** Should open independent contexts when device is opened twice. */
    @Test
    public void shouldOpenIndependentContextsWhenDeviceIsOpenedTwice() {
        Context second = fabric.device(0).open();
        try {
            assertEquals(ctxA.queryGid(1, 0), second.queryGid(1, 0), "same device, same GID");
            second.allocPd().close();
        } finally {
            second.close();
        }
        // ctxA is unaffected by closing the second context
        track(ctxA.allocPd());
    }

    /** Should raise port events when port goes down and up. */
    @Test
    public void shouldRaisePortEventsWhenPortGoesDownAndUp() {
        try {
            fabric.setPortState(0, 1, false);
        } catch (UnsupportedOperationException e) {
            Assumptions.abort("fabric cannot change port states: " + e.getMessage());
        }
        AsyncEvent down = awaitAsyncEvent(ctxA, AsyncEventType.PORT_ERR);
        assertEquals(1, down.portNum(), "port of " + down);
        assertEquals(PortState.DOWN, ctxA.queryPort(1).state(), "state after link down");
        fabric.setPortState(0, 1, true);
        AsyncEvent up = awaitAsyncEvent(ctxA, AsyncEventType.PORT_ACTIVE);
        assertEquals(1, up.portNum(), "port of " + up);
        assertEquals(PortState.ACTIVE, ctxA.queryPort(1).state(), "state after link up");
    }
}
