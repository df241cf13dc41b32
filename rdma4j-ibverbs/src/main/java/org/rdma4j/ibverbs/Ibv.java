// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The libibverbs functions as {@code static final} downcall handles, bound at the version nodes
 * {@link IbvLibrary} checked. Touch this class only once {@link IbvLibrary#get()} succeeded.
 *
 * <p>Control-path calls capture errno into a caller-owned call state (first argument). They follow
 * libibverbs' two conventions: constructors return NULL and set errno; the other calls return 0 or an
 * errno value (positive, or -1 with errno set by some paths: {@link #err} takes either).
 *
 * <p>The data path is not exported: {@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_post_srq_recv},
 * {@code ibv_poll_cq} and {@code ibv_req_notify_cq} are {@code static inline} in verbs.h, each calling
 * {@code context->ops.<slot>}. The handles here take that function pointer as their first argument
 * ({@link Linker#downcallHandle(FunctionDescriptor, Linker.Option...)}); callers read the pointers once from
 * the context's ops table. {@code poll_cq} is linked {@code critical}: providers poll a CQ in user
 * memory (rxe and siw map it) without blocking or calling back. The post calls are not: rxe's post_send
 * rings its doorbell with a {@code write(2)} on the command descriptor (providers/rxe {@code post_send_db}).
 */
final class Ibv {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option ERRNO = Linker.Option.captureCallState("errno");
    private static final MemoryLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO_HANDLE = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout.OfByte B = ValueLayout.JAVA_BYTE;
    private static final ValueLayout.OfShort S = ValueLayout.JAVA_SHORT;
    private static final AddressLayout P = ValueLayout.ADDRESS;

    static final MethodHandle GET_DEVICE_LIST = bind("ibv_get_device_list", FunctionDescriptor.of(P, P));
    static final MethodHandle FREE_DEVICE_LIST = bind("ibv_free_device_list", FunctionDescriptor.ofVoid(P));
    static final MethodHandle GET_DEVICE_NAME = bind("ibv_get_device_name", FunctionDescriptor.of(P, P));
    static final MethodHandle GET_DEVICE_GUID = bind("ibv_get_device_guid", FunctionDescriptor.of(L, P));
    static final MethodHandle OPEN_DEVICE = bind("ibv_open_device", FunctionDescriptor.of(P, P));
    static final MethodHandle CLOSE_DEVICE = bind("ibv_close_device", FunctionDescriptor.of(I, P));
    static final MethodHandle GET_ASYNC_EVENT = bind("ibv_get_async_event", FunctionDescriptor.of(I, P, P));
    static final MethodHandle ACK_ASYNC_EVENT = bind("ibv_ack_async_event", FunctionDescriptor.ofVoid(P));
    static final MethodHandle QUERY_DEVICE = bind("ibv_query_device", FunctionDescriptor.of(I, P, P));
    static final MethodHandle QUERY_PORT = bind("ibv_query_port", FunctionDescriptor.of(I, P, B, P));
    static final MethodHandle QUERY_GID = bind("ibv_query_gid", FunctionDescriptor.of(I, P, B, I, P));
    static final MethodHandle QUERY_PKEY = bind("ibv_query_pkey", FunctionDescriptor.of(I, P, B, I, P));
    static final MethodHandle ALLOC_PD = bind("ibv_alloc_pd", FunctionDescriptor.of(P, P));
    static final MethodHandle DEALLOC_PD = bind("ibv_dealloc_pd", FunctionDescriptor.of(I, P));
    static final MethodHandle REG_MR = bind("ibv_reg_mr", FunctionDescriptor.of(P, P, P, L, I));
    static final MethodHandle DEREG_MR = bind("ibv_dereg_mr", FunctionDescriptor.of(I, P));
    static final MethodHandle CREATE_COMP_CHANNEL = bind("ibv_create_comp_channel", FunctionDescriptor.of(P, P));
    static final MethodHandle DESTROY_COMP_CHANNEL = bind("ibv_destroy_comp_channel", FunctionDescriptor.of(I, P));
    static final MethodHandle CREATE_CQ = bind("ibv_create_cq", FunctionDescriptor.of(P, P, I, P, P, I));
    static final MethodHandle RESIZE_CQ = bind("ibv_resize_cq", FunctionDescriptor.of(I, P, I));
    static final MethodHandle DESTROY_CQ = bind("ibv_destroy_cq", FunctionDescriptor.of(I, P));
    static final MethodHandle GET_CQ_EVENT = bind("ibv_get_cq_event", FunctionDescriptor.of(I, P, P, P));
    static final MethodHandle ACK_CQ_EVENTS = bind("ibv_ack_cq_events", FunctionDescriptor.ofVoid(P, I));
    static final MethodHandle CREATE_SRQ = bind("ibv_create_srq", FunctionDescriptor.of(P, P, P));
    static final MethodHandle MODIFY_SRQ = bind("ibv_modify_srq", FunctionDescriptor.of(I, P, P, I));
    static final MethodHandle QUERY_SRQ = bind("ibv_query_srq", FunctionDescriptor.of(I, P, P));
    static final MethodHandle DESTROY_SRQ = bind("ibv_destroy_srq", FunctionDescriptor.of(I, P));
    static final MethodHandle CREATE_QP = bind("ibv_create_qp", FunctionDescriptor.of(P, P, P));
    static final MethodHandle QUERY_QP = bind("ibv_query_qp", FunctionDescriptor.of(I, P, P, I, P));
    static final MethodHandle MODIFY_QP = bind("ibv_modify_qp", FunctionDescriptor.of(I, P, P, I));
    static final MethodHandle DESTROY_QP = bind("ibv_destroy_qp", FunctionDescriptor.of(I, P));
    static final MethodHandle CREATE_AH = bind("ibv_create_ah", FunctionDescriptor.of(P, P, P));
    static final MethodHandle DESTROY_AH = bind("ibv_destroy_ah", FunctionDescriptor.of(I, P));
    static final MethodHandle ATTACH_MCAST = bind("ibv_attach_mcast", FunctionDescriptor.of(I, P, P, S));
    static final MethodHandle DETACH_MCAST = bind("ibv_detach_mcast", FunctionDescriptor.of(I, P, P, S));
    static final MethodHandle FORK_INIT = bind("ibv_fork_init", FunctionDescriptor.of(I));
    /** {@code _ibv_query_gid_ex} (IBVERBS_1.11), or null on older libraries. */
    static final MethodHandle QUERY_GID_EX = bindOptional("_ibv_query_gid_ex", FunctionDescriptor.of(I, P, I, I, P, I, L));
    /** {@code ibv_is_fork_initialized} (IBVERBS_1.13), or null on older libraries. */
    static final MethodHandle IS_FORK_INITIALIZED = bindOptional("ibv_is_fork_initialized", FunctionDescriptor.of(I));

    /** {@code int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **)}, target first. */
    static final MethodHandle POST_SEND = LINKER.downcallHandle(FunctionDescriptor.of(I, P, P, P));
    /** {@code post_recv} and {@code post_srq_recv} have the same shape with {@code ibv_recv_wr}. */
    static final MethodHandle POST_RECV = POST_SEND;
    /** {@code int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *)}, target first. */
    static final MethodHandle POLL_CQ = LINKER.downcallHandle(FunctionDescriptor.of(I, P, I, P),
            Linker.Option.critical(false));
    /** {@code int (*req_notify_cq)(struct ibv_cq *, int solicited_only)}, target first. */
    static final MethodHandle REQ_NOTIFY_CQ = LINKER.downcallHandle(FunctionDescriptor.of(I, P, I));

    private Ibv() {
    }

    private static MethodHandle bind(String name, FunctionDescriptor fd) {
        MemorySegment fn = IbvLibrary.find(name).orElseThrow(() -> new IllegalStateException("not bound: " + name));
        return LINKER.downcallHandle(fn, fd, ERRNO);
    }

    private static MethodHandle bindOptional(String name, FunctionDescriptor fd) {
        return IbvLibrary.find(name).map(fn -> LINKER.downcallHandle(fn, fd, ERRNO)).orElse(null);
    }

    /**
     * {@return a call state for the control-path handles}
     *
     * @param arena owns it
     */
    static MemorySegment newCallState(java.lang.foreign.Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    /**
     * {@return its errno}
     *
     * @param state the call state of the last call
     */
    static int errno(MemorySegment state) {
        return (int) ERRNO_HANDLE.get(state, 0L);
    }

    /**
     * The errno of an int-returning verb.
     *
     * @param rc    its return value (non-zero)
     * @param state its call state
     * @return a positive errno
     */
    static int err(int rc, MemorySegment state) {
        if (rc > 0) {
            return rc;
        }
        int e = errno(state);
        return e > 0 ? e : (rc < -1 ? -rc : 5 /* EIO: a provider failed without saying why */);
    }

    /**
     * Rethrows what a downcall threw (nothing checked can come out of a native call).
     *
     * @param t the throwable
     * @return never
     */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException(t);
    }
}
