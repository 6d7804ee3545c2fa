/* exec.c: runs a prefill op list and a decode through the backend's math and
 * transport tables. Each op waits for its dependencies (events on a GPU,
 * request completion under MPI), then packs, transfers or attends: one
 * attention step is one or two calls of a libanyattn sub-plan over the K/V
 * buffer through a block table, each followed by the fp32 LSE merge. */
#include <stdio.h>
#include <string.h>

#include "cp.h"

/* The plan's host scratch (CP_SCRATCH_INTS(S) ints, api.c): three shard
 * areas, a step's entries and calls, one call's metadata. */
typedef struct {
  int32_t *shard[3];
  cp_entry *ent;
  cp_call *calls;
  int32_t *meta;
} cp_scratch;

static cp_scratch cp_scratch_of(const anyattn_cp_plan *p) {
  const int S = p->limits.max_seqs;
  cp_scratch s;
  for (int i = 0; i < 3; i++) s.shard[i] = p->ints + (size_t)i * 6 * S;
  s.ent = (cp_entry *)(void *)(p->ints + (size_t)18 * S);  /* 4 S entries of int32 fields */
  s.calls = (cp_call *)(void *)(s.ent + 4 * (size_t)S);    /* 4 S calls */
  s.meta = (int32_t *)(void *)(s.calls + 4 * (size_t)S);   /* 8 S + 1 */
  return s;
}

static char *cp_pool(const cp_run *r, int v) { return r->ws + (v ? r->plan->z.off_v : r->plan->z.off_k); }

static anyattn_status cp_do_pack(cp_run *r, const cp_op *op) {
  const anyattn_cp_plan *p = r->plan;
  const size_t rb = p->z.kv_row_bytes;
  cp_scratch sc = cp_scratch_of(p);
  cp_shard mine;
  cp_shard_make(&mine, sc.shard[0], p->z.world, p->z.rank, r->n, r->lens);
  const int np = cp_pieces(&mine, &op->send, p->pieces, p->max_pieces);
  CP_CHECK(np <= p->max_pieces, ANYATTN_STATUS_INVALID_SIZE, "internal: %d pieces over %d", np, p->max_pieces);
  for (int i = 0; i < np; i++) {
    const cp_piece *pc = &p->pieces[i];
    const size_t dst = (size_t)cp_view_token(&op->view, pc->lt) * rb, src = (size_t)pc->urow * rb;
    CP_TRY(p->math->copy(cp_pool(r, 0) + dst, (const char *)r->t->k + src, (size_t)pc->rows * rb, r->stream));
    CP_TRY(p->math->copy(cp_pool(r, 1) + dst, (const char *)r->t->v + src, (size_t)pc->rows * rb, r->stream));
  }
  return ANYATTN_STATUS_OK;
}

/* The K and V messages of one side of a transfer, appended to m. */
static int cp_side(cp_run *r, const cp_route *rt, const cp_view *view, int send, int peer, int32_t *mem,
                   cp_msg *m, int nm) {
  const anyattn_cp_plan *p = r->plan;
  const size_t rb = p->z.kv_row_bytes;
  cp_shard sh;
  cp_shard_make(&sh, mem, p->z.world, rt->shard, r->n, r->lens);
  const int np = cp_pieces(&sh, rt, p->pieces, p->max_pieces);
  if (np > p->max_pieces) return -1;
  for (int i = 0; i < np; i++) {
    const cp_piece *pc = &p->pieces[i];
    for (int v = 0; v < 2; v++) {
      char *at;
      if (send && rt->src_user) at = (char *)(v ? r->t->v : r->t->k) + (size_t)pc->urow * rb;
      else at = cp_pool(r, v) + (size_t)cp_view_token(view, pc->lt) * rb;
      m[nm].send = send;
      m[nm].peer = peer;
      m[nm].ptr = at;
      m[nm].rows = pc->rows;
      nm++;
    }
  }
  return nm;
}

static anyattn_status cp_do_xfer(cp_run *r, int i) {
  const anyattn_cp_plan *p = r->plan;
  const cp_op *op = &p->ops[i];
  cp_scratch sc = cp_scratch_of(p);
  int nm = 0;
  if (op->send_peer >= 0) nm = cp_side(r, &op->send, &op->send_view, 1, op->send_peer, sc.shard[1], p->msgs, nm);
  if (nm >= 0 && op->recv_peer >= 0)
    nm = cp_side(r, &op->recv, &op->recv_view, 0, op->recv_peer, sc.shard[2], p->msgs, nm);
  CP_CHECK(nm >= 0, ANYATTN_STATUS_INVALID_SIZE, "internal: a transfer cuts into more than %d pieces", p->max_pieces);
  return p->comm->tr->post(r, i, p->msgs, nm);
}

/* One sub-plan call of a step, then the merge of its rows. */
static anyattn_status cp_do_call(cp_run *r, const cp_op *op, const cp_call *c, const cp_scratch *sc) {
  const anyattn_cp_plan *p = r->plan;
  const cp_sizes *z = &p->z;
  const int ne = c->ne, hq = p->problem.num_q_heads, d = p->problem.head_dim;
  int32_t *host = sc->meta;
  int max_q = 0, max_kv = 0;
  int64_t sum_kv = 0;
  host[0] = 0;
  /* cu_seqlens_q [ne + 1], seq_lens_k [ne], the key chunks' first pages [ne], q_pos [ne] */
  for (int j = 0; j < ne; j++) {
    const cp_entry *e = &sc->ent[c->e0 + j];
    host[j + 1] = host[j] + e->q_len;
    host[ne + 1 + j] = e->kv_len;
    host[2 * ne + 1 + j] = e->page0;
    host[3 * ne + 1 + j] = e->q_pos;
    if (e->q_len > max_q) max_q = e->q_len;
    if (e->kv_len > max_kv) max_kv = e->kv_len;
    sum_kv += e->kv_len;
  }
  int32_t *meta = (int32_t *)(void *)(r->ws + z->off_meta), *table = (int32_t *)(void *)(r->ws + z->off_table);
  CP_TRY(p->math->write_ints(meta, host, 4 * ne + 1, r->stream));
  CP_TRY(p->math->fill_table(table, meta + 2 * ne + 1, ne, z->stride, op->view, r->stream));

  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = ne;
  b.num_tokens = c->rows;
  b.cu_seqlens_q = meta;
  b.seq_lens_k = meta + ne + 1;
  b.block_table = table;
  b.block_table_stride = z->stride;
  b.q_pos = meta + 3 * ne + 1;
  b.max_q_len = max_q;
  b.max_kv_len = max_kv;
  b.sum_kv_len = sum_kv;
  const size_t qrow = (size_t)hq * (size_t)d * z->es;
  float *lse_step = (float *)(void *)(r->ws + z->off_lse_step) + (size_t)c->row0 * hq;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = (const char *)r->t->q + (size_t)c->row0 * qrow;
  t.k_cache = r->ws + z->off_k;
  t.v_cache = r->ws + z->off_v;
  t.num_blocks = 2 * (int64_t)z->buf_pages + 2 * (int64_t)z->spare_pages;
  t.alibi_slopes = r->t->alibi_slopes; /* anyattn_cp_tensors: fp32 */
  t.out = (char *)r->t->out + (size_t)c->row0 * qrow;
  t.lse = lse_step;
  /* q_pos gives every entry its true distance: the problem's own mask serves diagonal, past and future blocks */
  const anyattn_status s = anyattn_run(p->causal_plan ? p->causal_plan : p->full_plan, &b, &t, r->ws + z->off_inner,
                                       z->inner_bytes, r->stream);
  if (s != ANYATTN_STATUS_OK) return cp_lib_error(s, "local attention of a step");

  cp_merge_args m = {c->rows, hq, d, p->problem.dtype, t.out, lse_step,
                     (float *)(void *)(r->ws + z->off_acc) + (size_t)c->row0 * hq * d,
                     (float *)(void *)(r->ws + z->off_lse_acc) + (size_t)c->row0 * hq, c->init};
  return p->math->merge(&m, r->stream);
}

static anyattn_status cp_do_step(cp_run *r, const cp_op *op) {
  const anyattn_cp_plan *p = r->plan;
  cp_scratch sc = cp_scratch_of(p);
  cp_shard mine, theirs;
  cp_shard_make(&mine, sc.shard[0], p->z.world, p->z.rank, r->n, r->lens);
  cp_shard_make(&theirs, sc.shard[1], p->z.world, op->src, r->n, r->lens);
  const cp_mask mask = {p->problem.causal, p->problem.window_left, p->problem.window_right};
  const int nc = cp_step_calls(&mine, &theirs, p->z.rank, op->src, p->z.world, r->lens, mask, sc.ent, sc.calls);
  for (int c = 0; c < nc; c++) CP_TRY(cp_do_call(r, op, &sc.calls[c], &sc));
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_finish(cp_run *r) {
  const anyattn_cp_plan *p = r->plan;
  cp_scratch sc = cp_scratch_of(p);
  cp_shard mine;
  cp_shard_make(&mine, sc.shard[0], p->z.world, p->z.rank, r->n, r->lens);
  if (mine.rows == 0) return ANYATTN_STATUS_OK;
  cp_finish_args f = {mine.rows, p->problem.num_q_heads, p->problem.head_dim, p->problem.dtype,
                      (const float *)(const void *)(r->ws + p->z.off_acc),
                      (const float *)(const void *)(r->ws + p->z.off_lse_acc), r->t->sinks, r->t->out, r->t->lse};
  return p->math->finish(&f, r->stream);
}

anyattn_status cp_exec_prefill(cp_run *r) {
  const anyattn_cp_plan *p = r->plan;
  const cp_transport *tr = p->comm->tr;
  r->nops = cp_schedule(p, r->n, r->lens, p->ops);
  CP_TRY(tr->begin(r));
  for (int i = 0; i < r->nops; i++) {
    const cp_op *op = &p->ops[i];
    for (int j = 0; j < op->ndeps; j++) CP_TRY(tr->wait(r, i, op->deps[j]));
    if (op->kind == CP_OP_PACK) CP_TRY(cp_do_pack(r, op));
    else if (op->kind == CP_OP_XFER) CP_TRY(cp_do_xfer(r, i));
    else CP_TRY(cp_do_step(r, op));
    CP_TRY(tr->record(r, i));
  }
  CP_TRY(cp_finish(r));
  return tr->end(r);
}

anyattn_status cp_exec_decode(const anyattn_cp_plan *p, const anyattn_batch *b, const anyattn_tensors *t,
                              int holds_new_keys, char *ws, void *stream) {
  const cp_sizes *z = &p->z;
  anyattn_tensors lt = *t;
  lt.sinks = NULL; /* entered once, by the merge */
  lt.lse = (float *)(void *)(ws + z->off_lse_step);
  /* q_pos places the queries among this shard's keys (holds_new_keys then has nothing to say) */
  const anyattn_plan *local = (b->q_pos || holds_new_keys) && p->causal_plan ? p->causal_plan : p->full_plan;
  anyattn_status s = anyattn_run(local, b, &lt, ws + z->off_inner, z->inner_bytes, stream);
  if (s != ANYATTN_STATUS_OK) return cp_lib_error(s, "local attention");
  if (b->num_tokens == 0) return ANYATTN_STATUS_OK;
  cp_decode_args a;
  memset(&a, 0, sizeof a);
  a.rows = b->num_tokens;
  a.hq = p->problem.num_q_heads;
  a.d = p->problem.head_dim;
  a.ranks = z->world;
  a.dtype = p->problem.dtype;
  a.out = t->out;
  a.lse = lt.lse;
  a.part = (float *)(void *)(ws + z->off_send);
  a.gathered = (const float *)(const void *)(ws + z->off_recv);
  a.sinks = (const float *)t->sinks; /* fp32: anyattn_cp_decode refuses other types */
  a.final_out = t->out;
  a.final_lse = t->lse;
  a.cu_end = b->cu_seqlens_q + b->num_seqs;
  CP_TRY(p->math->decode_pack(&a, stream));
  CP_TRY(p->comm->tr->allgather(p, a.part, (float *)(void *)(ws + z->off_recv), a.rows, stream));
  return p->math->decode_merge(&a, stream);
}
