// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.cm.CmEventType;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/**
 * The librdmacm offsets {@link Rdmacm} reads and writes, compared with the installed {@code rdma/rdma_cma.h}
 * by an {@code offsetof}/{@code sizeof} program compiled with gcc; and the CM provider on a host without a
 * kernel RDMA stack (this machine, CI): no addresses, a clear ENODEV on use, no crash.
 */
class RdmacmLayoutsTest {
    @Test
    void everyOffsetMatchesTheHeader() throws Exception {
        CProbe.assumeToolchain("rdma/rdma_cma.h");
        Map<String, Long> java = new LinkedHashMap<>();
        java.put("sizeof(struct rdma_cm_id)", Rdmacm.ID_SIZE);
        java.put("offsetof(struct rdma_cm_id, verbs)", Rdmacm.ID_VERBS);
        java.put("offsetof(struct rdma_cm_id, qp)", Rdmacm.ID_QP);
        java.put("offsetof(struct rdma_cm_id, route.addr.src_addr)", Rdmacm.ID_SRC_ADDR);
        java.put("offsetof(struct rdma_cm_id, route.addr.dst_addr)", Rdmacm.ID_DST_ADDR);
        java.put("offsetof(struct rdma_cm_id, route.path_rec)", Rdmacm.ID_PATH_REC);
        java.put("offsetof(struct rdma_cm_id, route.num_paths)", Rdmacm.ID_NUM_PATHS);
        java.put("offsetof(struct rdma_cm_id, port_num)", Rdmacm.ID_PORT_NUM);
        java.put("sizeof(((struct rdma_cm_id *)0)->port_num)", 1L);
        java.put("sizeof(struct sockaddr_storage)", Rdmacm.SOCKADDR_STORAGE);
        java.put("sizeof(struct rdma_cm_event)", Rdmacm.EV_SIZE);
        java.put("offsetof(struct rdma_cm_event, id)", Rdmacm.EV_ID);
        java.put("offsetof(struct rdma_cm_event, listen_id)", Rdmacm.EV_LISTEN_ID);
        java.put("offsetof(struct rdma_cm_event, event)", Rdmacm.EV_EVENT);
        java.put("offsetof(struct rdma_cm_event, status)", Rdmacm.EV_STATUS);
        java.put("offsetof(struct rdma_cm_event, param)", Rdmacm.EV_PARAM);
        java.put("sizeof(struct rdma_conn_param)", Rdmacm.CP_SIZE);
        java.put("offsetof(struct rdma_conn_param, private_data)", Rdmacm.CP_PRIVATE_DATA);
        java.put("offsetof(struct rdma_conn_param, private_data_len)", Rdmacm.CP_PRIVATE_DATA_LEN);
        java.put("offsetof(struct rdma_conn_param, responder_resources)", Rdmacm.CP_RESPONDER_RESOURCES);
        java.put("offsetof(struct rdma_conn_param, initiator_depth)", Rdmacm.CP_INITIATOR_DEPTH);
        java.put("offsetof(struct rdma_conn_param, flow_control)", Rdmacm.CP_FLOW_CONTROL);
        java.put("offsetof(struct rdma_conn_param, retry_count)", Rdmacm.CP_RETRY_COUNT);
        java.put("offsetof(struct rdma_conn_param, rnr_retry_count)", Rdmacm.CP_RNR_RETRY_COUNT);
        java.put("offsetof(struct rdma_conn_param, srq)", Rdmacm.CP_SRQ);
        java.put("offsetof(struct rdma_conn_param, qp_num)", Rdmacm.CP_QP_NUM);
        // the event's param union: conn is laid out as rdma_conn_param, ud as rdma_ud_param
        java.put("offsetof(struct rdma_ud_param, private_data)", Rdmacm.CP_PRIVATE_DATA);
        java.put("offsetof(struct rdma_ud_param, private_data_len)", Rdmacm.CP_PRIVATE_DATA_LEN);
        java.put("offsetof(struct rdma_ud_param, ah_attr)", Rdmacm.UD_AH_ATTR);
        java.put("offsetof(struct rdma_ud_param, qp_num)", Rdmacm.UD_QP_NUM);
        java.put("offsetof(struct rdma_ud_param, qkey)", Rdmacm.UD_QKEY);
        java.put("sizeof(struct ibv_sa_path_rec)", 64L);
        java.put("offsetof(struct ibv_sa_path_rec, dgid)", Rdmacm.PR_DGID);
        java.put("offsetof(struct ibv_sa_path_rec, sgid)", Rdmacm.PR_SGID);
        java.put("offsetof(struct ibv_sa_path_rec, flow_label)", Rdmacm.PR_FLOW_LABEL);
        java.put("offsetof(struct ibv_sa_path_rec, hop_limit)", Rdmacm.PR_HOP_LIMIT);
        java.put("offsetof(struct ibv_sa_path_rec, traffic_class)", Rdmacm.PR_TRAFFIC_CLASS);
        java.put("offsetof(struct ibv_sa_path_rec, pkey)", Rdmacm.PR_PKEY);
        java.put("offsetof(struct ibv_sa_path_rec, sl)", Rdmacm.PR_SL);
        java.put("offsetof(struct ibv_sa_path_rec, mtu)", Rdmacm.PR_MTU);
        java.put("offsetof(struct ibv_sa_path_rec, packet_life_time)", Rdmacm.PR_PACKET_LIFE_TIME);
        java.put("offsetof(struct rdma_event_channel, fd)", 0L);
        java.put("RDMA_OPTION_ID", (long) Rdmacm.RDMA_OPTION_ID);
        java.put("RDMA_PS_TCP", (long) PortSpace.TCP.value());
        java.put("RDMA_PS_UDP", (long) PortSpace.UDP.value());
        java.put("RDMA_PS_IPOIB", (long) PortSpace.IPOIB.value());
        for (CmEventType t : CmEventType.values()) {
            java.put("RDMA_CM_EVENT_" + t.name(), (long) t.value());
        }
        StringBuilder c = new StringBuilder("#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_cma.h>\n"
                + "int main(void) {\n");
        int i = 0;
        for (String expr : java.keySet()) {
            c.append("  printf(\"").append(i++).append(" %ld\\n\", (long) (").append(expr).append("));\n");
        }
        c.append("  return 0;\n}\n");
        Map<String, String> got = CProbe.lines(CProbe.run(c.toString()));
        List<String> wrong = new ArrayList<>();
        i = 0;
        for (Map.Entry<String, Long> e : java.entrySet()) {
            String v = got.get(Integer.toString(i++));
            if (!Long.toString(e.getValue()).equals(v)) {
                wrong.add(e.getKey() + ": Java " + e.getValue() + ", C " + v);
            }
        }
        assertTrue(wrong.isEmpty(), () -> wrong.size() + " of " + java.size() + " differ:\n" + String.join("\n", wrong));
    }

    @Test
    void withoutAKernelRdmaStackTheCmServesNothingAndSaysWhy() {
        org.junit.jupiter.api.Assumptions.assumeFalse(java.nio.file.Files.exists(
                java.nio.file.Path.of("/sys/class/infiniband_verbs/abi_version")), "this host has a kernel RDMA stack");
        RdmaCmProvider p = new RdmaCmProvider();
        assertEquals("librdmacm", p.name());
        assertTrue(p.addresses().isEmpty(), "no addresses without a kernel stack");
        VerbsException e = org.junit.jupiter.api.Assertions.assertThrows(VerbsException.class,
                () -> p.createId(new CmEventSink() {
                    @Override
                    public void post(CmEventInfo event) {
                    }

                    @Override
                    public CmEventSink connectRequest(CmIdSpi child, CmEventInfo event) {
                        return null;
                    }
                }, PortSpace.TCP, QpType.RC));
        assertEquals(Errno.ENODEV, e.errno());
        assertTrue(e.getMessage().contains("librdmacm"), e.getMessage());
    }
}
