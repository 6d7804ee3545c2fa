/* test_cp_schedule.c: the context-parallel schedule checked without running
 * it (src/cp/schedule.c, layout.c), for ring and two-level layouts of 1-16
 * ranks, random batches and prefetch shares. Per rank: every shard attended
 * once; buffer contents right in issue order; and every two ops that touch
 * the same buffer page (one writing) ordered by the dependencies the GPU and
 * MPI executors honour, so any execution they allow reads what issue order
 * reads. Across ranks: each send meets a receive of the same route, in the
 * same order, and the MPI executor cannot deadlock. The steps' calls cover
 * exactly the keys each query sees, once. Last, the memory figure: the
 * two-level plan's extra bytes against ring's for Llama-3-8B heads at 128k
 * tokens (docs/design/context-parallel.md#memory). Seed printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"
#include "tl_check.h"
#include "tl_util.h"

enum { MAXN = 16, MAXOPS = 3 * MAXN + 1, MAXS = 6 };

typedef struct {
  anyattn_cp_plan p;
  cp_op ops[MAXOPS];
  int nops;
} rank_sched;

static anyattn_problem problem(void) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = 4, pr.num_kv_heads = 2, pr.head_dim = 16, pr.dtype = ANYATTN_DTYPE_F32, pr.causal = 1;
  return pr;
}

static int build(rank_sched *rs, int N, int rpn, anyattn_cp_mode mode, int prefetch, int n, const int32_t *lens,
                 int lim_tokens, int lim_ctx) {
  anyattn_problem pr = problem();
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = MAXS, lim.max_tokens = lim_tokens, lim.max_context = lim_ctx;
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = mode, opt.prefetch_percent = prefetch;
  for (int r = 0; r < N; r++) {
    memset(&rs[r].p, 0, sizeof rs[r].p);
    rs[r].p.limits = lim;
    if (cp_size(&rs[r].p.z, &pr, &lim, &opt, N, rpn, r, 0) != ANYATTN_STATUS_OK) return -1;
    rs[r].nops = cp_schedule(&rs[r].p, n, lens, rs[r].ops);
  }
  return 0;
}

/* ---- one rank: contents in issue order and hazards under the dependencies ---- */
typedef struct {
  int lo, hi; /* pool pages [lo, hi) of the K buffer (V is the same) */
} span;

/* Pool pages an op reads (send side, step) or writes (receive side, pack), as page lists. */
static int pages_of(const rank_sched *rs, const cp_route *rt, const cp_view *v, int n, const int32_t *lens,
                    int *out) {
  (void)n, (void)lens, (void)rs;
  int k = 0;
  for (int lp = rt->p0; lp < rt->p1; lp++) out[k++] = lp < v->c0 ? v->b0 + lp : v->b1 + (lp - v->c0);
  return k;
}

static int shard_pages(int N, int src, int n, const int32_t *lens) { return cp_shard_pages(N, src, n, lens); }

typedef struct {
  int nr, nw, r[4096], w[4096];
} access;

static void access_of(const rank_sched *rs, int i, int n, const int32_t *lens, access *a) {
  const cp_op *op = &rs->ops[i];
  const int N = rs->p.z.world;
  a->nr = a->nw = 0;
  if (op->kind == CP_OP_PACK) a->nw = pages_of(rs, &op->send, &op->view, n, lens, a->w);
  if (op->kind == CP_OP_STEP) {
    cp_route all = {op->src, 0, CP_NO_CUT, CP_NO_CUT, 0, shard_pages(N, op->src, n, lens)};
    a->nr = pages_of(rs, &all, &op->view, n, lens, a->r);
  }
  if (op->kind == CP_OP_XFER) {
    if (op->send_peer >= 0 && !op->send.src_user) a->nr = pages_of(rs, &op->send, &op->send_view, n, lens, a->r);
    if (op->recv_peer >= 0) a->nw = pages_of(rs, &op->recv, &op->recv_view, n, lens, a->w);
  }
}

static int overlap(const int *x, int nx, const int *y, int ny) {
  for (int i = 0; i < nx; i++)
    for (int j = 0; j < ny; j++)
      if (x[i] == y[j]) return 1;
  return 0;
}

static void check_rank(const rank_sched *rs, int n, const int32_t *lens, const char *tag) {
  const int N = rs->p.z.world, nops = rs->nops;
  static unsigned char hb[MAXOPS][MAXOPS];
  memset(hb, 0, sizeof hb);
  int last_compute = -1, seen[MAXN] = {0}, steps = 0;
  for (int i = 0; i < nops; i++) {
    const cp_op *op = &rs->ops[i];
    for (int d = 0; d < op->ndeps; d++) {
      EXPECT(op->deps[d] >= 0 && op->deps[d] < i, "%s: op %d depends on op %d", tag, i, op->deps[d]);
      hb[op->deps[d]][i] = 1;
    }
    if (op->kind != CP_OP_XFER) {
      if (last_compute >= 0) hb[last_compute][i] = 1; /* the compute stream is in order */
      last_compute = i;
    }
    if (op->kind == CP_OP_STEP) {
      EXPECT(op->step == steps, "%s: step %d issued as %d", tag, op->step, steps);
      steps++;
      EXPECT(op->src >= 0 && op->src < N && !seen[op->src]++, "%s: shard %d attended twice", tag, op->src);
    }
  }
  EXPECT(steps == N, "%s: %d steps for %d ranks", tag, steps, N);
  for (int k = 0; k < nops; k++) /* transitive closure */
    for (int i = 0; i < nops; i++)
      if (hb[i][k])
        for (int j = 0; j < nops; j++)
          if (hb[k][j]) hb[i][j] = 1;
  static access a[MAXOPS];
  for (int i = 0; i < nops; i++) access_of(rs, i, n, lens, &a[i]);
  for (int i = 0; i < nops; i++)
    for (int j = i + 1; j < nops; j++) {
      const int conflict = overlap(a[i].w, a[i].nw, a[j].r, a[j].nr) || overlap(a[i].w, a[i].nw, a[j].w, a[j].nw) ||
                           overlap(a[i].r, a[i].nr, a[j].w, a[j].nw);
      EXPECT(!conflict || hb[i][j], "%s: ops %d and %d touch the same pages unordered", tag, i, j);
    }
  /* contents in issue order: each page holds (shard, logical page) */
  static int pool[8192];
  const int pool_pages = 2 * rs->p.z.buf_pages + 2 * rs->p.z.spare_pages;
  for (int i = 0; i < pool_pages; i++) pool[i] = -1;
  for (int i = 0; i < nops; i++) {
    const cp_op *op = &rs->ops[i];
    const cp_route *rd = op->kind == CP_OP_XFER ? &op->send : NULL;
    const cp_view *rv = op->kind == CP_OP_XFER ? &op->send_view : &op->view;
    cp_route all = {op->src, 0, CP_NO_CUT, CP_NO_CUT, 0, shard_pages(N, op->src, n, lens)};
    if (op->kind == CP_OP_STEP) rd = &all;
    if (rd && (op->kind == CP_OP_STEP || (op->send_peer >= 0 && !rd->src_user)))
      for (int lp = rd->p0; lp < rd->p1; lp++) {
        const int pg = lp < rv->c0 ? rv->b0 + lp : rv->b1 + (lp - rv->c0);
        EXPECT(pg >= 0 && pg < pool_pages && pool[pg] == rd->shard * 100000 + lp,
               "%s: op %d reads page %d holding %d, wants shard %d page %d", tag, i, pg, pg >= 0 ? pool[pg] : -9,
               rd->shard, lp);
      }
    const cp_route *wr = op->kind == CP_OP_PACK ? &op->send : op->kind == CP_OP_XFER && op->recv_peer >= 0 ? &op->recv : NULL;
    const cp_view *wv = op->kind == CP_OP_PACK ? &op->view : &op->recv_view;
    if (wr)
      for (int lp = wr->p0; lp < wr->p1; lp++) {
        const int pg = lp < wv->c0 ? wv->b0 + lp : wv->b1 + (lp - wv->c0);
        EXPECT(pg >= 0 && pg < pool_pages, "%s: op %d writes page %d outside %d", tag, i, pg, pool_pages);
        if (pg >= 0 && pg < pool_pages) pool[pg] = wr->shard * 100000 + lp;
      }
  }
}

/* ---- across ranks: matched transfers, no deadlock under the MPI executor ---- */
static int to_world(const rank_sched *rs, int level, int peer) {
  const cp_sizes *z = &rs->p.z;
  return level == 1 ? peer * z->R + z->local : z->node * z->R + peer;
}

/* The op on rank b that receives the k-th message stream a sends b at `level` (or -1). */
static int counterpart(const rank_sched *rs, int a, int i, int send) {
  const cp_op *op = &rs[a].ops[i];
  const int peer = to_world(&rs[a], op->level, send ? op->send_peer : op->recv_peer);
  int k = 0;
  for (int j = 0; j < i; j++) {
    const cp_op *o = &rs[a].ops[j];
    if (o->kind == CP_OP_XFER && o->level == op->level && (send ? o->send_peer : o->recv_peer) >= 0 &&
        to_world(&rs[a], o->level, send ? o->send_peer : o->recv_peer) == peer)
      k++;
  }
  for (int j = 0; j < rs[peer].nops; j++) {
    const cp_op *o = &rs[peer].ops[j];
    if (o->kind != CP_OP_XFER || o->level != op->level || (send ? o->recv_peer : o->send_peer) < 0) continue;
    if (to_world(&rs[peer], o->level, send ? o->recv_peer : o->send_peer) != a) continue;
    if (k-- == 0) return j;
  }
  return -1;
}

static int same_route(const cp_route *x, const cp_route *y) {
  return x->shard == y->shard && x->src_user == y->src_user && x->src_c0 == y->src_c0 && x->dst_c0 == y->dst_c0 &&
         x->p0 == y->p0 && x->p1 == y->p1;
}

static void check_world(const rank_sched *rs, int N, const char *tag) {
  static int cp_of[MAXN][MAXOPS][2], posted[MAXN][MAXOPS], pc[MAXN];
  for (int a = 0; a < N; a++)
    for (int i = 0; i < rs[a].nops; i++) {
      const cp_op *op = &rs[a].ops[i];
      cp_of[a][i][0] = cp_of[a][i][1] = -1;
      posted[a][i] = 0;
      if (op->kind != CP_OP_XFER) continue;
      if (op->send_peer >= 0) {
        const int b = to_world(&rs[a], op->level, op->send_peer), j = counterpart(rs, a, i, 1);
        EXPECT(j >= 0 && same_route(&op->send, &rs[b].ops[j].recv), "%s: rank %d op %d sends to %d unmatched", tag, a,
               i, b);
        cp_of[a][i][0] = j;
      }
      if (op->recv_peer >= 0) cp_of[a][i][1] = counterpart(rs, a, i, 0);
    }
  /* Each rank issues in order; a wait on a transfer blocks until its peers posted theirs. */
  memset(pc, 0, sizeof pc);
  for (int progress = 1; progress;) {
    progress = 0;
    for (int a = 0; a < N; a++)
      while (pc[a] < rs[a].nops) {
        const cp_op *op = &rs[a].ops[pc[a]];
        int ready = 1;
        for (int d = 0; d < op->ndeps && ready; d++) {
          const int dep = op->deps[d];
          const cp_op *o = &rs[a].ops[dep];
          if (o->kind != CP_OP_XFER) continue;
          if (o->send_peer >= 0 && cp_of[a][dep][0] >= 0)
            ready &= posted[to_world(&rs[a], o->level, o->send_peer)][cp_of[a][dep][0]];
          if (o->recv_peer >= 0 && cp_of[a][dep][1] >= 0)
            ready &= posted[to_world(&rs[a], o->level, o->recv_peer)][cp_of[a][dep][1]];
        }
        if (!ready) break;
        posted[a][pc[a]++] = 1;
        progress = 1;
      }
  }
  for (int a = 0; a < N; a++) EXPECT(pc[a] == rs[a].nops, "%s: rank %d stops at op %d of %d", tag, a, pc[a], rs[a].nops);
}

/* ---- the steps' calls cover each visible (query, key) pair once ---------------- */
/* Visible under the problem's mask (docs/semantics.md), key k and query q of one sequence. */
static int mask_sees(cp_mask m, int q, int k) {
  if (m.causal && k > q) return 0;
  if (m.wl >= 0 && k < q - m.wl) return 0;
  if (!m.causal && m.wr >= 0 && k > q + m.wr) return 0;
  return 1;
}

/* Each step's entries, with the sub-plan's mask at q_pos, cover every
 * visible pair once and nothing else; every entry is a query chunk of this
 * rank against a key chunk of the shard, its page the chunk's page in the
 * shard's block; the own shard's first call starts every row's merge. */
static void check_cover(int N, cp_mask mask, int n, const int32_t *lens, const char *tag) {
  static unsigned char cover[MAXS][128][128];
  memset(cover, 0, sizeof cover);
  int32_t mem[2][6 * MAXS];
  cp_entry ent[4 * MAXS];
  cp_call calls[4 * MAXS];
  for (int r = 0; r < N; r++) {
    cp_shard mine;
    cp_shard_make(&mine, mem[0], N, r, n, lens);
    for (int s = 0; s < N; s++) {
      cp_shard th;
      cp_shard_make(&th, mem[1], N, s, n, lens);
      const int nc = cp_step_calls(&mine, &th, r, s, N, lens, mask, ent, calls);
      EXPECT(nc >= 0 && nc <= 4 * n, "%s: rank %d step of shard %d: %d calls", tag, r, s, nc);
      for (int c = 0; c < nc; c++) {
        EXPECT(calls[c].init == (s == r && c == 0), "%s: rank %d shard %d call %d init %d", tag, r, s, c,
               calls[c].init);
        if (calls[c].init) EXPECT(calls[c].row0 == 0 && calls[c].rows == mine.rows, "%s: the first call", tag);
        int row = calls[c].row0;
        for (int e = calls[c].e0; e < calls[c].e0 + calls[c].ne; e++) {
          const cp_entry *x = &ent[e];
          const int t = x->seq;
          int fs, bs, fl, bl, kfs, kbs, kfl, kbl;
          anyattn_cp_chunk(lens[t], N, r, &fs, &fl);
          anyattn_cp_chunk(lens[t], N, 2 * N - 1 - r, &bs, &bl);
          anyattn_cp_chunk(lens[t], N, s, &kfs, &kfl);
          anyattn_cp_chunk(lens[t], N, 2 * N - 1 - s, &kbs, &kbl);
          const int qback = x->qstart == bs && row == mine.urow_b[t] && bl > 0;
          EXPECT(row == (qback ? mine.urow_b[t] : mine.urow_f[t]) && x->q_len == (qback ? bl : fl),
                 "%s: entry rows", tag);
          const int kback = x->kstart == kbs && x->page0 != th.page0[t];
          EXPECT(x->kv_len == (kback ? kbl : kfl) && x->kstart == (kback ? kbs : kfs) &&
                     x->page0 == th.page0[t] + (kback ? (kfl + CP_PAGE - 1) / CP_PAGE : 0) &&
                     x->q_pos == x->qstart - x->kstart,
                 "%s: entry keys", tag);
          for (int i = 0; i < x->q_len; i++)
            for (int j = 0; j < x->kv_len; j++)
              if (mask_sees(mask, x->q_pos + i, j)) cover[t][x->qstart + i][x->kstart + j]++;
          row += x->q_len;
        }
        EXPECT(row == calls[c].row0 + calls[c].rows, "%s: call rows", tag);
      }
    }
  }
  for (int t = 0; t < n; t++)
    for (int q = 0; q < lens[t]; q++)
      for (int k = 0; k < lens[t]; k++)
        EXPECT(cover[t][q][k] == mask_sees(mask, q, k), "%s: sequence %d query %d key %d covered %d times", tag, t,
               q, k, cover[t][q][k]);
}

/* ---- the memory figure ----------------------------------------------------------- */
static void memory_figure(anyattn_context *ctx, int N, int rpn) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = 32, pr.num_kv_heads = 8, pr.head_dim = 128, pr.causal = 1; /* Llama-3-8B, bf16 */
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1, lim.max_tokens = lim.max_context = 131072;
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  anyattn_cp_plan_info ring, two, full;
  ring.struct_size = two.struct_size = full.struct_size = sizeof ring;
  opt.mode = ANYATTN_CP_RING;
  EXPECT(anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, N, rpn, 0, &ring) == ANYATTN_STATUS_OK, "%s",
         anyattn_cp_last_error());
  opt.mode = ANYATTN_CP_TWO_LEVEL;
  EXPECT(anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, N, rpn, 0, &two) == ANYATTN_STATUS_OK, "%s",
         anyattn_cp_last_error());
  opt.prefetch_percent = 100;
  EXPECT(anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, N, rpn, 0, &full) == ANYATTN_STATUS_OK, "%s",
         anyattn_cp_last_error());
  const double io = 131072.0 / N * (2.0 * 32 * 128 * 2 + 2.0 * 8 * 128 * 2); /* q, out, k, v of a rank, bf16 */
  printf("memory 128k tokens, %2d ranks as %d x %d: extra over local attention: ring %.1f MiB, two-level %.1f MiB "
         "(%+.2f%%, prefetch %d%%), two-level prefetch 100%% %.1f MiB (%+.2f%%); with the rank's q, k, v, out: "
         "%+.2f%% and %+.2f%%\n",
         N, N / rpn, rpn, ring.extra_bytes / 1048576.0, two.extra_bytes / 1048576.0,
         100.0 * ((double)two.extra_bytes / ring.extra_bytes - 1), two.prefetch_percent, full.extra_bytes / 1048576.0,
         100.0 * ((double)full.extra_bytes / ring.extra_bytes - 1),
         100.0 * (two.extra_bytes - (double)ring.extra_bytes) / (ring.extra_bytes + io),
         100.0 * (full.extra_bytes - (double)ring.extra_bytes) / (ring.extra_bytes + io));
  EXPECT((double)two.extra_bytes <= 1.05 * (double)ring.extra_bytes, "two-level extra %zu over 1.05 x ring's %zu",
         two.extra_bytes, ring.extra_bytes);
  EXPECT(two.prefetch_percent > 0, "the default prefetch share is 0 at %d ranks", N);
}

int main(void) {
  const uint64_t seed = tl_seed_from_env_or_time();
  uint64_t rng = seed;
  printf("test_cp_schedule: seed 0x%llx\n", (unsigned long long)seed);
  static rank_sched rs[MAXN];
  static const int layouts[][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 1}, {3, 3}, {4, 1}, {4, 2}, {4, 4}, {6, 2},
                                   {6, 3}, {8, 2}, {8, 4}, {8, 8}, {9, 3}, {12, 4}, {16, 4}, {16, 8}};
  static const int prefetch[] = {-1, 0, 25, 50, 100};
  int layouts_checked = 0;
  for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++)
    for (int mode = 0; mode < 2; mode++)
      for (int trial = 0; trial < 6; trial++) {
        const int N = layouts[li][0], rpn = layouts[li][1], n = tl_rng_int(&rng, 1, MAXS);
        int32_t lens[MAXS];
        int total = 0, maxlen = 1;
        for (int s = 0; s < n; s++) {
          lens[s] = tl_rng_int(&rng, 0, 3) == 0 ? tl_rng_int(&rng, 0, 2 * N) : tl_rng_int(&rng, 0, 127);
          total += lens[s];
          maxlen = lens[s] > maxlen ? lens[s] : maxlen;
        }
        const int pf = prefetch[trial % 5];
        char tag[160];
        snprintf(tag, sizeof tag, "%s %d ranks x%d, prefetch %d, %d seqs (first %d)", mode ? "two-level" : "ring", N,
                 rpn, pf, n, lens[0]);
        if (build(rs, N, rpn, mode ? ANYATTN_CP_TWO_LEVEL : ANYATTN_CP_RING, pf, n, lens, total + tl_rng_int(&rng, 1, 99),
                  maxlen + tl_rng_int(&rng, 0, 40))) {
          EXPECT(0, "%s: sizes failed: %s", tag, anyattn_cp_last_error());
          continue;
        }
        for (int r = 0; r < N; r++) check_rank(&rs[r], n, lens, tag);
        check_world(rs, N, tag);
        if (mode == 0) { /* causal, full, then windows: left (causal), left and right, right only, the diagonal */
          cp_mask mask = {trial % 2 == 0, -1, -1};
          if (trial == 2) mask.wl = tl_rng_int(&rng, 0, 40);
          if (trial == 3) mask.wl = tl_rng_int(&rng, 0, 40), mask.wr = tl_rng_int(&rng, 0, 40);
          if (trial == 5) mask.wr = tl_rng_int(&rng, 0, 20);
          if (trial == 4) mask.wl = 0;
          check_cover(N, mask, n, lens, tag);
        }
        layouts_checked++;
      }
  printf("%d schedules checked\n", layouts_checked);

  anyattn_context *ctx = NULL;
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) == ANYATTN_STATUS_OK, "cpu context");
  { /* sizes that overflow are refused, with the reason, before anything is allocated */
    anyattn_problem pr;
    anyattn_problem_init(&pr);
    pr.num_q_heads = pr.num_kv_heads = 65536, pr.head_dim = 8192, pr.dtype = ANYATTN_DTYPE_F32;
    anyattn_limits lim;
    anyattn_limits_init(&lim);
    lim.max_seqs = 256, lim.max_tokens = 2147483647, lim.max_context = 1 << 29;
    anyattn_cp_options opt;
    anyattn_cp_options_init(&opt);
    anyattn_cp_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const anyattn_status st = anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, 2, 0, 0, &info);
    EXPECT(st == ANYATTN_STATUS_INVALID_SIZE && strstr(anyattn_cp_last_error(), "overflow") != NULL,
           "huge sizes: %s", anyattn_cp_last_error());
    EXPECT(anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, 0, 0, 0, &info) == ANYATTN_STATUS_INVALID_SIZE,
           "world 0: %s", anyattn_cp_last_error());
    EXPECT(anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, 4, 3, 0, &info) == ANYATTN_STATUS_INVALID_SIZE,
           "3 ranks a node of 4: %s", anyattn_cp_last_error());
  }
  memory_figure(ctx, 4, 2);
  memory_figure(ctx, 8, 4);
  memory_figure(ctx, 16, 8);
  anyattn_context_free(ctx);
  printf("%s: %d checks, %d failures\n", failures ? "FAIL" : "PASS", checks, failures);
  return failures ? 1 : 0;
}
