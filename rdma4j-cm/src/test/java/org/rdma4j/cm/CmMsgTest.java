// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.HexFormat;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.QpType;

/** The CM message layouts, byte for byte against the REQ a Linux rping client sends (cm.md section 7). */
class CmMsgTest {
    /** cm.md 7: client 192.168.100.2:40000 to 192.168.100.1:7174, comm ID 0x5A3C1F07, hi_tid 3, QPN 0x11, PSN 0xABCDEF. */
    private static final String RPING_REQ = ""
            + "0107020300000000000000035a3c1f0700100000000000005a3c1f0700000000"
            + "0000000001061c06505400fffe12345600000000000000000000110100000001"
            + "000000a0abcdefa7ffff37f0ffffffff00000000000000000000ffffc0a86402"
            + "00000000000000000000ffffc0a86401307c6000004000880000000000000000"
            + "0000000000000000000000000000000000000000000000000000000000000000"
            + "0000000000409c40000000000000000000000000c0a864020000000000000000"
            + "00000000c0a86401000000000000000000000000000000000000000000000000"
            + "0000000000000000000000000000000000000000000000000000000000000000";

    @Test
    void theReqIsTheOneLinuxRpingSends() throws Exception {
        InetAddress client = InetAddress.ofLiteral("192.168.100.2");
        InetAddress server = InetAddress.ofLiteral("192.168.100.1");
        int flowLabel = (40000 * 31 + 7174) & 0xF_FFFF;
        PathRec path = new PathRec(Gid.ofInetAddress(client), Gid.ofInetAddress(server), 64, 0, flowLabel, 0xFFFF, 0,
                Mtu.MTU_1024, CmMsg.CMA_IBOE_PACKET_LIFETIME);
        byte[] pd = CmaHeader.format(new InetSocketAddress(client, 40000), new InetSocketAddress(server, 7174), null);
        IbCm.ReqParam p = new IbCm.ReqParam(path, 0x0000_0000_0106_1C06L, 0x11, QpType.RC, 0xAB_CDEF, 1, 1, false, 7, 7,
                20, 20, 15, false, pd);
        byte[] m = CmMsg.formatReq((3L << 32) | 0x5A3C_1F07L, 0x5A3C_1F07, 0x5054_00FF_FE12_3456L, 15, p);
        assertEquals(RPING_REQ, HexFormat.of().formatHex(m));
    }

    @Test
    void ackTimeoutsAreCmAckTimeouts() {
        assertEquals(17, CmMsg.ackTimeout(15, 16), "rxe (ack delay 15), packet life time 16");
        assertEquals(16, CmMsg.ackTimeout(15, 13), "perftest's timeout 14");
        assertEquals(4096, CmMsg.convertToMs(20));
        assertEquals(512, CmMsg.convertToMs(17));
        assertEquals(1, CmMsg.convertToMs(3));
    }

    @Test
    void theCmaHeaderRoundTripsAndRejectsForeignVersions() throws Exception {
        byte[] mad = new byte[Mad.SIZE];
        byte[] pd = CmaHeader.format(new InetSocketAddress(InetAddress.ofLiteral("fd99::1"), 40001),
                new InetSocketAddress(InetAddress.ofLiteral("fd99::2"), 7471), new byte[] {9});
        System.arraycopy(pd, 0, mad, CmMsg.REQ_PRIVATE_DATA, pd.length);
        CmaHeader h = CmaHeader.parse(mad, CmMsg.REQ_PRIVATE_DATA);
        assertEquals(6, h.ipVersion());
        assertEquals(40001, h.srcPort());
        assertEquals(InetAddress.ofLiteral("fd99::2"), h.dst());
        assertEquals(9, mad[CmMsg.REQ_PRIVATE_DATA + 36]);
        mad[CmMsg.REQ_PRIVATE_DATA] = 1;
        assertNull(CmaHeader.parse(mad, CmMsg.REQ_PRIVATE_DATA), "cma_version 1");
        mad[CmMsg.REQ_PRIVATE_DATA] = 0;
        mad[CmMsg.REQ_PRIVATE_DATA + 1] = 0x50;
        assertNull(CmaHeader.parse(mad, CmMsg.REQ_PRIVATE_DATA), "ip_version 5");
    }

    @Test
    void bitFieldsKeepTheirNeighbours() {
        byte[] m = new byte[4];
        Mad.bits(m, 0, 3, 5, 20);
        Mad.bits(m, 0, 0, 3, 7);
        assertEquals((byte) 0xA7, m[0]);
        Mad.put24(m, 0, 0x123456);
        assertEquals(0x123456, Mad.get24(m, 0));
        assertArrayEquals(new byte[] {0x12, 0x34, 0x56, 0}, m);
    }
}
