/* plan.c: context-parallel plans. The checks of a problem, the sizes and
 * workspace layout (every product overflow-checked), the sub-plans of
 * libanyattn that compute each local step, and the public plan calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"

void anyattn_cp_options_init(anyattn_cp_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->mode = ANYATTN_CP_RING;
  o->prefetch_percent = -1;
}

anyattn_status cp_check_problem(anyattn_context *ctx, const anyattn_problem *pr, const anyattn_limits *lim,
                                const anyattn_cp_options *opt) {
  CP_CHECK(pr->struct_size == sizeof *pr, ANYATTN_STATUS_STRUCT_SIZE,
           "problem->struct_size is %zu, this library expects %zu (use anyattn_problem_init)", pr->struct_size,
           sizeof *pr);
  CP_CHECK(lim->struct_size == sizeof *lim, ANYATTN_STATUS_STRUCT_SIZE,
           "limits->struct_size is %zu, this library expects %zu (use anyattn_limits_init)", lim->struct_size,
           sizeof *lim);
  CP_CHECK(opt->struct_size == sizeof *opt, ANYATTN_STATUS_STRUCT_SIZE,
           "options->struct_size is %zu, this library expects %zu (use anyattn_cp_options_init)", opt->struct_size,
           sizeof *opt);
  CP_CHECK(opt->mode >= ANYATTN_CP_RING && opt->mode <= ANYATTN_CP_DECODE, ANYATTN_STATUS_INVALID_OPTION,
           "options->mode is %d, not RING (0), TWO_LEVEL (1) or DECODE (2)", (int)opt->mode);
  CP_CHECK(opt->prefetch_percent >= -1 && opt->prefetch_percent <= 100, ANYATTN_STATUS_INVALID_OPTION,
           "options->prefetch_percent is %d, must be -1 (default) or 0..100", opt->prefetch_percent);
  const anyattn_backend be = anyattn_context_backend(ctx);
  CP_CHECK(be == ANYATTN_BACKEND_CPU || be == ANYATTN_BACKEND_CUDA, ANYATTN_STATUS_BACKEND_UNAVAILABLE,
           "ctx is a %s context: context parallelism runs on the cpu (MPI) and cuda (NCCL) backends",
           anyattn_backend_name(be));
  CP_CHECK(lim->max_seqs > 0 && lim->max_tokens > 0 && lim->max_context > 0, ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_seqs %d, max_tokens %d, max_context %d: each must be > 0", lim->max_seqs, lim->max_tokens,
           lim->max_context);
  const int decode = opt->mode == ANYATTN_CP_DECODE;
  CP_CHECK(decode || lim->max_seqs <= CP_MAX_SEQS, ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_seqs is %d, context-parallel prefill takes at most %d sequences per run", lim->max_seqs,
           CP_MAX_SEQS);
  CP_CHECK(decode || lim->max_context <= (1 << 29), ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_context is %d, at most 2^29", lim->max_context);
  /* Windows need no check here: every step's call places its queries at their
   * true distance from the keys (batch->q_pos), so the sub-plans mask as one
   * device would; anyattn_plan_create checks their values. */
  /* The ring and the all-gather move K/V pages sized by problem->dtype. */
  CP_CHECK(pr->kv_dtype == ANYATTN_KV_AS_Q, ANYATTN_STATUS_UNSUPPORTED_OPTION,
           "problem->kv_dtype is %s: context parallelism takes caches of the problem's dtype only (set AS_Q)",
           anyattn_kv_dtype_name(pr->kv_dtype));
  return ANYATTN_STATUS_OK;
}

#define CP_SIZE(expr)                                                                                   \
  do {                                                                                                  \
    if (!(expr))                                                                                        \
      return cp_error(ANYATTN_STATUS_INVALID_SIZE, "the workspace of these limits overflows size_t (%s)", \
                      #expr);                                                                           \
  } while (0)

/* Bytes a x b x c x d, overflow-checked into *out. */
static int cp_bytes4(size_t a, size_t b, size_t c, size_t d, size_t *out) {
  size_t ab, abc;
  return cp_mul(a, b, &ab) && cp_mul(ab, c, &abc) && cp_mul(abc, d, out);
}

/* Places `bytes` at *off (256-aligned) and advances it. */
static int cp_place(size_t *off, size_t bytes, size_t *at) {
  *at = *off;
  return cp_add(*off, cp_align(bytes), off) && cp_align(bytes) >= bytes;
}

static anyattn_status cp_size_prefill(cp_sizes *z, const anyattn_problem *pr, const anyattn_limits *lim,
                                      const anyattn_cp_options *opt) {
  const int64_t N = z->world, S = lim->max_seqs, T = lim->max_tokens, C = lim->max_context;
  const int64_t chunk = (C + 2 * N - 1) / (2 * N), blk = 2 * chunk; /* tokens of the longest chunk, block */
  int64_t rows = S * blk, by_tokens = (T + N - 1) / N + 2 * S;
  if (by_tokens < rows) rows = by_tokens;
  if (T < rows) rows = T;
  z->rows_max = (int)rows; /* <= T <= INT32_MAX */
  /* a call's entry reads one chunk; a sequence's block is two chunks, each from a page boundary */
  z->stride = (int)((chunk + CP_PAGE - 1) / CP_PAGE);
  int64_t pages = (rows + CP_PAGE - 1) / CP_PAGE + 2 * S;
  if (2 * S * z->stride < pages) pages = 2 * S * z->stride;
  z->buf_pages = (int)pages;
  z->max_inner = (int)(2 * S);
  const size_t hq = (size_t)pr->num_q_heads, d = (size_t)pr->head_dim;
  size_t pool, acc, lse, meta, table;
  CP_SIZE(cp_bytes4((size_t)z->buf_pages, z->page_bytes, 1, 1, &pool));
  CP_SIZE(cp_bytes4((size_t)rows, hq, d, 4, &acc));
  CP_SIZE(cp_bytes4((size_t)rows, hq, 4, 1, &lse));
  meta = (size_t)(8 * S + 1) * 4; /* a call's cu_seqlens_q, seq_lens_k, first pages, q_pos for 2 S entries */
  CP_SIZE(cp_bytes4((size_t)(2 * S), (size_t)z->stride, 4, 1, &table));
  /* TWO_LEVEL spares: the share given, or the most that keeps the extra
   * within 5% of RING's (two spares, each for K and V). */
  z->spare_pages = 0;
  if (z->mode == ANYATTN_CP_TWO_LEVEL && z->R > 1 && z->G > 1) {
    if (opt->prefetch_percent >= 0) {
      z->spare_pages = (int)(((int64_t)opt->prefetch_percent * pages + 99) / 100);
    } else {
      const double ring = 4.0 * (double)pool + (double)acc + 2.0 * (double)lse + (double)meta + (double)table;
      const double spare = floor(0.05 * ring / (4.0 * (double)z->page_bytes));
      z->spare_pages = spare < (double)pages ? (int)spare : (int)pages;
    }
    z->prefetch_percent = (int)((int64_t)z->spare_pages * 100 / pages);
  }
  CP_SIZE((int64_t)2 * z->buf_pages + 2 * (int64_t)z->spare_pages <= INT32_MAX / CP_PAGE);
  size_t one, off = 0;
  CP_SIZE(cp_bytes4((size_t)(2 * z->buf_pages + 2 * z->spare_pages), z->page_bytes, 1, 1, &one));
  z->kv_bytes = 2 * cp_align(one);
  z->spare_bytes = 2 * (size_t)2 * z->spare_pages * z->page_bytes;
  z->acc_bytes = cp_align(acc) + 2 * cp_align(lse);
  z->meta_bytes = cp_align(meta) + cp_align(table);
  CP_SIZE(cp_place(&off, one, &z->off_k) && cp_place(&off, one, &z->off_v) && cp_place(&off, acc, &z->off_acc) &&
          cp_place(&off, lse, &z->off_lse_acc) && cp_place(&off, lse, &z->off_lse_step) &&
          cp_place(&off, meta, &z->off_meta) && cp_place(&off, table, &z->off_table) &&
          cp_place(&off, z->inner_bytes, &z->off_inner));
  z->total = off;
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_size_decode(cp_sizes *z, const anyattn_problem *pr, const anyattn_limits *lim) {
  const size_t T = (size_t)lim->max_tokens, hq = (size_t)pr->num_q_heads, d1 = (size_t)pr->head_dim + 1;
  size_t part, recv, lse, off = 0;
  z->rows_max = lim->max_tokens;
  CP_SIZE(cp_bytes4(T, hq, d1, 4, &part) && cp_mul(part, (size_t)z->world, &recv));
  CP_SIZE(cp_bytes4(T, hq, 4, 1, &lse));
  CP_SIZE((int64_t)hq * (int64_t)d1 <= INT32_MAX); /* one all-gather row */
  z->acc_bytes = cp_align(part) + cp_align(recv) + cp_align(lse);
  CP_SIZE(cp_place(&off, part, &z->off_send) && cp_place(&off, recv, &z->off_recv) &&
          cp_place(&off, lse, &z->off_lse_step) && cp_place(&off, z->inner_bytes, &z->off_inner));
  z->total = off;
  return ANYATTN_STATUS_OK;
}

anyattn_status cp_size(cp_sizes *z, const anyattn_problem *pr, const anyattn_limits *lim,
                       const anyattn_cp_options *opt, int world, int rpn, int rank, size_t inner_bytes) {
  memset(z, 0, sizeof *z);
  CP_CHECK(world >= 1 && world <= CP_MAX_WORLD, ANYATTN_STATUS_INVALID_SIZE,
           "the communicator has %d ranks, context parallelism takes 1..%d", world, CP_MAX_WORLD);
  CP_CHECK(rank >= 0 && rank < world, ANYATTN_STATUS_INVALID_SIZE, "rank %d is outside 0..%d", rank, world - 1);
  CP_CHECK(rpn >= 0 && (rpn == 0 || world % rpn == 0), ANYATTN_STATUS_INVALID_SIZE,
           "ranks_per_node is %d: must be 0 (one node) or a divisor of the %d ranks", rpn, world);
  z->mode = opt->mode;
  z->world = world;
  z->rank = rank;
  z->R = opt->mode == ANYATTN_CP_TWO_LEVEL && rpn > 0 ? rpn : world;
  z->G = world / z->R;
  z->node = rank / z->R;
  z->local = rank % z->R;
  z->es = anyattn_dtype_size(pr->dtype);
  z->kv_row_bytes = (size_t)pr->num_kv_heads * (size_t)pr->head_dim * z->es;
  CP_SIZE(cp_bytes4(z->kv_row_bytes, CP_PAGE, 1, 1, &z->page_bytes));
  z->inner_bytes = inner_bytes;
  return opt->mode == ANYATTN_CP_DECODE ? cp_size_decode(z, pr, lim) : cp_size_prefill(z, pr, lim, opt);
}

anyattn_status cp_subplans(anyattn_context *ctx, const anyattn_problem *pr, const anyattn_limits *lim,
                           const anyattn_cp_options *opt, int world, anyattn_plan **causal, anyattn_plan **full) {
  *causal = *full = NULL;
  anyattn_problem p = *pr;
  anyattn_limits l = *lim;
  if (opt->mode != ANYATTN_CP_DECODE) {
    cp_sizes z;
    CP_TRY(cp_size(&z, pr, lim, opt, world, 0, 0, 0));
    const int64_t blk = 2 * (((int64_t)lim->max_context + 2 * world - 1) / (2 * world));
    p.block_size = CP_PAGE;
    l.max_seqs = 2 * lim->max_seqs;
    l.max_tokens = z.rows_max;
    l.max_context = (int)blk;
  }
  anyattn_status s = pr->causal ? anyattn_plan_create(ctx, &p, &l, causal) : ANYATTN_STATUS_OK;
  if (s != ANYATTN_STATUS_OK) return cp_lib_error(s, "the causal sub-plan");
  p.causal = 0;
  s = anyattn_plan_create(ctx, &p, &l, full);
  if (s != ANYATTN_STATUS_OK) {
    anyattn_plan_free(*causal);
    *causal = NULL;
    return cp_lib_error(s, "the full sub-plan");
  }
  return ANYATTN_STATUS_OK;
}

static size_t cp_max(size_t a, size_t b) { return a > b ? a : b; }

anyattn_status cp_info_of(const cp_sizes *z, anyattn_cp_plan_info *info) {
  const size_t keep = info->struct_size;
  memset(info, 0, sizeof *info);
  info->struct_size = keep;
  info->mode = z->mode;
  info->world_size = z->world;
  info->rank = z->rank;
  info->nodes = z->mode == ANYATTN_CP_TWO_LEVEL ? z->G : 1;
  info->ranks_per_node = z->mode == ANYATTN_CP_TWO_LEVEL ? z->R : z->world;
  info->steps = z->mode == ANYATTN_CP_DECODE ? 1 : z->world;
  info->prefetch_percent = z->prefetch_percent;
  info->workspace_bytes = z->total;
  info->local_bytes = z->inner_bytes;
  info->extra_bytes = z->total - z->inner_bytes;
  info->kv_bytes = z->kv_bytes;
  info->spare_bytes = z->spare_bytes;
  info->accumulator_bytes = z->acc_bytes;
  info->metadata_bytes = z->meta_bytes;
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_cp_plan_estimate(anyattn_context *ctx, const anyattn_problem *problem,
                                        const anyattn_limits *limits, const anyattn_cp_options *options,
                                        int world_size, int ranks_per_node, int rank, anyattn_cp_plan_info *info) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(ctx, "ctx");
  CP_CHECK_NOT_NULL(problem, "problem");
  CP_CHECK_NOT_NULL(limits, "limits");
  CP_CHECK_NOT_NULL(options, "options");
  CP_CHECK_NOT_NULL(info, "info");
  CP_CHECK(info->struct_size == sizeof *info, ANYATTN_STATUS_STRUCT_SIZE,
           "info->struct_size is %zu, this library expects %zu", info->struct_size, sizeof *info);
  CP_TRY(cp_check_problem(ctx, problem, limits, options));
  cp_sizes z;
  CP_TRY(cp_size(&z, problem, limits, options, world_size, ranks_per_node, rank, 0));
  anyattn_plan *c, *f;
  CP_TRY(cp_subplans(ctx, problem, limits, options, world_size, &c, &f));
  const size_t inner = cp_max(anyattn_plan_workspace_size(c), anyattn_plan_workspace_size(f));
  anyattn_plan_free(c);
  anyattn_plan_free(f);
  CP_TRY(cp_size(&z, problem, limits, options, world_size, ranks_per_node, rank, inner));
  return cp_info_of(&z, info);
}
