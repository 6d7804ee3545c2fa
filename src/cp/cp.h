/* cp.h: what the files of src/cp/ share: errors, the plan, the zigzag shard
 * geometry, the op list of a prefill run, and the two tables a backend fills:
 * the math on the compute stream (host.c, kernels.cu) and the transport with
 * its ordering (mpi.c, nccl.c). No MPI or NCCL type appears here. */
#ifndef ANYATTN_CP_INTERNAL_H
#define ANYATTN_CP_INTERNAL_H

#include <limits.h>
#include <stdint.h>

#include "anyattn_cp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CP_HIDDEN __attribute__((visibility("hidden")))

enum {
  CP_PAGE = 64,         /* tokens per page of the K/V buffers (a TMA box on sm_90: docs/design/context-parallel.md) */
  CP_MAX_SEQS = 256,    /* sequences per run */
  CP_MAX_WORLD = 65536, /* ranks */
  CP_NO_CUT = INT_MAX   /* a view or route with one segment */
};

/* ---- errors ---------------------------------------------------------- */
CP_HIDDEN anyattn_status cp_error(anyattn_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
CP_HIDDEN void cp_clear_error(void);
CP_HIDDEN void cp_restore_error(const char *saved); /* a message taken from anyattn_cp_last_error() */
/* cp_error with anyattn_last_error()'s message appended (a libanyattn call failed). */
CP_HIDDEN anyattn_status cp_lib_error(anyattn_status status, const char *what);

#define CP_CHECK(cond, status, ...)                      \
  do {                                                   \
    if (!(cond)) return cp_error((status), __VA_ARGS__); \
  } while (0)
#define CP_CHECK_NOT_NULL(ptr, what) CP_CHECK((ptr) != NULL, ANYATTN_STATUS_NULL_POINTER, "%s is NULL", (what))
#define CP_TRY(expr)                                         \
  do {                                                       \
    anyattn_status cp_try_s_ = (expr);                       \
    if (cp_try_s_ != ANYATTN_STATUS_OK) return cp_try_s_;    \
  } while (0)

/* a * b into *out, 0 on overflow of size_t. */
static inline int cp_mul(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int cp_add(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline size_t cp_align(size_t x) { return (x + 255) & ~(size_t)255; }

/* ---- geometry -------------------------------------------------------- */
/* Chunk c of a sequence of len tokens over world ranks: [start, start + n). */
static inline void cp_chunk_of(int len, int world, int c, int *start, int *n) {
  const int parts = 2 * world, base = len / parts, rem = len % parts;
  *n = base + (c < rem);
  *start = c * base + (c < rem ? c : rem);
}

/* The shard of source rank `src` for one batch: per sequence t its front
 * chunk (src) and back chunk (2 world - 1 - src), where they sit in that
 * rank's rows (the caller's layout), and the pages of its block in a K/V
 * buffer (front then back, each from a page boundary, blocks back to back):
 * the front's pages start at page0, the back's cp_front_pages later. */
typedef struct {
  int n;
  int32_t *front, *back;     /* [n] tokens */
  int32_t *urow_f, *urow_b;  /* [n] row of the first token in the rank's own rows */
  int32_t *page0, *pages;    /* [n] the block's first logical page and its pages */
  int total_pages, rows;
} cp_shard;

/* Pages of a front chunk of f tokens: the back chunk starts on the next page. */
static inline int cp_front_pages(int f) { return (f + CP_PAGE - 1) / CP_PAGE; }

/* A shard's logical page lp lies at buffer page lp < c0 ? b0 + lp : b1 + (lp - c0). */
typedef struct {
  int c0, b0, b1;
} cp_view;

/* What one transfer moves, computed alike by sender and receiver: logical
 * pages [p0, p1) of `shard`'s source rank; the sender reads the caller's rows
 * (src_user, its own shard: real tokens only) or a buffer view cut at
 * src_c0; the receiver's view is cut at dst_c0. */
typedef struct {
  int shard, src_user, src_c0, dst_c0, p0, p1;
} cp_route;

/* A contiguous run of `rows` tokens: logical token `lt` of the shard, and
 * the row of the sender's own rows when the source is the caller's. */
typedef struct {
  int64_t lt, urow, rows;
} cp_piece;

/* ---- the op list of a prefill run ---------------------------------------- */
typedef enum { CP_OP_PACK, CP_OP_XFER, CP_OP_STEP } cp_op_kind;

typedef struct {
  cp_op_kind kind;
  int level;          /* XFER: 0 ring or intra-node, 1 inter-node; else -1 (compute stream) */
  int step;           /* the attention step it belongs to */
  int ndeps, deps[4]; /* earlier ops it waits for */
  /* PACK, STEP: the shard at hand and where it lies */
  int src;
  cp_view view;
  /* XFER: peers are ranks of the level's communicator; -1: no send / no receive */
  int send_peer, recv_peer;
  cp_route send, recv;
  cp_view send_view, recv_view; /* this rank's side of each (send_view unused when send.src_user) */
  int first_req, num_req;       /* transport bookkeeping (MPI requests) */
} cp_op;

/* One message of an XFER: rows of K or V rows (row = num_kv_heads x head_dim elements). */
typedef struct {
  int send, peer;
  void *ptr;
  int64_t rows;
} cp_msg;

/* ---- objects ------------------------------------------------------------------ */
typedef struct cp_math cp_math;
typedef struct cp_transport cp_transport;

struct anyattn_cp_comm_s {
  anyattn_backend backend;  /* CPU (MPI) or CUDA (NCCL) */
  const cp_transport *tr;
  int rank, size, ranks_per_node, device;
  void *impl;               /* the transport's communicators and streams */
};

/* Everything sizes and the workspace layout follow from (anyattn_cp_plan_info too). */
typedef struct {
  anyattn_cp_mode mode;
  int world, rank, R, G, node, local; /* schedule geometry: RING has R = world, G = 1 */
  int rows_max;       /* prefill: local rows; decode: limits.max_tokens */
  int buf_pages;      /* pages of one shard buffer */
  int spare_pages;    /* pages of one TWO_LEVEL spare */
  int stride;         /* block-table row: pages of the longest sequence block */
  int max_inner;      /* sequences of one sub-plan call */
  size_t es, kv_row_bytes, page_bytes;
  size_t off_k, off_v, off_acc, off_lse_acc, off_lse_step, off_meta, off_table, off_inner;
  size_t off_send, off_recv; /* decode */
  size_t inner_bytes, kv_bytes, spare_bytes, acc_bytes, meta_bytes, total;
  int prefetch_percent;
} cp_sizes;

struct anyattn_cp_plan_s {
  anyattn_cp_comm *comm;
  const cp_math *math;
  anyattn_context *ctx;
  anyattn_problem problem; /* config not kept */
  anyattn_limits limits;
  anyattn_cp_options options;
  cp_sizes z;
  anyattn_plan *causal_plan, *full_plan; /* sub-plans (causal one NULL when the problem is not causal) */
  /* host scratch of a run (a plan serves one run at a time) */
  int max_ops, max_pieces;
  cp_op *ops;
  cp_piece *pieces;
  cp_msg *msgs;
  int32_t *ints;       /* a shard's arrays (6 x CP_MAX_SEQS), then a call's metadata */
  void *tstate;        /* the transport's per-plan state (events, requests) */
  char describe[256];
};

/* ---- layout.c ---------------------------------------------------------------- */
/* Fills sh (arrays in `mem`, 6 * n ints) for source rank src of `world`. */
CP_HIDDEN void cp_shard_make(cp_shard *sh, int32_t *mem, int world, int src, int n, const int32_t *lens);
CP_HIDDEN int cp_shard_pages(int world, int src, int n, const int32_t *lens);
/* The pieces of a route over shard sh, identical on both sides; returns their count. */
CP_HIDDEN int cp_pieces(const cp_shard *sh, const cp_route *rt, cp_piece *out, int max);
static inline int64_t cp_view_token(const cp_view *v, int64_t lt) {
  const int64_t lp = lt / CP_PAGE, r = lt % CP_PAGE;
  return (lp < v->c0 ? v->b0 + lp : v->b1 + (lp - v->c0)) * CP_PAGE + r;
}

/* The mask of a problem: causal, window_left, window_right (-1: unbounded;
 * window_right ignored when causal). */
typedef struct {
  int causal, wl, wr;
} cp_mask;

/* One "sequence" of a sub-plan call: a query chunk of the local shard against
 * one key chunk of the shard at hand, q_pos placing the queries at their true
 * distance from the keys (batch->q_pos). page0: the key chunk's first logical
 * page in the shard's block; seq, qstart, kstart: the sequence and the chunks'
 * first tokens in it. */
typedef struct {
  int32_t q_len, kv_len, q_pos, page0, seq, qstart, kstart;
} cp_entry;

/* One sub-plan call of a step: rows [row0, row0 + rows) of the local shard,
 * entries [e0, e0 + ne) of the step; init: the first call on these rows of
 * the run (its partial starts the merge). */
typedef struct {
  int init, row0, rows, e0, ne;
} cp_call;
/* The entries and calls of a step (rank `rank` attends to shard `src` of a
 * batch of n sequences of lens over world ranks): a pass over the shard's
 * front chunks, then one over its back chunks, each taking per sequence the
 * front rows then per sequence the back rows that see some key of the chunk
 * under the mask; rows without work end a call. The own shard's front pass
 * keeps every row (its call starts the merge). ent has room for 4 n entries,
 * calls for 4 n calls. Returns the number of calls. */
CP_HIDDEN int cp_step_calls(const cp_shard *mine, const cp_shard *theirs, int rank, int src, int world,
                            const int32_t *lens, cp_mask mask, cp_entry *ent, cp_call *calls);

/* ---- schedule.c ---------------------------------------------------------------- */
/* The op list of one prefill run on this rank, in issue order; returns the count. */
CP_HIDDEN int cp_schedule(const anyattn_cp_plan *plan, int n, const int32_t *lens, cp_op *ops);

/* ---- plan.c ---------------------------------------------------------------------- */
CP_HIDDEN anyattn_status cp_check_problem(anyattn_context *ctx, const anyattn_problem *pr, const anyattn_limits *lim,
                                          const anyattn_cp_options *opt);
/* Sizes and workspace layout; inner_bytes is the sub-plans' workspace. */
CP_HIDDEN anyattn_status cp_size(cp_sizes *z, const anyattn_problem *pr, const anyattn_limits *lim,
                                 const anyattn_cp_options *opt, int world, int rpn, int rank, size_t inner_bytes);
/* Fills info (its struct_size kept) from a plan's sizes. */
CP_HIDDEN anyattn_status cp_info_of(const cp_sizes *z, anyattn_cp_plan_info *info);
/* The sub-plans of a problem: causal (NULL when not causal) and full. */
CP_HIDDEN anyattn_status cp_subplans(anyattn_context *ctx, const anyattn_problem *pr, const anyattn_limits *lim,
                                     const anyattn_cp_options *opt, int world, anyattn_plan **causal,
                                     anyattn_plan **full);

/* ---- exec.c ------------------------------------------------------------------------ */
typedef struct {
  const anyattn_cp_plan *plan;
  void *stream;
  char *ws;
  const anyattn_cp_tensors *t;
  int n;
  const int32_t *lens;
  int nops;
} cp_run;
CP_HIDDEN anyattn_status cp_exec_prefill(cp_run *run);
CP_HIDDEN anyattn_status cp_exec_decode(const anyattn_cp_plan *plan, const anyattn_batch *b, const anyattn_tensors *t,
                                        int holds_new_keys, char *ws, void *stream);

/* ---- the math of a backend, on the compute stream -------------------------------------- */
typedef struct {
  int rows, hq, d;
  anyattn_dtype dtype;
  const void *out;      /* [rows, hq, d] this step's partial, problem dtype */
  const float *lse;     /* [rows, hq] its LSE */
  float *acc, *acc_lse; /* [rows, hq, d], [rows, hq] the running merge */
  int init;             /* 1: the first partial of these rows */
} cp_merge_args;

typedef struct {
  int rows, hq, d;
  anyattn_dtype dtype;
  const float *acc, *acc_lse;
  const float *sinks; /* [hq] or NULL: enters the denominator once */
  void *out;
  float *lse;         /* or NULL */
} cp_finish_args;

typedef struct {
  int rows, hq, d, ranks;
  anyattn_dtype dtype;
  const void *out; const float *lse; /* local partial (pack) */
  float *part;                       /* [rows, hq, d + 1] fp32 partial with its LSE last */
  const float *gathered;             /* [ranks][rows, hq, d + 1] (merge) */
  const float *sinks;
  void *final_out;
  float *final_lse;
  const int32_t *cu_end; /* cu_seqlens_q[num_seqs] (backend memory): rows from it on are padding, left alone */
} cp_decode_args;

struct cp_math {
  anyattn_status (*copy)(void *dst, const void *src, size_t bytes, void *stream);
  /* host ints (n of them) into backend memory; then the block table of a call:
   * table[i][p] = view(page0_of_entry_i + p), p < stride, for i < ne, with
   * page0 per entry read from dev_page0 (already written). */
  anyattn_status (*write_ints)(int32_t *dst, const int32_t *src, int n, void *stream);
  anyattn_status (*fill_table)(int32_t *table, const int32_t *dev_page0, int ne, int stride, cp_view v, void *stream);
  anyattn_status (*merge)(const cp_merge_args *a, void *stream);
  anyattn_status (*finish)(const cp_finish_args *a, void *stream);
  anyattn_status (*decode_pack)(const cp_decode_args *a, void *stream);
  anyattn_status (*decode_merge)(const cp_decode_args *a, void *stream);
};
CP_HIDDEN const cp_math *cp_host_math(void);
CP_HIDDEN const cp_math *cp_cuda_math(void); /* NCCL builds */

/* ---- transport and ordering --------------------------------------------------------------- */
struct cp_transport {
  /* MPI: allreduce-min/max check that every rank passed v[0..n) (plan creation); NCCL: OK. */
  anyattn_status (*check_same)(anyattn_cp_comm *c, const int64_t *v, int n, int *first_diff);
  anyattn_status (*plan_init)(anyattn_cp_plan *p); /* events, requests */
  void (*plan_free)(anyattn_cp_plan *p);
  anyattn_status (*begin)(cp_run *r);                /* GPU: comm streams wait for the caller's */
  anyattn_status (*wait)(cp_run *r, int op, int dep); /* op may not start before dep ends */
  anyattn_status (*post)(cp_run *r, int op, const cp_msg *m, int nm);
  anyattn_status (*record)(cp_run *r, int op);
  anyattn_status (*end)(cp_run *r);                  /* every op done before the caller's stream goes on */
  /* decode: every rank's `count` partial rows of hq x (d + 1) floats into recv, rank order */
  anyattn_status (*allgather)(const anyattn_cp_plan *p, const float *send, float *recv, int count, void *stream);
  void (*free)(anyattn_cp_comm *c);
};
CP_HIDDEN const cp_transport *cp_mpi_transport(void);  /* ANYATTN_CP_WITH_MPI builds */
CP_HIDDEN const cp_transport *cp_nccl_transport(void); /* ANYATTN_CP_WITH_NCCL builds */
CP_HIDDEN anyattn_status cp_mpi_comm_create(const void *mpi_comm, int rpn, anyattn_cp_comm *c);
CP_HIDDEN anyattn_status cp_nccl_comm_create(void *nccl_comm, int rpn, anyattn_cp_comm *c);

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_CP_INTERNAL_H */
