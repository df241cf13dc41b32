// SPDX-License-Identifier: Apache-2.0
/*
 * rxe_probe: asks a Linux RDMA device (rdma_rxe in the VM of ../shared/vm) what it does in the corner
 * cases where rdma4j's soft device must behave the same (issue 16, items 1-5 and 11). Two QPs of one
 * device in one process, connected to each other through the device's own GID (loopback), one case per
 * sub-command; every observation is printed as "<case>: <what> = <value>" so that the output can be
 * quoted in the docs and compared with rdma4j's conformance tests.
 *
 * Build: gcc -O2 -Wall -o rxe_probe rxe_probe.c -libverbs   (Debian 12: libibverbs-dev, rdma-core 44)
 * Run:   rxe_probe [-d rxe0] [-g 1] CASE      (CASE: cqovf, cqovf7, sendlong, qkey, postchk, modify,
 *                                              rdatomic, retry8, rnr32, lkey, all)
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_BYTES 65536
#define QKEY 0x11111111u

static const char *dev_name = "rxe0";
static int gid_index = 1;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static struct timespec t0;

static double ms_since(const struct timespec *from) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - from->tv_sec) * 1e3 + (now.tv_nsec - from->tv_nsec) / 1e6;
}

/* Verbs calls return an errno value, positive (libibverbs) or negative (some providers): name it. */
static const char *err_name(int r) {
    static char b[64];
    int e = r < 0 ? -r : r;
    snprintf(b, sizeof b, "%s (%d)", e == EINVAL ? "EINVAL" : e == EPERM ? "EPERM" : e == ENOMEM ? "ENOMEM"
             : strerror(e), r);
    return b;
}

static void die(const char *what) {
    fprintf(stderr, "rxe_probe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static const char *state_name(enum ibv_qp_state s) {
    switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "?";
    }
}

static const char *qpt_name(enum ibv_qp_type t) {
    return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : t == IBV_QPT_UD ? "UD" : "?";
}

static void print_state(const char *c, const char *who, struct ibv_qp *qp) {
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) {
        printf("%s: %s state = query failed (%s)\n", c, who, strerror(errno));
        return;
    }
    printf("%s: %s state = %s\n", c, who, state_name(a.qp_state));
}

static void open_device(void) {
    int n;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        die("ibv_get_device_list");
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(ibv_get_device_name(list[i]), dev_name) == 0) {
            ctx = ibv_open_device(list[i]);
        }
    }
    ibv_free_device_list(list);
    if (!ctx) {
        fprintf(stderr, "rxe_probe: no device %s\n", dev_name);
        exit(1);
    }
    pd = ibv_alloc_pd(ctx);
    if (!pd || ibv_query_gid(ctx, 1, gid_index, &gid)) {
        die("alloc_pd/query_gid");
    }
    int fl = fcntl(ctx->async_fd, F_GETFL);
    fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
}

/* One side of a loopback connection: its QP, CQs and buffer. */
struct side {
    struct ibv_qp *qp;
    struct ibv_cq *scq;
    struct ibv_cq *rcq;
    struct ibv_mr *mr;
    char *buf;
};

static void make_side(struct side *s, enum ibv_qp_type type, int scqe, int rcqe) {
    memset(s, 0, sizeof(*s));
    s->scq = ibv_create_cq(ctx, scqe, NULL, NULL, 0);
    s->rcq = ibv_create_cq(ctx, rcqe, NULL, NULL, 0);
    if (!s->scq || !s->rcq) {
        die("create_cq");
    }
    s->buf = aligned_alloc(4096, BUF_BYTES);
    memset(s->buf, 0, BUF_BYTES);
    s->mr = ibv_reg_mr(pd, s->buf, BUF_BYTES, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
            | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    if (!s->mr) {
        die("reg_mr");
    }
    struct ibv_qp_init_attr ia = {
        .send_cq = s->scq, .recv_cq = s->rcq, .qp_type = type,
        .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 2, .max_recv_sge = 2},
    };
    s->qp = ibv_create_qp(pd, &ia);
    if (!s->qp) {
        die("create_qp");
    }
}

static int to_init(struct ibv_qp *qp) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (qp->qp_type == IBV_QPT_UD) {
        a.qkey = QKEY;
        mask |= IBV_QP_QKEY;
    } else {
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    return ibv_modify_qp(qp, &a, mask);
}

static int to_rtr(struct ibv_qp *qp, uint32_t dest, int min_rnr_timer, int max_dest_rd_atomic) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
    int mask = IBV_QP_STATE;
    if (qp->qp_type != IBV_QPT_UD) {
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = dest;
        a.rq_psn = 0;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = gid_index;
        a.ah_attr.grh.hop_limit = 64;
        a.ah_attr.port_num = 1;
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (qp->qp_type == IBV_QPT_RC) {
            a.max_dest_rd_atomic = max_dest_rd_atomic;
            a.min_rnr_timer = min_rnr_timer;
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
    }
    return ibv_modify_qp(qp, &a, mask);
}

static int to_rts(struct ibv_qp *qp, int retry_cnt, int rnr_retry) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .sq_psn = 0};
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (qp->qp_type == IBV_QPT_RC) {
        a.timeout = 14;
        a.retry_cnt = retry_cnt;
        a.rnr_retry = rnr_retry;
        a.max_rd_atomic = 1;
        mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    return ibv_modify_qp(qp, &a, mask);
}

static void bring_up(struct side *s, uint32_t dest, int retry_cnt, int rnr_retry, int min_rnr_timer) {
    if (to_init(s->qp) || to_rtr(s->qp, dest, min_rnr_timer, 1) || to_rts(s->qp, retry_cnt, rnr_retry)) {
        die("modify_qp to RTS");
    }
}

/* A connected pair: a sends, b receives. */
static void pair(struct side *a, struct side *b, enum ibv_qp_type type, int b_rcqe, int retry_cnt,
                 int rnr_retry, int min_rnr_timer) {
    make_side(a, type, 64, 64);
    make_side(b, type, 64, b_rcqe);
    bring_up(a, b->qp->qp_num, retry_cnt, rnr_retry, 12);
    bring_up(b, a->qp->qp_num, retry_cnt, rnr_retry, min_rnr_timer);
}

static int post_recv(struct side *s, uint64_t id, uint32_t off, uint32_t len, uint32_t lkey) {
    struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_recv(s->qp, &wr, &bad);
}

/* Posts one signaled send WR; returns ibv_post_send's result. */
static int post(struct side *s, uint64_t id, enum ibv_wr_opcode op, uint32_t off, uint32_t len, uint32_t lkey,
                struct side *peer, struct ibv_ah *ah, uint32_t remote_qkey) {
    struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_READ) {
        wr.wr.rdma.remote_addr = (uintptr_t)peer->buf;
        wr.wr.rdma.rkey = peer->mr->rkey;
    } else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
        wr.wr.atomic.remote_addr = (uintptr_t)peer->buf;
        wr.wr.atomic.rkey = peer->mr->rkey;
        wr.wr.atomic.compare_add = 5;
        wr.wr.atomic.swap = 9;
    }
    if (ah) {
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = peer->qp->qp_num;
        wr.wr.ud.remote_qkey = remote_qkey;
    }
    return ibv_post_send(s->qp, &wr, &bad);
}

/* Polls until n completions or timeout_ms; prints each with the time since t0. Returns the count. */
static int drain(const char *c, const char *who, struct ibv_cq *cq, int n, int timeout_ms) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int got = 0;
    while (got < n && ms_since(&start) < timeout_ms) {
        struct ibv_wc wc;
        int r = ibv_poll_cq(cq, 1, &wc);
        if (r < 0) {
            printf("%s: %s poll_cq = %d\n", c, who, r);
            return got;
        }
        if (r == 0) {
            usleep(200);
            continue;
        }
        got++;
        printf("%s: %s wc = wr_id %" PRIu64 " status %s (%d) opcode %d byte_len %u vendor_err %u at %.0f ms\n",
               c, who, wc.wr_id, ibv_wc_status_str(wc.status), wc.status, wc.opcode, wc.byte_len, wc.vendor_err,
               ms_since(&t0));
    }
    if (got < n) {
        printf("%s: %s completions = %d of %d within %d ms\n", c, who, got, n, timeout_ms);
    }
    return got;
}

static void events(const char *c, struct side *a, struct side *b, int wait_ms) {
    struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
    int seen = 0;
    while (poll(&p, 1, wait_ms) > 0) {
        struct ibv_async_event ev;
        if (ibv_get_async_event(ctx, &ev)) {
            break;
        }
        const char *obj = "";
        switch (ev.event_type) {
        case IBV_EVENT_CQ_ERR:
            obj = ev.element.cq == a->scq ? " (sender send CQ)" : ev.element.cq == a->rcq ? " (sender recv CQ)"
                : ev.element.cq == b->scq ? " (receiver send CQ)" : ev.element.cq == b->rcq ? " (receiver recv CQ)" : "";
            break;
        case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_QP_LAST_WQE_REACHED:
            obj = ev.element.qp == a->qp ? " (sender QP)" : ev.element.qp == b->qp ? " (receiver QP)" : "";
            break;
        default:
            break;
        }
        printf("%s: async event = %s%s at %.0f ms\n", c, ibv_event_type_str(ev.event_type), obj, ms_since(&t0));
        ibv_ack_async_event(&ev);
        seen++;
        wait_ms = 100;
    }
    if (!seen) {
        printf("%s: async event = none\n", c);
    }
}

static void teardown(struct side *s) {
    ibv_destroy_qp(s->qp);
    ibv_dereg_mr(s->mr);
    ibv_destroy_cq(s->scq);
    ibv_destroy_cq(s->rcq);
    free(s->buf);
}

/* Item 1: the receiver's CQ is full when a SEND arrives. What does the sender see, when; which event? */
static void case_cqovf(const char *c, int retry_cnt, int wait_ms) {
    struct side a, b;
    pair(&a, &b, IBV_QPT_RC, 1, retry_cnt, 7, 12);
    int cap = b.rcq->cqe;
    int n = cap + 2;
    printf("%s: receiver recv CQ cqe asked = 1, got = %d; retry_cnt = %d, timeout = 14; sends = %d\n", c, cap,
           retry_cnt, n);
    for (int i = 0; i < n; i++) {
        post_recv(&b, 100 + i, 64 * i, 64, b.mr->lkey);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        snprintf(a.buf + 64 * i, 64, "message %d", i);
        int r = post(&a, i, IBV_WR_SEND, 64 * i, 16, a.mr->lkey, &b, NULL, 0);
        if (r) {
            printf("%s: post_send %d = %s\n", c, i, err_name(r));
        }
    }
    drain(c, "sender", a.scq, n, wait_ms);
    events(c, &a, &b, 200);
    print_state(c, "sender", a.qp);
    print_state(c, "receiver", b.qp);
    int got = drain(c, "receiver", b.rcq, n + 1, 300);
    printf("%s: receiver recv CQ held = %d completions\n", c, got);
    for (int i = 0; i < n; i++) {
        printf("%s: receiver buffer %d = \"%.16s\"\n", c, i, b.buf + 64 * i);
    }
    teardown(&a);
    teardown(&b);
}

/* Item 2: a SEND longer than the posted receive buffer, on RC, UC and UD. */
static void case_sendlong(enum ibv_qp_type type) {
    char c[32];
    snprintf(c, sizeof c, "sendlong-%s", qpt_name(type));
    struct side a, b;
    pair(&a, &b, type, 64, 2, 2, 12);
    struct ibv_ah *ah = NULL;
    if (type == IBV_QPT_UD) {
        struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gid_index,
                                                                        .hop_limit = 64}};
        ah = ibv_create_ah(pd, &aa);
    }
    // UD: the buffer holds the 40-byte GRH area and 16 bytes, the message has 64
    uint32_t rlen = type == IBV_QPT_UD ? 56 : 16;
    post_recv(&b, 9, 0, rlen, b.mr->lkey);
    printf("%s: receive buffer = %u bytes, message = 64 bytes\n", c, rlen);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = post(&a, 1, IBV_WR_SEND, 0, 64, a.mr->lkey, &b, ah, QKEY);
    if (r) {
        printf("%s: post_send = %s\n", c, err_name(r));
    }
    drain(c, "sender", a.scq, 1, 2000);
    drain(c, "receiver", b.rcq, 1, 1000);
    events(c, &a, &b, 200);
    print_state(c, "sender", a.qp);
    print_state(c, "receiver", b.qp);
    if (ah) {
        ibv_destroy_ah(ah);
    }
    teardown(&a);
    teardown(&b);
}

/* Item 3: the Q_Key a UD send carries when the work request's has bit 31 set. */
static void case_qkey(void) {
    const char *c = "qkey";
    struct side a, b;
    pair(&a, &b, IBV_QPT_UD, 64, 0, 0, 0);
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gid_index,
                                                                    .hop_limit = 64}};
    struct ibv_ah *ah = ibv_create_ah(pd, &aa);
    printf("%s: both QPs' qkey = 0x%08x\n", c, QKEY);
    const uint32_t tries[] = {QKEY, 0x80000000u, 0x80000000u | QKEY, 0x22222222u};
    for (int i = 0; i < 4; i++) {
        post_recv(&b, 10 + i, 0, 4096, b.mr->lkey);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        post(&a, i, IBV_WR_SEND, 0, 32, a.mr->lkey, &b, ah, tries[i]);
        drain(c, "sender", a.scq, 1, 1000);
        int got = drain(c, "receiver", b.rcq, 1, 1000);
        printf("%s: wr remote_qkey 0x%08x -> %s\n", c, tries[i], got ? "delivered" : "not delivered");
        if (!got) {
            // take the unused receive back: move b through RESET again would lose the pairing; just note it
        }
    }
    // may a QP's own Q_Key have bit 31 set (controlled Q_Key)? IB_QP_SET_QKEY needs privilege
    struct ibv_qp_attr at = {.qkey = 0x80000001u};
    int r = ibv_modify_qp(b.qp, &at, IBV_QP_QKEY);
    printf("%s: modify qkey 0x80000001 = %s\n", c, r ? err_name(r) : "ok");
    struct ibv_port_attr pa;
    ibv_query_port(ctx, 1, &pa);
    printf("%s: port qkey_viol_cntr = %u\n", c, pa.qkey_viol_cntr);
    events(c, &a, &b, 100);
    ibv_destroy_ah(ah);
    teardown(&a);
    teardown(&b);
}

/* Item 4: what rdma-core's post_send accepts, and what the kernel then does with it. */
static void case_postchk(void) {
    char c[32];
    struct side a, b;
    const struct {
        enum ibv_qp_type type;
        enum ibv_wr_opcode op;
        uint32_t len;
        const char *name;
    } cases[] = {
        {IBV_QPT_UC, IBV_WR_RDMA_READ, 64, "read-on-UC"},
        {IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, "atomic-on-UC"},
        {IBV_QPT_UD, IBV_WR_RDMA_WRITE, 64, "write-on-UD"},
        {IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD, 16, "atomic-sge16"},
        {IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP, 12, "cas-sge12"},
        {IBV_QPT_RC, IBV_WR_ATOMIC_FETCH_AND_ADD, 4, "atomic-sge4"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(c, sizeof c, "postchk-%s", cases[i].name);
        pair(&a, &b, cases[i].type, 64, 2, 2, 12);
        struct ibv_ah *ah = NULL;
        if (cases[i].type == IBV_QPT_UD) {
            struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
                                     .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}};
            ah = ibv_create_ah(pd, &aa);
        }
        memset(a.buf, 0xAB, 32);
        *(uint64_t *)b.buf = 100;
        post_recv(&b, 9, 1024, 64, b.mr->lkey);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = post(&a, 1, cases[i].op, 0, cases[i].len, a.mr->lkey, &b, ah, QKEY);
        printf("%s: post_send = %s\n", c, r ? err_name(r) : "accepted");
        if (!r) {
            drain(c, "sender", a.scq, 1, 2000);
            print_state(c, "sender", a.qp);
            print_state(c, "receiver", b.qp);
            if (cases[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD || cases[i].op == IBV_WR_ATOMIC_CMP_AND_SWP) {
                printf("%s: local sge bytes 0-7 = 0x%016" PRIx64 ", 8-15 = 0x%016" PRIx64 ", remote = %" PRIu64 "\n",
                       c, *(uint64_t *)a.buf, *(uint64_t *)(a.buf + 8), *(uint64_t *)b.buf);
            }
        }
        events(c, &a, &b, 100);
        if (ah) {
            ibv_destroy_ah(ah);
        }
        teardown(&a);
        teardown(&b);
    }
}

/* Item 4: which out-of-range values modify_qp takes, and what query_qp then reports. */
static void case_modify(void) {
    const char *c = "modify";
    struct side a;
    make_side(&a, IBV_QPT_RC, 8, 8);
    if (to_init(a.qp)) {
        die("init");
    }
    const int rnr[] = {31, 32, 33, 255};
    for (int i = 0; i < 4; i++) {
        // min_rnr_timer is valid in INIT->RTR only: try it in the transition
        struct side t;
        make_side(&t, IBV_QPT_RC, 8, 8);
        to_init(t.qp);
        struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = a.qp->qp_num,
                                 .rq_psn = 0, .max_dest_rd_atomic = 129, .min_rnr_timer = rnr[i],
                                 .ah_attr = {.is_global = 1, .port_num = 1,
                                             .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}}};
        int r = ibv_modify_qp(t.qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        printf("%s: INIT->RTR max_dest_rd_atomic 129 min_rnr_timer %d = %s\n", c, rnr[i], r ? err_name(r) : "ok");
        if (!r) {
            const int retry[] = {8, 15, 255};
            for (int j = 0; j < 3; j++) {
                struct ibv_qp_attr rt = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = retry[j],
                                         .rnr_retry = retry[j], .sq_psn = 0, .max_rd_atomic = 1};
                int r2 = ibv_modify_qp(t.qp, &rt, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT
                        | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
                printf("%s: RTR->RTS retry_cnt %d rnr_retry %d = %s\n", c, retry[j], retry[j],
                       r2 ? err_name(r2) : "ok");
                if (!r2) {
                    break;
                }
            }
            struct ibv_qp_attr q;
            struct ibv_qp_init_attr qi;
            ibv_query_qp(t.qp, &q, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC
                    | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, &qi);
            printf("%s: query = state %s min_rnr_timer %u max_dest_rd_atomic %u retry_cnt %u rnr_retry %u "
                   "max_rd_atomic %u\n", c, state_name(q.qp_state), q.min_rnr_timer, q.max_dest_rd_atomic,
                   q.retry_cnt, q.rnr_retry, q.max_rd_atomic);
        }
        teardown(&t);
    }
    {
        // max_rd_atomic above the device's max_qp_rd_atom, and a value that is rounded
        struct side t;
        make_side(&t, IBV_QPT_RC, 8, 8);
        to_init(t.qp);
        to_rtr(t.qp, a.qp->qp_num, 12, 3);
        const int rd[] = {129, 3};
        for (int j = 0; j < 2; j++) {
            struct ibv_qp_attr rt = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                                     .sq_psn = 0, .max_rd_atomic = rd[j]};
            int r2 = ibv_modify_qp(t.qp, &rt, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
                    | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
            printf("%s: RTR->RTS max_rd_atomic %d = %s\n", c, rd[j], r2 ? err_name(r2) : "ok");
        }
        struct ibv_qp_attr q;
        struct ibv_qp_init_attr qi;
        ibv_query_qp(t.qp, &q, IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MAX_QP_RD_ATOMIC, &qi);
        printf("%s: query after max_dest_rd_atomic 3, max_rd_atomic 3 = max_dest_rd_atomic %u max_rd_atomic %u\n", c,
               q.max_dest_rd_atomic, q.max_rd_atomic);
        struct ibv_qp_attr to = {.timeout = 32};
        int r3 = ibv_modify_qp(t.qp, &to, IBV_QP_TIMEOUT);
        printf("%s: RTS timeout 32 = %s\n", c, r3 ? err_name(r3) : "ok");
        teardown(&t);
    }
    teardown(&a);
}

/* Item 4: max_dest_rd_atomic 129 rounds up to 256, which rxe keeps in a u8: what does a READ then get? */
static void case_rd129(int max_dest_rd_atomic) {
    char c[32];
    snprintf(c, sizeof c, "rdatomic%d", max_dest_rd_atomic);
    struct side a, b;
    make_side(&a, IBV_QPT_RC, 64, 64);
    make_side(&b, IBV_QPT_RC, 64, 64);
    bring_up(&a, b.qp->qp_num, 2, 2, 12);
    if (to_init(b.qp) || to_rtr(b.qp, a.qp->qp_num, 12, max_dest_rd_atomic) || to_rts(b.qp, 2, 2)) {
        die("responder to RTS");
    }
    struct ibv_qp_attr q;
    struct ibv_qp_init_attr qi;
    ibv_query_qp(b.qp, &q, IBV_QP_MAX_DEST_RD_ATOMIC, &qi);
    printf("%s: responder max_dest_rd_atomic set %d, query = %u\n", c, max_dest_rd_atomic, q.max_dest_rd_atomic);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    post(&a, 1, IBV_WR_RDMA_READ, 0, 64, a.mr->lkey, &b, NULL, 0);
    post(&a, 2, IBV_WR_ATOMIC_FETCH_AND_ADD, 64, 8, a.mr->lkey, &b, NULL, 0);
    drain(c, "sender", a.scq, 2, 2000);
    print_state(c, "sender", a.qp);
    print_state(c, "receiver", b.qp);
    teardown(&a);
    teardown(&b);
}

/* Item 4/11: what retry_cnt 8 does when the peer never answers (its QP is in ERR), beside 6 and 7. */
static void case_retry(int retry_cnt, int wait_ms) {
    char c[32];
    snprintf(c, sizeof c, "retry%d", retry_cnt);
    struct side a, b;
    pair(&a, &b, IBV_QPT_RC, 64, retry_cnt, 7, 12);
    struct ibv_qp_attr e = {.qp_state = IBV_QPS_ERR};
    ibv_modify_qp(b.qp, &e, IBV_QP_STATE);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    post(&a, 1, IBV_WR_RDMA_WRITE, 0, 64, a.mr->lkey, &b, NULL, 0);
    int got = drain(c, "sender", a.scq, 1, wait_ms);
    printf("%s: retry_cnt %d, timeout 14 (67 ms), dead peer -> %s\n", c, retry_cnt,
           got ? "completed" : "no completion (still retrying)");
    teardown(&a);
    teardown(&b);
}

/* Item 4: min_rnr_timer 32 in the RNR NAK: how long the requester waits (code 32 & 31 = 0 is 655 ms). */
static void case_rnr(int min_rnr_timer) {
    char c[32];
    snprintf(c, sizeof c, "rnr%d", min_rnr_timer);
    struct side a, b;
    pair(&a, &b, IBV_QPT_RC, 64, 7, 2, min_rnr_timer);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    post(&a, 1, IBV_WR_SEND, 0, 16, a.mr->lkey, &b, NULL, 0); // no receive posted: RNR NAK
    drain(c, "sender", a.scq, 1, 5000);
    printf("%s: responder min_rnr_timer %d, requester rnr_retry 2 (two RNR waits before the error)\n", c,
           min_rnr_timer);
    teardown(&a);
    teardown(&b);
}

/* Item 5: local key failures at the requester and at the responder. */
static void case_lkey(void) {
    char c[32];
    struct side a, b;
    const char *names[] = {"send-bad-lkey", "send-sge-outside-mr", "send-mr-of-other-pd", "read-sink-no-local-write",
                           "recv-bad-lkey", "ud-send-bad-lkey"};
    struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
    for (int i = 0; i < 6; i++) {
        snprintf(c, sizeof c, "lkey-%s", names[i]);
        pair(&a, &b, i == 5 ? IBV_QPT_UD : IBV_QPT_RC, 64, 2, 2, 12);
        struct ibv_ah *ah = NULL;
        if (i == 5) {
            struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1,
                                     .grh = {.dgid = gid, .sgid_index = gid_index, .hop_limit = 64}};
            ah = ibv_create_ah(pd, &aa);
        }
        struct ibv_mr *other = NULL;
        post_recv(&b, 9, 0, 256, i == 4 ? b.mr->lkey ^ 0x00ffff00 : b.mr->lkey);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r;
        switch (i) {
        case 0: case 5:
            r = post(&a, 1, IBV_WR_SEND, 0, 64, a.mr->lkey ^ 0x00ffff00, &b, ah, QKEY);
            break;
        case 1:
            r = post(&a, 1, IBV_WR_SEND, BUF_BYTES - 16, 64, a.mr->lkey, &b, NULL, 0);
            break;
        case 2:
            other = ibv_reg_mr(pd2, a.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
            r = post(&a, 1, IBV_WR_SEND, 0, 64, other->lkey, &b, NULL, 0);
            break;
        case 3:
            other = ibv_reg_mr(pd, a.buf + 8192, 4096, IBV_ACCESS_REMOTE_READ);
            {
                struct ibv_sge sge = {.addr = (uintptr_t)a.buf + 8192, .length = 64, .lkey = other->lkey};
                struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                                         .send_flags = IBV_SEND_SIGNALED}, *bad;
                wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
                wr.wr.rdma.rkey = b.mr->rkey;
                r = ibv_post_send(a.qp, &wr, &bad);
            }
            break;
        default:
            r = post(&a, 1, IBV_WR_SEND, 0, 64, a.mr->lkey, &b, NULL, 0);
            break;
        }
        printf("%s: post_send = %s\n", c, r ? err_name(r) : "accepted");
        if (i != 3 && i != 4 && i != 5) {
            post(&a, 2, IBV_WR_SEND, 0, 8, a.mr->lkey, &b, NULL, 0);
        }
        drain(c, "sender", a.scq, (i == 3 || i == 4 || i == 5) ? 1 : 2, 2000);
        drain(c, "receiver", b.rcq, 1, 500);
        events(c, &a, &b, 100);
        print_state(c, "sender", a.qp);
        print_state(c, "receiver", b.qp);
        if (ah) {
            ibv_destroy_ah(ah);
        }
        teardown(&a);
        teardown(&b);
        if (other) {
            ibv_dereg_mr(other);
        }
    }
    ibv_dealloc_pd(pd2);
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "d:g:")) != -1) {
        if (opt == 'd') {
            dev_name = optarg;
        } else if (opt == 'g') {
            gid_index = atoi(optarg);
        } else {
            fprintf(stderr, "usage: rxe_probe [-d dev] [-g gid-index] CASE\n");
            return 2;
        }
    }
    const char *what = optind < argc ? argv[optind] : "all";
    setvbuf(stdout, NULL, _IOLBF, 0);
    open_device();
    int all = strcmp(what, "all") == 0;
    if (all || !strcmp(what, "cqovf")) {
        case_cqovf("cqovf", 2, 5000);
    }
    if (all || !strcmp(what, "cqovf7")) {
        case_cqovf("cqovf7", 7, 3000);
    }
    if (all || !strcmp(what, "sendlong")) {
        case_sendlong(IBV_QPT_RC);
        case_sendlong(IBV_QPT_UC);
        case_sendlong(IBV_QPT_UD);
    }
    if (all || !strcmp(what, "qkey")) {
        case_qkey();
    }
    if (all || !strcmp(what, "postchk")) {
        case_postchk();
    }
    if (all || !strcmp(what, "modify")) {
        case_modify();
    }
    if (all || !strcmp(what, "rdatomic")) {
        case_rd129(128);
        case_rd129(129);
        case_rd129(255);
    }
    if (all || !strcmp(what, "retry8")) {
        case_retry(6, 3000);
        case_retry(7, 3000);
        case_retry(8, 3000);
    }
    if (all || !strcmp(what, "rnr32")) {
        case_rnr(1);
        case_rnr(31);
        case_rnr(32);
    }
    if (all || !strcmp(what, "lkey")) {
        case_lkey();
    }
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
