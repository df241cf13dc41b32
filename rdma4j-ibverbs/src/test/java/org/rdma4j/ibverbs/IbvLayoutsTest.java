// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.UnionLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortState;
import org.rdma4j.verbs.QpAttrMask;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.WcFlags;
import org.rdma4j.verbs.WcOpcode;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WrOpcode;

/**
 * Every struct member and constant the provider uses, compared with the installed {@code infiniband/verbs.h}
 * by an {@code offsetof}/{@code sizeof} program compiled with gcc.
 */
class IbvLayoutsTest {
    private static String cType(GroupLayout g) {
        return (g instanceof UnionLayout ? "union " : "struct ") + g.name().orElseThrow();
    }

    @Test
    void everyMemberMatchesTheHeaders() throws Exception {
        CProbe.assumeToolchain("infiniband/verbs.h");
        StringBuilder c = new StringBuilder("#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n"
                + "int main(void) {\n");
        Map<String, long[]> expected = new LinkedHashMap<>();
        for (GroupLayout g : IbvLayouts.ALL) {
            String t = cType(g);
            String key = g.name().orElseThrow();
            c.append("  printf(\"").append(key).append(" %zu\\n\", sizeof(").append(t).append("));\n");
            expected.put(key, new long[] {g.byteSize()});
            for (IbvLayouts.Member m : IbvLayouts.members(g)) {
                String k = key + "." + m.cPath();
                c.append("  printf(\"").append(k).append(" %zu %zu\\n\", offsetof(").append(t).append(", ")
                        .append(m.cPath()).append("), sizeof(((").append(t).append(" *)0)->").append(m.cPath())
                        .append("));\n");
                expected.put(k, new long[] {m.offset(), m.size()});
            }
        }
        c.append("  printf(\"verbs_context.sz_distance %zu\\n\", offsetof(struct verbs_context, context)"
                + " - offsetof(struct verbs_context, sz));\n");
        c.append("  printf(\"verbs_context.context_is_last %d\\n\", offsetof(struct verbs_context, context)"
                + " + sizeof(struct ibv_context) == sizeof(struct verbs_context));\n");
        c.append("  return 0;\n}\n");
        Map<String, String> got = CProbe.lines(CProbe.run(c.toString()));
        List<String> wrong = new ArrayList<>();
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            String v = got.get(e.getKey());
            long[] j = e.getValue();
            String want = j.length == 1 ? Long.toString(j[0]) : j[0] + " " + j[1];
            boolean ok = want.equals(v);
            if (!ok && e.getKey().equals("ibv_port_attr") && v != null) {
                // extensible: newer rdma-core appends members (active_speed_ex); the 1.1 call writes 48 bytes
                ok = Long.parseLong(v) >= j[0];
            }
            if (!ok) {
                wrong.add(e.getKey() + ": Java " + want + ", C " + v);
            }
        }
        assertEquals(Long.toString(IbvLayouts.VCTX_SZ_DISTANCE), got.get("verbs_context.sz_distance"));
        assertEquals("1", got.get("verbs_context.context_is_last"));
        assertTrue(wrong.isEmpty(), () -> wrong.size() + " of " + expected.size() + " differ:\n" + String.join("\n", wrong));
        assertTrue(expected.size() > 250, "the probe covers every member: " + expected.size());
    }

    @Test
    void everyConstantMatchesTheHeaders() throws Exception {
        CProbe.assumeToolchain("infiniband/verbs.h");
        Map<String, Long> java = new LinkedHashMap<>();
        for (WrOpcode o : WrOpcode.values()) {
            String c = switch (o) {
                case RDMA_WRITE -> "IBV_WR_RDMA_WRITE";
                case RDMA_WRITE_WITH_IMM -> "IBV_WR_RDMA_WRITE_WITH_IMM";
                case SEND -> "IBV_WR_SEND";
                case SEND_WITH_IMM -> "IBV_WR_SEND_WITH_IMM";
                case RDMA_READ -> "IBV_WR_RDMA_READ";
                case ATOMIC_CMP_AND_SWP -> "IBV_WR_ATOMIC_CMP_AND_SWP";
                case ATOMIC_FETCH_AND_ADD -> "IBV_WR_ATOMIC_FETCH_AND_ADD";
            };
            java.put(c, (long) o.value());
        }
        for (QpType t : QpType.values()) {
            java.put("IBV_QPT_" + t.name(), (long) t.value());
        }
        for (QpState s : QpState.values()) {
            java.put("IBV_QPS_" + s.name(), (long) s.ordinal());
        }
        for (Mtu m : Mtu.values()) {
            java.put("IBV_" + m.name(), (long) m.value());
        }
        for (AccessFlag a : AccessFlag.values()) {
            java.put("IBV_ACCESS_" + a.name(), (long) a.bit());
        }
        for (QpAttrMask m : QpAttrMask.values()) {
            String n = switch (m) {
                case MAX_QP_RD_ATOMIC -> "IBV_QP_MAX_QP_RD_ATOMIC";
                case AV -> "IBV_QP_AV";
                default -> "IBV_QP_" + m.name();
            };
            java.put(n, (long) m.bit());
        }
        java.put("IBV_QP_STATE|...|IBV_QP_DEST_QPN", (long) IbvAttrs.ALL_QP_ATTR_MASK);
        for (WcStatus s : WcStatus.values()) {
            java.put("IBV_WC_" + (s == WcStatus.SUCCESS ? "SUCCESS" : s.name()), (long) s.value());
        }
        for (WcOpcode o : WcOpcode.values()) {
            java.put("IBV_WC_" + (o == WcOpcode.RECV_RDMA_WITH_IMM ? "RECV_RDMA_WITH_IMM" : o.name()), (long) o.value());
        }
        java.put("IBV_SEND_FENCE", (long) SendFlags.FENCE);
        java.put("IBV_SEND_SIGNALED", (long) SendFlags.SIGNALED);
        java.put("IBV_SEND_SOLICITED", (long) SendFlags.SOLICITED);
        java.put("IBV_SEND_INLINE", (long) SendFlags.INLINE);
        java.put("IBV_WC_GRH", (long) WcFlags.GRH);
        java.put("IBV_WC_WITH_IMM", (long) WcFlags.WITH_IMM);
        for (PortState p : PortState.values()) {
            java.put("IBV_PORT_" + p.name(), (long) p.ordinal());
        }
        AsyncEventType[] types = IbvAsyncEvents.TYPES;
        for (int i = 0; i < types.length; i++) {
            AsyncEventType t = types[i];
            String n = switch (t) {
                case QP_FATAL -> "IBV_EVENT_QP_FATAL";
                case QP_LAST_WQE_REACHED -> "IBV_EVENT_QP_LAST_WQE_REACHED";
                default -> "IBV_EVENT_" + t.name();
            };
            java.put(n, (long) i);
        }
        java.put("IBV_TRANSPORT_IB", (long) IbvDevice.TRANSPORT_IB);
        java.put("IBV_TRANSPORT_IWARP", (long) IbvDevice.TRANSPORT_IWARP);
        java.put("IBV_SRQ_LIMIT", 2L);
        java.put("IBV_ATOMIC_HCA", 1L);
        java.put("IBV_LINK_LAYER_ETHERNET", 2L);

        StringBuilder c = new StringBuilder("#include <stdio.h>\n#include <infiniband/verbs.h>\nint main(void) {\n");
        for (String k : java.keySet()) {
            String expr = k.equals("IBV_QP_STATE|...|IBV_QP_DEST_QPN") ? "((IBV_QP_DEST_QPN << 1) - 1)" : k;
            c.append("  printf(\"").append(k).append(" %lld\\n\", (long long) (").append(expr).append("));\n");
        }
        c.append("  return 0;\n}\n");
        Map<String, String> got = CProbe.lines(CProbe.run(c.toString()));
        List<String> wrong = new ArrayList<>();
        for (Map.Entry<String, Long> e : java.entrySet()) {
            if (!Long.toString(e.getValue()).equals(got.get(e.getKey()))) {
                wrong.add(e.getKey() + ": Java " + e.getValue() + ", C " + got.get(e.getKey()));
            }
        }
        assertTrue(wrong.isEmpty(), () -> String.join("\n", wrong));
    }
}
