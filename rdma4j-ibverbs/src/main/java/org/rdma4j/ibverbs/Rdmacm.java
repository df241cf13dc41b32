// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.rdma4j.libc.Libc;

/**
 * {@code librdmacm.so.1}, loaded once and bound with {@code dlvsym} at the version nodes whose layouts this
 * provider was written for (RDMACM_1.0, RDMACM_1.2 for rdma_init_qp_attr and rdma_establish), as
 * {@link IbvLibrary} does for libibverbs. The handles capture errno: librdmacm's calls return -1 and set it
 * ({@code ERR(e)} in cma.c). Touch {@link #handles()} only once {@link #failure()} is null.
 *
 * <p>Offsets of the librdmacm structs used (x86_64, rdma-core 44, checked against {@code rdma/rdma_cma.h} by
 * {@code RdmacmLayoutsTest}): {@code struct rdma_cm_id} (416 B) verbs@0, qp@24, route.addr.src_addr@32,
 * route.addr.dst_addr@160, route.path_rec@328, route.num_paths@336, port_num@348 (u8); {@code struct
 * rdma_cm_event} (80 B) id@0, listen_id@8, event@16, status@20, param@24 (conn: private_data@24,
 * private_data_len@32 u8, responder_resources@33, initiator_depth@34, flow_control@35, retry_count@36,
 * rnr_retry_count@37, srq@38, qp_num@40; ud: private_data@24, len@32, ah_attr@40, qp_num@72, qkey@76);
 * {@code struct rdma_conn_param} (24 B) as the conn union; {@code struct ibv_sa_path_rec} (64 B) dgid@0,
 * sgid@16, flow_label@40 (BE), hop_limit@44, traffic_class@45, pkey@54 (BE), sl@56, mtu@58,
 * packet_life_time@62; {@code struct rdma_event_channel} fd@0.
 */
final class Rdmacm {
    static final String SONAME = "librdmacm.so.1";

    static final long ID_VERBS = 0;
    static final long ID_QP = 24;
    static final long ID_SRC_ADDR = 32;
    static final long ID_DST_ADDR = 160;
    static final long ID_PATH_REC = 328;
    static final long ID_NUM_PATHS = 336;
    static final long ID_PORT_NUM = 348;
    static final long ID_SIZE = 416;
    static final long SOCKADDR_STORAGE = 128;
    static final long EV_ID = 0;
    static final long EV_LISTEN_ID = 8;
    static final long EV_EVENT = 16;
    static final long EV_STATUS = 20;
    static final long EV_PARAM = 24;
    static final long EV_SIZE = 80;
    static final long CP_PRIVATE_DATA = 0;
    static final long CP_PRIVATE_DATA_LEN = 8;
    static final long CP_RESPONDER_RESOURCES = 9;
    static final long CP_INITIATOR_DEPTH = 10;
    static final long CP_FLOW_CONTROL = 11;
    static final long CP_RETRY_COUNT = 12;
    static final long CP_RNR_RETRY_COUNT = 13;
    static final long CP_SRQ = 14;
    static final long CP_QP_NUM = 16;
    static final long CP_SIZE = 24;
    static final long UD_AH_ATTR = 16;
    static final long UD_QP_NUM = 48;
    static final long UD_QKEY = 52;
    static final long PR_DGID = 0;
    static final long PR_SGID = 16;
    static final long PR_FLOW_LABEL = 40;
    static final long PR_HOP_LIMIT = 44;
    static final long PR_TRAFFIC_CLASS = 45;
    static final long PR_PKEY = 54;
    static final long PR_SL = 56;
    static final long PR_MTU = 58;
    static final long PR_PACKET_LIFE_TIME = 62;
    static final int RDMA_OPTION_ID = 0;

    private static final Map<String, String> REQUIRED = new LinkedHashMap<>();

    static {
        for (String f : List.of("rdma_create_event_channel", "rdma_destroy_event_channel", "rdma_create_id",
                "rdma_destroy_id", "rdma_bind_addr", "rdma_resolve_addr", "rdma_resolve_route", "rdma_create_qp",
                "rdma_destroy_qp", "rdma_connect", "rdma_listen", "rdma_accept", "rdma_reject", "rdma_disconnect",
                "rdma_get_cm_event", "rdma_ack_cm_event", "rdma_set_option", "rdma_get_devices", "rdma_free_devices")) {
            REQUIRED.put(f, "RDMACM_1.0");
        }
        REQUIRED.put("rdma_init_qp_attr", "RDMACM_1.2");
        REQUIRED.put("rdma_establish", "RDMACM_1.2");
    }

    /** The bound functions. */
    record Handles(MethodHandle createEventChannel, MethodHandle destroyEventChannel, MethodHandle createId,
                   MethodHandle destroyId, MethodHandle bindAddr, MethodHandle resolveAddr, MethodHandle resolveRoute,
                   MethodHandle createQp, MethodHandle destroyQp, MethodHandle connect, MethodHandle listen,
                   MethodHandle accept, MethodHandle reject, MethodHandle disconnect, MethodHandle getCmEvent,
                   MethodHandle ackCmEvent, MethodHandle setOption, MethodHandle getDevices, MethodHandle freeDevices,
                   MethodHandle initQpAttr, MethodHandle establish) {
    }

    private static volatile Object loaded;

    private Rdmacm() {
    }

    private static synchronized Object load() {
        if (loaded != null) {
            return loaded;
        }
        String soname = System.getProperty("rdma4j.rdmacm.library", SONAME);
        MemorySegment h = Libc.dlopen(soname, Libc.RTLD_NOW | Libc.RTLD_LOCAL);
        if (h.equals(MemorySegment.NULL)) {
            loaded = soname + " cannot be loaded (" + Libc.dlerror() + "): install rdma-core's librdmacm "
                    + "(Debian/Ubuntu: apt-get install librdmacm1; RHEL/Fedora: dnf install librdmacm)";
            return loaded;
        }
        Map<String, MemorySegment> s = new LinkedHashMap<>();
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, String> e : REQUIRED.entrySet()) {
            MemorySegment f = Libc.dlvsym(h, e.getKey(), e.getValue());
            if (f.equals(MemorySegment.NULL)) {
                missing.add(e.getKey() + "@" + e.getValue());
            } else {
                s.put(e.getKey(), f);
            }
        }
        if (!missing.isEmpty()) {
            loaded = soname + " does not have the ABI this provider was written for (rdma-core librdmacm with "
                    + "RDMACM_1.2): missing " + String.join(", ", missing);
            return loaded;
        }
        ValueLayout.OfInt i = ValueLayout.JAVA_INT;
        ValueLayout p = ValueLayout.ADDRESS;
        loaded = new Handles(bind(s, "rdma_create_event_channel", FunctionDescriptor.of(p)),
                bind(s, "rdma_destroy_event_channel", FunctionDescriptor.ofVoid(p)),
                bind(s, "rdma_create_id", FunctionDescriptor.of(i, p, p, p, i)),
                bind(s, "rdma_destroy_id", FunctionDescriptor.of(i, p)),
                bind(s, "rdma_bind_addr", FunctionDescriptor.of(i, p, p)),
                bind(s, "rdma_resolve_addr", FunctionDescriptor.of(i, p, p, p, i)),
                bind(s, "rdma_resolve_route", FunctionDescriptor.of(i, p, i)),
                bind(s, "rdma_create_qp", FunctionDescriptor.of(i, p, p, p)),
                bind(s, "rdma_destroy_qp", FunctionDescriptor.ofVoid(p)),
                bind(s, "rdma_connect", FunctionDescriptor.of(i, p, p)),
                bind(s, "rdma_listen", FunctionDescriptor.of(i, p, i)),
                bind(s, "rdma_accept", FunctionDescriptor.of(i, p, p)),
                bind(s, "rdma_reject", FunctionDescriptor.of(i, p, p, ValueLayout.JAVA_BYTE)),
                bind(s, "rdma_disconnect", FunctionDescriptor.of(i, p)),
                bind(s, "rdma_get_cm_event", FunctionDescriptor.of(i, p, p)),
                bind(s, "rdma_ack_cm_event", FunctionDescriptor.of(i, p)),
                bind(s, "rdma_set_option", FunctionDescriptor.of(i, p, i, i, p, ValueLayout.JAVA_LONG)),
                bind(s, "rdma_get_devices", FunctionDescriptor.of(p, p)),
                bind(s, "rdma_free_devices", FunctionDescriptor.ofVoid(p)),
                bind(s, "rdma_init_qp_attr", FunctionDescriptor.of(i, p, p, p)),
                bind(s, "rdma_establish", FunctionDescriptor.of(i, p)));
        return loaded;
    }

    private static MethodHandle bind(Map<String, MemorySegment> s, String name, FunctionDescriptor fd) {
        return Linker.nativeLinker().downcallHandle(s.get(name), fd, Linker.Option.captureCallState("errno"));
    }

    /** @return why librdmacm is unusable, or null */
    static String failure() {
        Object l = loaded != null ? loaded : load();
        return l instanceof String why ? why : null;
    }

    /** @return the handles (after {@link #failure()} returned null) */
    static Handles handles() {
        Object l = loaded != null ? loaded : load();
        if (l instanceof Handles h) {
            return h;
        }
        throw new IllegalStateException((String) l);
    }
}
