/* schedule.c: the ops of one prefill run on one rank, in issue order, for
 * RING and TWO_LEVEL alike (RING is one node of every rank). Step k =
 * o * R + t (outer step o over nodes, inner step t over a node's ranks)
 * attends to the shard of rank ((node - o) mod G, (local - t) mod R).
 * Shards move between two buffers A and B (step k computes in A when k is
 * even); the intra-node ring forwards the shard at hand to the next local
 * rank; between nodes each rank sends its own shard straight from the
 * caller's rows, the share `spare_pages` ahead into a spare (two of them,
 * alternating by outer step) during the intra-node steps, the rest in the
 * last inner step into the buffer that step frees.
 * docs/design/context-parallel.md#two-level explains the choice. */
#include <string.h>

#include "cp.h"

typedef struct {
  const cp_sizes *z;
  int n;
  const int32_t *lens;
  cp_op *ops;
  int nops;
} cp_sched;

static int cp_src_of(const cp_sizes *z, int k) {
  const int o = k / z->R, t = k % z->R;
  return ((z->node - o) % z->G + z->G) % z->G * z->R + ((z->local - t) % z->R + z->R) % z->R;
}
static int cp_buf(const cp_sizes *z, int k) { return k % 2 ? z->buf_pages : 0; }
static int cp_spare(const cp_sizes *z, int o) { return 2 * z->buf_pages + (o % 2) * z->spare_pages; }
static int cp_pages(const cp_sched *s, int src) { return cp_shard_pages(s->z->world, src, s->n, s->lens); }
/* Pages of a shard sent ahead of the last inner step. */
static int cp_ahead(const cp_sched *s, int src) {
  const int p = cp_pages(s, src);
  return s->z->spare_pages < p ? s->z->spare_pages : p;
}
static cp_view cp_single(int base) {
  cp_view v = {CP_NO_CUT, base, 0};
  return v;
}

/* Where the shard of step k lies: the packed own shard, an intra-node
 * arrival, or (first step of an outer step) spare plus buffer. */
static cp_view cp_view_of(const cp_sched *s, int k) {
  const cp_sizes *z = s->z;
  const int o = k / z->R, t = k % z->R;
  if (k == 0 || t > 0) return cp_single(cp_buf(z, k));
  cp_view v = {cp_ahead(s, cp_src_of(z, k)), cp_spare(z, o - 1), cp_buf(z, k)};
  return v;
}

static cp_op *cp_push(cp_sched *s, cp_op_kind kind, int level, int step) {
  cp_op *op = &s->ops[s->nops++];
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->level = level;
  op->step = step;
  op->send_peer = op->recv_peer = -1;
  return op;
}
static void cp_dep(cp_op *op, int dep) {
  if (dep >= 0) op->deps[op->ndeps++] = dep;
}

/* The inter-node transfer of outer step o: pages [p0, p1) of the own shard
 * out, of the incoming shard in (ahead: p0 = 0, p1 = the spare's share). */
static cp_op *cp_inter(cp_sched *s, int o, int step, int ahead, cp_view recv_view) {
  const cp_sizes *z = s->z;
  const int to = (z->node + o + 1) % z->G, from = ((z->node - o - 1) % z->G + z->G) % z->G;
  const int in = from * z->R + z->local;
  cp_op *op = cp_push(s, CP_OP_XFER, 1, step);
  op->send_peer = to;
  op->recv_peer = from;
  cp_route snd = {z->rank, 1, CP_NO_CUT, CP_NO_CUT, ahead ? 0 : cp_ahead(s, z->rank),
                  ahead ? cp_ahead(s, z->rank) : cp_pages(s, z->rank)};
  cp_route rcv = {in, 1, CP_NO_CUT, CP_NO_CUT, ahead ? 0 : cp_ahead(s, in), ahead ? cp_ahead(s, in) : cp_pages(s, in)};
  op->send = snd;
  op->recv = rcv;
  op->recv_view = recv_view;
  return op;
}

int cp_schedule(const anyattn_cp_plan *plan, int n, const int32_t *lens, cp_op *ops) {
  const cp_sizes *z = &plan->z;
  cp_sched s = {z, n, lens, ops, 0};
  const int N = z->world, R = z->R, G = z->G;
  int pack, step_op = -1, l0_op = -1, early[2] = {-1, -1}, late = -1;
  int outer_step0 = -1, outer_l0 = -1; /* ops of step (o - 1) * R, which read spare (o - 1) % 2 */

  cp_op *op = cp_push(&s, CP_OP_PACK, -1, 0);
  cp_route own = {z->rank, 1, CP_NO_CUT, CP_NO_CUT, 0, cp_pages(&s, z->rank)};
  op->send = own;
  op->src = z->rank;
  op->view = cp_single(0);
  pack = 0;

  for (int k = 0; k < N; k++) {
    const int o = k / R, t = k % R, src = cp_src_of(z, k);
    const cp_view view = cp_view_of(&s, k);
    const int prev_step = step_op, prev_l0 = l0_op;
    int filled[2] = {-1, -1}; /* the ops that brought this step's shard */
    if (k == 0) filled[0] = pack;
    else if (t > 0) filled[0] = prev_l0;
    else filled[0] = late, filled[1] = early[(o - 1) % 2];

    if (G > 1 && o < G - 1 && t == 0 && z->spare_pages > 0) { /* ahead share, into spare o % 2 */
      op = cp_inter(&s, o, k, 1, cp_single(cp_spare(z, o)));
      if (o >= 2) {
        cp_dep(op, outer_step0);
        cp_dep(op, outer_l0);
      }
      early[o % 2] = s.nops - 1;
    } else if (t == 0) {
      early[o % 2] = -1;
    }

    l0_op = -1;
    if (R > 1 && t < R - 1) { /* forward the shard at hand to the next local rank */
      op = cp_push(&s, CP_OP_XFER, 0, k);
      op->send_peer = (z->local + 1) % R;
      op->recv_peer = (z->local - 1 + R) % R;
      const int next = cp_src_of(z, k + 1);
      cp_route snd = {src, 0, view.c0, CP_NO_CUT, 0, cp_pages(&s, src)};
      cp_route rcv = {next, 0, t == 0 && k > 0 ? cp_ahead(&s, next) : CP_NO_CUT, CP_NO_CUT, 0, cp_pages(&s, next)};
      op->send = snd;
      op->recv = rcv;
      op->send_view = view;
      op->recv_view = cp_single(cp_buf(z, k + 1));
      cp_dep(op, filled[0]);
      cp_dep(op, filled[1]);
      cp_dep(op, prev_step); /* the buffer it fills was read by the previous step */
      cp_dep(op, prev_l0);   /* ... and sent on by it */
      l0_op = s.nops - 1;
    }
    if (G > 1 && o < G - 1 && t == R - 1) { /* the rest, into the buffer this step frees */
      cp_view v = {cp_ahead(&s, ((z->node - o - 1) % G + G) % G * R + z->local), cp_spare(z, o), cp_buf(z, k + 1)};
      op = cp_inter(&s, o, k, 0, v);
      cp_dep(op, prev_step);
      cp_dep(op, prev_l0);
      late = s.nops - 1;
    }

    op = cp_push(&s, CP_OP_STEP, -1, k);
    op->src = src;
    op->view = view;
    cp_dep(op, filled[0]);
    cp_dep(op, filled[1]);
    step_op = s.nops - 1;
    if (t == 0) {
      outer_step0 = step_op;
      outer_l0 = l0_op;
    }
  }
  return s.nops;
}
