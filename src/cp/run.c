/* run.c: anyattn_cp_prefill and anyattn_cp_decode: every argument checked,
 * with a status and a message naming it, before any work starts (so nothing
 * is written on error); then exec.c. */
#include <stdint.h>
#include <string.h>

#include "cp.h"

static int cp_aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

static anyattn_status cp_check_workspace(const anyattn_cp_plan *p, const void *ws, size_t ws_size) {
  CP_CHECK(ws_size >= p->z.total, ANYATTN_STATUS_WORKSPACE_TOO_SMALL,
           "workspace_size is %zu bytes, the plan needs %zu (anyattn_cp_plan_workspace_size)", ws_size, p->z.total);
  CP_CHECK(p->z.total == 0 || ws != NULL, ANYATTN_STATUS_NULL_POINTER, "workspace is NULL, the plan needs %zu bytes",
           p->z.total);
  CP_CHECK(cp_aligned(ws, 256), ANYATTN_STATUS_BAD_STRIDE, "workspace %p is not 256-byte aligned", ws);
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_cp_workspace_prepare(const anyattn_cp_plan *plan, void *workspace, size_t workspace_size,
                                            void *stream) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(plan, "plan");
  CP_TRY(cp_check_workspace(plan, workspace, workspace_size));
  /* the sub-plans share the local-attention region: of one problem (but for the causal flag)
   * and one set of limits, their workspaces have one layout, so their split-KV counters (at
   * its head) and their persistent launches' scheduler words lie at the same offsets */
  anyattn_plan *subs[2] = {plan->causal_plan, plan->full_plan};
  for (int i = 0; i < 2; i++) {
    if (!subs[i] || plan->z.inner_bytes == 0) continue;
    const anyattn_status s =
        anyattn_workspace_prepare(subs[i], (char *)workspace + plan->z.off_inner, plan->z.inner_bytes, stream);
    if (s != ANYATTN_STATUS_OK) return cp_lib_error(s, "the local attention's workspace");
  }
  return ANYATTN_STATUS_OK;
}

/* The batch of a prefill: counts within the limits; returns this rank's rows. */
static anyattn_status cp_check_lens(const anyattn_cp_plan *p, int n, const int32_t *lens, int *rows) {
  const anyattn_limits *l = &p->limits;
  *rows = 0;
  CP_CHECK(n >= 0, ANYATTN_STATUS_INVALID_SIZE, "num_seqs is %d, must be >= 0", n);
  CP_CHECK(n <= l->max_seqs, ANYATTN_STATUS_LIMIT_EXCEEDED, "num_seqs is %d, over the plan's limits.max_seqs %d", n,
           l->max_seqs);
  CP_CHECK(n == 0 || lens != NULL, ANYATTN_STATUS_NULL_POINTER, "seq_lens is NULL");
  int64_t total = 0;
  for (int s = 0; s < n; s++) {
    CP_CHECK(lens[s] >= 0, ANYATTN_STATUS_INVALID_SIZE, "seq_lens[%d] is %d, must be >= 0", s, lens[s]);
    CP_CHECK(lens[s] <= l->max_context, ANYATTN_STATUS_LIMIT_EXCEEDED,
             "seq_lens[%d] is %d, over the plan's limits.max_context %d", s, lens[s], l->max_context);
    total += lens[s];
    int start, f, b;
    cp_chunk_of(lens[s], p->z.world, p->z.rank, &start, &f);
    cp_chunk_of(lens[s], p->z.world, 2 * p->z.world - 1 - p->z.rank, &start, &b);
    *rows += f + b;
  }
  CP_CHECK(total <= l->max_tokens, ANYATTN_STATUS_LIMIT_EXCEEDED,
           "the sequences hold %lld tokens, over the plan's limits.max_tokens %d", (long long)total, l->max_tokens);
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_check_tensors(const anyattn_cp_plan *p, const anyattn_cp_tensors *t, int rows) {
  CP_CHECK(t->struct_size == sizeof *t, ANYATTN_STATUS_STRUCT_SIZE,
           "tensors->struct_size is %zu, this library expects %zu (use anyattn_cp_tensors_init)", t->struct_size,
           sizeof *t);
  if (rows == 0) return ANYATTN_STATUS_OK; /* this rank holds no token: it only passes shards on */
  CP_CHECK_NOT_NULL(t->q, "tensors->q");
  CP_CHECK_NOT_NULL(t->k, "tensors->k");
  CP_CHECK_NOT_NULL(t->v, "tensors->v");
  CP_CHECK_NOT_NULL(t->out, "tensors->out");
  const size_t es = p->z.es;
  CP_CHECK(cp_aligned(t->q, es) && cp_aligned(t->k, es) && cp_aligned(t->v, es) && cp_aligned(t->out, es),
           ANYATTN_STATUS_BAD_STRIDE, "tensors->q, k, v and out must be aligned to %zu bytes", es);
  CP_CHECK(cp_aligned(t->lse, 4) && cp_aligned(t->sinks, 4) && cp_aligned(t->alibi_slopes, 4),
           ANYATTN_STATUS_BAD_STRIDE, "tensors->lse, sinks and alibi_slopes must be 4-byte aligned");
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_cp_prefill(const anyattn_cp_plan *plan, int num_seqs, const int32_t *seq_lens,
                                  const anyattn_cp_tensors *tensors, void *workspace, size_t workspace_size,
                                  void *stream) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(plan, "plan");
  CP_CHECK_NOT_NULL(tensors, "tensors");
  CP_CHECK(plan->z.mode != ANYATTN_CP_DECODE, ANYATTN_STATUS_INVALID_OPTION,
           "the plan was made for ANYATTN_CP_DECODE: run it with anyattn_cp_decode");
  int rows;
  CP_TRY(cp_check_lens(plan, num_seqs, seq_lens, &rows));
  CP_TRY(cp_check_tensors(plan, tensors, rows));
  CP_TRY(cp_check_workspace(plan, workspace, workspace_size));
  if (num_seqs == 0) return ANYATTN_STATUS_OK;
  cp_run r;
  memset(&r, 0, sizeof r);
  r.plan = plan;
  r.stream = stream;
  r.ws = (char *)workspace;
  r.t = tensors;
  r.n = num_seqs;
  r.lens = seq_lens;
  return cp_exec_prefill(&r);
}

anyattn_status anyattn_cp_decode(const anyattn_cp_plan *plan, const anyattn_batch *batch,
                                 const anyattn_tensors *tensors, int holds_new_keys, void *workspace,
                                 size_t workspace_size, void *stream) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(plan, "plan");
  CP_CHECK_NOT_NULL(batch, "batch");
  CP_CHECK_NOT_NULL(tensors, "tensors");
  CP_CHECK(plan->z.mode == ANYATTN_CP_DECODE, ANYATTN_STATUS_INVALID_OPTION,
           "the plan was made for prefill (RING or TWO_LEVEL): run it with anyattn_cp_prefill");
  CP_CHECK(holds_new_keys == 0 || holds_new_keys == 1, ANYATTN_STATUS_INVALID_OPTION,
           "holds_new_keys is %d, must be 0 or 1", holds_new_keys);
  CP_CHECK(batch->struct_size == sizeof *batch, ANYATTN_STATUS_STRUCT_SIZE,
           "batch->struct_size is %zu, this library expects %zu (use anyattn_batch_init)", batch->struct_size,
           sizeof *batch);
  CP_CHECK(tensors->struct_size == sizeof *tensors, ANYATTN_STATUS_STRUCT_SIZE,
           "tensors->struct_size is %zu, this library expects %zu (use anyattn_tensors_init)", tensors->struct_size,
           sizeof *tensors);
  /* ALiBi and windows need each key's distance to the queries: batch->q_pos gives it */
  CP_CHECK(tensors->alibi_slopes == NULL || batch->q_pos != NULL, ANYATTN_STATUS_UNSUPPORTED_OPTION,
           "tensors->alibi_slopes is set without batch->q_pos: ALiBi needs the queries' position among this "
           "rank's keys (set batch->q_pos)");
  const anyattn_problem *pr = &plan->problem;
  CP_CHECK(batch->q_pos != NULL || (pr->window_left < 0 && (pr->causal || pr->window_right < 0)),
           ANYATTN_STATUS_UNSUPPORTED_OPTION,
           "problem has a sliding window and batch->q_pos is NULL: a window needs the queries' position among "
           "this rank's keys (set batch->q_pos)");
  /* alibi_slopes go to the local run, which checks their type and alignment; the sinks enter in
   * this library's merge, which reads fp32 */
  CP_CHECK(tensors->sinks == NULL || tensors->sinks_dtype == ANYATTN_DTYPE_F32, ANYATTN_STATUS_UNSUPPORTED_OPTION,
           "tensors->sinks_dtype is %d: context-parallel decode takes fp32 sinks (ANYATTN_DTYPE_F32)",
           (int)tensors->sinks_dtype);
  CP_CHECK(tensors->sinks == NULL || cp_aligned(tensors->sinks, 4), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->sinks is not 4-byte aligned");
  CP_CHECK(batch->num_tokens <= plan->limits.max_tokens, ANYATTN_STATUS_LIMIT_EXCEEDED,
           "batch->num_tokens is %d, over the plan's limits.max_tokens %d", batch->num_tokens,
           plan->limits.max_tokens);
  CP_TRY(cp_check_workspace(plan, workspace, workspace_size));
  /* The local run checks the rest of batch and tensors before it writes anything. */
  return cp_exec_decode(plan, batch, tensors, holds_new_keys, (char *)workspace, stream);
}
