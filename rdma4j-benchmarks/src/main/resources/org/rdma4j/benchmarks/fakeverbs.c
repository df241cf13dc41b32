/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A libibverbs.so.1 stand-in for rdma4j's IbvPostPollBench: just enough of the library (one device "fake0",
 * its context, PD, MR, CQ, QP) for rdma4j-ibverbs to open it and post and poll, where post_send is a no-op
 * and poll_cq returns one completion. It lets the benchmark measure what the Java provider adds per
 * operation (use count, lock, serialising the request, decoding the completion) against the same downcalls
 * made bare. Built by the benchmark at run time with gcc; never shipped. The offsets are rdma-core 44's on
 * x86_64 (the layouts rdma4j-ibverbs checks against the real headers in IbvLayoutsTest).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#define CTX_OFF 320             /* struct verbs_context (648 bytes) ends with size_t sz; struct ibv_context */
#define VCTX_SIZE 648

static void *device;
static void *list[2];
static uint32_t next_qpn = 0x11;
static uint64_t polled;

static int fake_post(void *qp, void *wr, void **bad) {
    (void) qp; (void) bad;
    return *(volatile uint64_t *) wr == 0xFFFFFFFFFFFFFFFFull ? 22 : 0; /* reads the WR as a provider would */
}

static int fake_poll(void *cq, int n, void *wc) {
    (void) cq;
    if (n < 1) return 0;
    memset(wc, 0, 48);
    *(uint64_t *) wc = ++polled;              /* wr_id */
    *(uint32_t *) ((char *) wc + 28) = 0x11;  /* qp_num */
    return 1;
}

static int fake_notify(void *cq, int solicited) { (void) cq; (void) solicited; return 0; }

void **ibv_get_device_list(int *num) {
    if (!device) {
        device = calloc(1, 664);
        *(int *) ((char *) device + 16) = 1;                 /* node_type CA */
        strcpy((char *) device + 24, "fake0");               /* name */
        strcpy((char *) device + 88, "uverbs0");             /* dev_name */
        list[0] = device;
    }
    if (num) *num = 1;
    return list;
}
void ibv_free_device_list(void **l) { (void) l; }
const char *ibv_get_device_name(void *d) { return (const char *) d + 24; }
uint64_t ibv_get_device_guid(void *d) { (void) d; return 0x0100000000000000ull; }

void *ibv_open_device(void *d) {
    char *block = calloc(1, VCTX_SIZE);
    char *ctx = block + CTX_OFF;
    *(size_t *) (ctx - 8) = VCTX_SIZE;
    *(void **) ctx = d;
    *(void **) (ctx + 96) = (void *) fake_poll;
    *(void **) (ctx + 104) = (void *) fake_notify;
    *(void **) (ctx + 168) = (void *) fake_post;
    *(void **) (ctx + 208) = (void *) fake_post;
    *(void **) (ctx + 216) = (void *) fake_post;
    *(int *) (ctx + 264) = -1;
    *(int *) (ctx + 268) = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);  /* async_fd: never readable */
    *(int *) (ctx + 272) = 1;
    *(void **) (ctx + 320) = (void *) UINTPTR_MAX;                 /* abi_compat */
    return ctx;
}
int ibv_close_device(void *ctx) { free((char *) ctx - CTX_OFF); return 0; }

void *ibv_alloc_pd(void *ctx) { void **pd = calloc(1, 16); pd[0] = ctx; return pd; }
int ibv_dealloc_pd(void *pd) { free(pd); return 0; }

void *ibv_reg_mr(void *pd, void *addr, size_t len, int access) {
    (void) access;
    char *mr = calloc(1, 48);
    *(void **) mr = *(void **) pd;
    *(void **) (mr + 8) = pd;
    *(void **) (mr + 16) = addr;
    *(size_t *) (mr + 24) = len;
    *(uint32_t *) (mr + 36) = 0x1234;
    *(uint32_t *) (mr + 40) = 0x1234;
    return mr;
}
int ibv_dereg_mr(void *mr) { free(mr); return 0; }

void *ibv_create_cq(void *ctx, int cqe, void *cq_ctx, void *ch, int vec) {
    (void) cq_ctx; (void) vec;
    char *cq = calloc(1, 128);
    *(void **) cq = ctx;
    *(void **) (cq + 8) = ch;
    *(int *) (cq + 28) = cqe;
    return cq;
}
int ibv_destroy_cq(void *cq) { free(cq); return 0; }

void *ibv_create_qp(void *pd, void *init) {
    char *qp = calloc(1, 160);
    *(void **) qp = *(void **) pd;
    *(void **) (qp + 16) = pd;
    *(void **) (qp + 24) = *(void **) ((char *) init + 8);
    *(void **) (qp + 32) = *(void **) ((char *) init + 16);
    *(uint32_t *) (qp + 52) = next_qpn++;
    return qp;
}
int ibv_query_qp(void *qp, void *attr, int mask, void *init) {
    (void) qp; (void) mask; (void) init;
    memset(attr, 0, 144);
    *(uint32_t *) attr = 3; /* RTS */
    return 0;
}
int ibv_modify_qp(void *qp, void *attr, int mask) { (void) qp; (void) attr; (void) mask; return 0; }
int ibv_destroy_qp(void *qp) { free(qp); return 0; }
int ibv_fork_init(void) { return 0; }

/* every other function the provider binds exists and fails cleanly */
#define UNSUPPORTED_INT(name) int name(void) { return ENOSYS; }
#define UNSUPPORTED_PTR(name) void *name(void) { errno = ENOSYS; return NULL; }
#define UNSUPPORTED_VOID(name) void name(void) { }
UNSUPPORTED_INT(ibv_get_async_event)
UNSUPPORTED_VOID(ibv_ack_async_event)
UNSUPPORTED_INT(ibv_query_device)
UNSUPPORTED_INT(ibv_query_port)
UNSUPPORTED_INT(ibv_query_gid)
UNSUPPORTED_INT(ibv_query_pkey)
UNSUPPORTED_INT(ibv_resize_cq)
UNSUPPORTED_INT(ibv_get_cq_event)
UNSUPPORTED_VOID(ibv_ack_cq_events)
UNSUPPORTED_PTR(ibv_create_srq)
UNSUPPORTED_INT(ibv_modify_srq)
UNSUPPORTED_INT(ibv_query_srq)
UNSUPPORTED_INT(ibv_destroy_srq)
UNSUPPORTED_PTR(ibv_create_ah)
UNSUPPORTED_INT(ibv_destroy_ah)
UNSUPPORTED_INT(ibv_attach_mcast)
UNSUPPORTED_INT(ibv_detach_mcast)
UNSUPPORTED_PTR(ibv_create_comp_channel)
UNSUPPORTED_INT(ibv_destroy_comp_channel)

/* the raw no-ops the baseline calls, the same code the ops table points at */
int fake_post_send(void *qp, void *wr, void **bad) { return fake_post(qp, wr, bad); }
int fake_poll_cq(void *cq, int n, void *wc) { return fake_poll(cq, n, wc); }
