/* cp_bench.c: `anyattn bench --workload cp-prefill|cp-decode`: context
 * parallelism timed across the processes of a job (cp_boot.h says how they
 * find each other). Each prefill case runs as a ring and, over more than one
 * node, as the two-level schedule; each decode case over a cache cut into
 * even ranges. Rank 0 prints every rank's median and the job's (the median
 * over calls of the slowest rank). Inputs are a function of each token's
 * index, so each rank rechecks one output row in double over the whole
 * sequence. Shapes: bench.h's Llama-3.1-8B heads, causal. */
#define _POSIX_C_SOURCE 200809L
#include "cp_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cp_boot.h"
#include "devmem.h"
#include "tl_util.h"

#if !defined(ANYATTN_WITH_CP)
int cp_bench_main(const bench_options *o) {
  fprintf(stderr, "anyattn: workload %s needs libanyattn_cp, which this build lacks (neither MPI nor NCCL found)\n",
          o->workload);
  return 1;
}
#else

/* Element e of head h of token `tok` of tensor `which` (0 q, 1 k, 2 v), in [-1, 1). */
static float gen(int which, int64_t tok, int h, int e) {
  uint64_t s = ((uint64_t)which << 58) ^ ((uint64_t)tok << 18) ^ ((uint64_t)h << 9) ^ (uint64_t)e;
  return (float)((double)(tl_rng_next(&s) >> 40) / 8388608.0 - 1.0);
}

/* rows x heads x BENCH_D elements of tensor `which` for the given tokens, in backend memory. */
static void *gen_rows(anyattn_backend be, anyattn_dtype dt, int which, int heads, const int64_t *tok, int64_t rows) {
  const size_t n = (size_t)rows * heads * BENCH_D, es = anyattn_dtype_size(dt);
  void *h = malloc(n * es + 1), *d = dm_alloc(be, n * es + 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int hh = 0; hh < heads; hh++)
      for (int e = 0; e < BENCH_D; e++) tl_store(dt, h, ((size_t)r * heads + hh) * BENCH_D + e, gen(which, tok[r], hh, e));
  if (d && dm_to_device(be, d, h, n * es + 1)) d = NULL;
  free(h);
  return d;
}

/* Head 0 of the query at token q_tok over keys [k0, k0 + nk), causal by construction, in double. */
static double check_row(anyattn_dtype dt, int64_t q_tok, int64_t k0, int64_t nk, const void *got_row) {
  const int kvh = 0;
  double m = -INFINITY, l = 0, o[BENCH_MAX_D] = {0}, *s = (double *)malloc(sizeof(double) * (size_t)nk);
  for (int64_t j = 0; j < nk; j++) {
    double dot = 0;
    for (int e = 0; e < BENCH_D; e++)
      dot += (double)tl_round(dt, gen(0, q_tok, 0, e)) * tl_round(dt, gen(1, k0 + j, kvh, e));
    s[j] = dot / sqrt((double)BENCH_D);
    m = s[j] > m ? s[j] : m;
  }
  for (int64_t j = 0; j < nk; j++) {
    const double w = exp(s[j] - m);
    l += w;
    for (int e = 0; e < BENCH_D; e++) o[e] += w * tl_round(dt, gen(2, k0 + j, kvh, e));
  }
  double worst = 0;
  for (int e = 0; e < BENCH_D; e++) {
    const double ref = o[e] / l, err = fabs(tl_load(dt, got_row, (size_t)e) - ref) / (1.0 + fabs(ref));
    worst = err > worst ? err : worst;
  }
  free(s);
  return worst;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  const anyattn_cp_plan *plan;
  int n;
  const int32_t *lens;
  anyattn_cp_tensors pt;
  const anyattn_batch *batch;
  anyattn_tensors dt;
  int holds_new_keys;
  void *ws;
  size_t wsz;
} cp_call;

static int call_once(const cp_call *c) {
  const anyattn_status s = c->batch ? anyattn_cp_decode(c->plan, c->batch, &c->dt, c->holds_new_keys, c->ws, c->wsz, NULL)
                                    : anyattn_cp_prefill(c->plan, c->n, c->lens, &c->pt, c->ws, c->wsz, NULL);
  if (s != ANYATTN_STATUS_OK) fprintf(stderr, "anyattn: %s\n", anyattn_cp_last_error());
  return s != ANYATTN_STATUS_OK;
}

/* `iters` timed calls after one warm-up: this rank's median and the job's. */
static int time_calls(const cp_boot *b, const cp_call *c, int iters, double *mine, double *job) {
  double *t = (double *)malloc(sizeof(double) * (size_t)iters), *tj = (double *)malloc(sizeof(double) * (size_t)iters);
  int bad = 0;
  for (int i = -1; i < iters; i++) {
    cp_boot_barrier(b);
    const double t0 = now_ms();
    bad |= call_once(c) || dm_sync(b->backend);
    const double dt = now_ms() - t0;
    if (i >= 0) t[i] = dt, tj[i] = cp_boot_max(b, dt);
  }
  qsort(t, (size_t)iters, sizeof *t, cmp_d);
  qsort(tj, (size_t)iters, sizeof *tj, cmp_d);
  *mine = t[iters / 2], *job = tj[iters / 2];
  free(t), free(tj);
  return cp_boot_max(b, bad) != 0;
}

static anyattn_problem bench_cp_problem(anyattn_dtype dt) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = BENCH_HQ, pr.num_kv_heads = BENCH_HKV, pr.head_dim = BENCH_D, pr.dtype = dt, pr.causal = 1;
  pr.block_size = BENCH_BS;
  return pr;
}

typedef struct {
  char name[64], mode[16];
  double job_ms, tflops, gbs, worst, extra_mib;
  int prefetch;
  double *rank_ms;
} cp_result;

static FILE *json; /* rank 0's --json file, or NULL */
static int json_cases;

static void print_result(const cp_boot *b, const cp_result *r) {
  if (b->rank != 0) return;
  printf("%-24s %-9s %10.3f ms %9.3f %s  extra %8.1f MiB  prefetch %3d%%  check %.1e\n  per rank (ms):", r->name,
         r->mode, r->job_ms, r->tflops > 0 ? r->tflops : r->gbs, r->tflops > 0 ? "TFLOP/s" : "GB/s   ", r->extra_mib,
         r->prefetch, r->worst);
  for (int i = 0; i < b->world; i++) printf(" %.3f", r->rank_ms[i]);
  printf("\n");
  fflush(stdout);
  if (!json) return;
  fprintf(json, "%s  {\"case\": \"%s\", \"schedule\": \"%s\", \"us\": %.3f, \"%s\": %.4f, \"extra_mib\": %.3f, "
          "\"prefetch_percent\": %d, \"rank_us\": [", json_cases++ ? ",\n" : "", r->name, r->mode, 1e3 * r->job_ms,
          r->tflops > 0 ? "tflops" : "kv_gbs", r->tflops > 0 ? r->tflops : r->gbs, r->extra_mib, r->prefetch);
  for (int i = 0; i < b->world; i++) fprintf(json, "%s%.3f", i ? ", " : "", 1e3 * r->rank_ms[i]);
  fprintf(json, "]}");
}

/* Plan, time and check one call; fills r (per-rank figures gathered on rank 0). */
static int measure(const cp_boot *b, const bench_options *o, anyattn_context *ctx, anyattn_cp_options opt,
                   const anyattn_limits *lim, cp_call *c, cp_result *r) {
  anyattn_problem pr = bench_cp_problem(o->dtype);
  anyattn_cp_plan *plan = NULL;
  if (anyattn_cp_plan_create(ctx, b->comm, &pr, lim, &opt, &plan) != ANYATTN_STATUS_OK) {
    if (b->rank == 0) fprintf(stderr, "anyattn: %s: %s\n", r->name, anyattn_cp_last_error());
    return 1;
  }
  anyattn_cp_plan_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  anyattn_cp_plan_get_info(plan, &info);
  r->extra_mib = info.extra_bytes / 1048576.0;
  r->prefetch = info.prefetch_percent;
  c->plan = plan;
  c->wsz = anyattn_cp_plan_workspace_size(plan);
  c->ws = dm_alloc(b->backend, c->wsz);
  if (c->ws && anyattn_cp_workspace_prepare(plan, c->ws, c->wsz, NULL) != ANYATTN_STATUS_OK) {
    dm_free(b->backend, c->ws);
    c->ws = NULL;
  }
  const int iters = o->iters > 0 ? o->iters : b->backend == ANYATTN_BACKEND_CPU ? 3 : 5;
  double mine = 0;
  int bad = !c->ws || time_calls(b, c, iters, &mine, &r->job_ms);
  cp_boot_gather(b, mine, r->rank_ms);
  dm_free(b->backend, c->ws);
  anyattn_cp_plan_free(plan);
  return bad;
}

/* Prefill: the zigzag rows of this rank, ring then (over nodes) two-level. */
static int run_prefill(const cp_boot *b, const bench_options *o, anyattn_context *ctx, const bench_case *bc) {
  const anyattn_backend be = b->backend;
  const int n = bc->num_seqs, N = b->world;
  int32_t *lens = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
  int64_t total = 0, rows = 0, *tok = NULL, base = 0;
  double flops = 0;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  for (int s = 0; s < n; s++) {
    lens[s] = bc->kv_lens[s];
    total += lens[s];
    flops += 4.0 * BENCH_HQ * BENCH_D * (double)lens[s] * (lens[s] + 1) / 2;
    lim.max_context = lens[s] > lim.max_context ? lens[s] : lim.max_context;
  }
  lim.max_seqs = n, lim.max_tokens = (int)total;
  tok = (int64_t *)malloc(sizeof(int64_t) * (size_t)(total + 1));
  for (int half = 0; half < 2; half++, base = 0)
    for (int s = 0; s < n; s++) {
      int start, len;
      anyattn_cp_chunk(lens[s], N, half ? 2 * N - 1 - b->rank : b->rank, &start, &len);
      for (int i = 0; i < len; i++) tok[rows++] = base + start + i;
      base += lens[s];
    }
  cp_call c;
  memset(&c, 0, sizeof c);
  c.n = n, c.lens = lens;
  anyattn_cp_tensors_init(&c.pt);
  c.pt.q = gen_rows(be, o->dtype, 0, BENCH_HQ, tok, rows);
  c.pt.k = gen_rows(be, o->dtype, 1, BENCH_HKV, tok, rows);
  c.pt.v = gen_rows(be, o->dtype, 2, BENCH_HKV, tok, rows);
  const size_t qbytes = (size_t)rows * BENCH_HQ * BENCH_D * anyattn_dtype_size(o->dtype);
  c.pt.out = dm_alloc(be, qbytes + 1);
  int bad = !c.pt.q || !c.pt.k || !c.pt.v || !c.pt.out;
  double rank_ms[4096];
  for (int mode = 0; mode < 2 && !bad; mode++) {
    if (mode == 1 && (N == 1 || b->ranks_per_node == N)) break; /* one node: two-level is the ring */
    cp_result r;
    memset(&r, 0, sizeof r);
    r.rank_ms = rank_ms;
    snprintf(r.name, sizeof r.name, "%s", bc->name);
    snprintf(r.mode, sizeof r.mode, "%s", mode ? "two-level" : "ring");
    anyattn_cp_options opt;
    anyattn_cp_options_init(&opt);
    opt.mode = mode ? ANYATTN_CP_TWO_LEVEL : ANYATTN_CP_RING;
    bad |= measure(b, o, ctx, opt, &lim, &c, &r);
    if (!bad && rows > 0) { /* this rank's last row: its latest position */
      char row[BENCH_MAX_D * 4];
      int64_t seq0 = 0, t = tok[rows - 1];
      for (int s = 0; s < n && t >= seq0 + lens[s]; s++) seq0 += lens[s];
      dm_to_host(be, row, (const char *)c.pt.out + (qbytes / rows) * (rows - 1), BENCH_D * anyattn_dtype_size(o->dtype));
      r.worst = check_row(o->dtype, t, seq0, t - seq0 + 1, row);
    }
    r.worst = cp_boot_max(b, r.worst);
    r.tflops = flops / (r.job_ms * 1e-3) / 1e12;
    const double tol = o->dtype == ANYATTN_DTYPE_F32 ? 1e-4 : o->dtype == ANYATTN_DTYPE_F16 ? 5e-3 : 3e-2;
    if (!bad && r.worst > tol) {
      if (b->rank == 0) fprintf(stderr, "anyattn: %s %s: output differs from the recomputation\n", r.name, r.mode);
      bad = 1;
    }
    if (!bad) print_result(b, &r);
  }
  dm_free(be, (void *)c.pt.q), dm_free(be, (void *)c.pt.k), dm_free(be, (void *)c.pt.v), dm_free(be, c.pt.out);
  free(lens), free(tok);
  return bad;
}

/* Decode: B sequences of context C, keys cut into even ranges over the ranks
 * (the last rank holds the newest); the query is each sequence's last token. */
static int run_decode(const cp_boot *b, const bench_options *o, anyattn_context *ctx, const bench_case *bc) {
  const anyattn_backend be = b->backend;
  const int B = bc->num_seqs, N = b->world, C = bc->kv_lens[0];
  if (C < N) {
    if (b->rank == 0) fprintf(stderr, "anyattn: %s: every rank needs a key (context %d, %d ranks)\n", bc->name, C, N);
    return 1;
  }
  const int k0 = (int)((int64_t)C * b->rank / N), local = (int)((int64_t)C * (b->rank + 1) / N) - k0;
  const int pages = (local + BENCH_BS - 1) / BENCH_BS;
  int32_t *cu = (int32_t *)malloc(sizeof(int32_t) * (B + 1)), *kv = (int32_t *)malloc(sizeof(int32_t) * B);
  int32_t *bt = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * pages);
  int64_t *ktok = (int64_t *)malloc(sizeof(int64_t) * (size_t)B * pages * BENCH_BS), *qtok = (int64_t *)malloc(sizeof(int64_t) * B);
  for (int s = 0; s < B; s++) {
    cu[s] = s, kv[s] = local, qtok[s] = (int64_t)s * C + C - 1;
    for (int p = 0; p < pages; p++) bt[(size_t)s * pages + p] = s * pages + p;
    for (int j = 0; j < pages * BENCH_BS; j++) ktok[((size_t)s * pages) * BENCH_BS + j] = (int64_t)s * C + k0 + j;
  }
  cu[B] = B;
  void *dcu = dm_alloc(be, 4 * (B + 1)), *dkv = dm_alloc(be, 4 * B), *dbt = dm_alloc(be, 4 * (size_t)B * pages);
  int bad = !dcu || !dkv || !dbt || dm_to_device(be, dcu, cu, 4 * (B + 1)) || dm_to_device(be, dkv, kv, 4 * B) ||
            dm_to_device(be, dbt, bt, 4 * (size_t)B * pages);
  anyattn_batch batch;
  anyattn_batch_init(&batch);
  batch.num_seqs = B, batch.num_tokens = B, batch.cu_seqlens_q = (const int32_t *)dcu, batch.seq_lens_k = (const int32_t *)dkv;
  batch.block_table = (const int32_t *)dbt, batch.block_table_stride = pages, batch.max_q_len = 1, batch.max_kv_len = local;
  cp_call c;
  memset(&c, 0, sizeof c);
  c.batch = &batch;
  c.holds_new_keys = b->rank == N - 1;
  anyattn_tensors_init(&c.dt);
  c.dt.q = gen_rows(be, o->dtype, 0, BENCH_HQ, qtok, B);
  c.dt.k_cache = gen_rows(be, o->dtype, 1, BENCH_HKV, ktok, (int64_t)B * pages * BENCH_BS);
  c.dt.v_cache = gen_rows(be, o->dtype, 2, BENCH_HKV, ktok, (int64_t)B * pages * BENCH_BS);
  c.dt.num_blocks = (int64_t)B * pages;
  c.dt.out = dm_alloc(be, (size_t)B * BENCH_HQ * BENCH_D * anyattn_dtype_size(o->dtype));
  bad |= !c.dt.q || !c.dt.k_cache || !c.dt.v_cache || !c.dt.out;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = B, lim.max_tokens = B, lim.max_context = (C + N - 1) / N; /* equal on every rank */
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = ANYATTN_CP_DECODE;
  double rank_ms[4096];
  cp_result r;
  memset(&r, 0, sizeof r);
  r.rank_ms = rank_ms;
  snprintf(r.name, sizeof r.name, "%s", bc->name);
  snprintf(r.mode, sizeof r.mode, "decode");
  if (!bad) bad = measure(b, o, ctx, opt, &lim, &c, &r);
  if (!bad) {
    char row[BENCH_MAX_D * 4];
    dm_to_host(be, row, c.dt.out, BENCH_D * anyattn_dtype_size(o->dtype));
    r.worst = cp_boot_max(b, check_row(o->dtype, qtok[0], 0, C, row));
    r.gbs = 2.0 * B * (double)C * BENCH_HKV * BENCH_D * anyattn_dtype_size(o->dtype) / (r.job_ms * 1e-3) / 1e9;
    const double tol = o->dtype == ANYATTN_DTYPE_F32 ? 1e-4 : o->dtype == ANYATTN_DTYPE_F16 ? 5e-3 : 3e-2;
    if (r.worst > tol) bad = 1;
    if (bad && b->rank == 0) fprintf(stderr, "anyattn: %s: output differs from the recomputation\n", r.name);
    if (!bad) print_result(b, &r);
  }
  dm_free(be, (void *)c.dt.q), dm_free(be, (void *)c.dt.k_cache), dm_free(be, (void *)c.dt.v_cache);
  dm_free(be, c.dt.out), dm_free(be, dcu), dm_free(be, dkv), dm_free(be, dbt);
  free(cu), free(kv), free(bt), free(ktok), free(qtok);
  return bad;
}

int cp_bench_main(const bench_options *o) {
  cp_boot b;
  int rc = cp_boot_init(&b, o->backend, o->device, o->ranks_per_node);
  if (rc) return rc;
  const int decode = !strcmp(o->workload, "cp-decode"), gpu = b.backend != ANYATTN_BACKEND_CPU;
  anyattn_context *ctx = NULL;
  if (b.world > 4096 || anyattn_context_create(b.backend, b.device, &ctx) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", b.world > 4096 ? "more than 4096 ranks" : anyattn_last_error());
    cp_boot_fini(&b);
    return 1;
  }
  /* Defaults: what one H200 a rank and a few CPU cores a rank finish in seconds. */
  const char *list = o->cases ? o->cases
                     : decode ? (gpu ? "1x1048576,8x131072" : "4x8192,1x32768")
                              : (gpu ? "p1x32768,p1x131072" : "p1x2048,p2x1024");
  case_list cases = {0};
  if (bench_parse_cases(&cases, list)) {
    fprintf(stderr, "anyattn: bad --cases '%s'\n", list);
    rc = 2;
  }
  char dev[128] = "";
  anyattn_device_name(b.backend, b.device, dev, sizeof dev);
  if (b.rank == 0 && !rc)
    printf("anyattn %s bench: workload %s, backend %s (%s), %d ranks as %d node%s x %d, %s, %d q heads, %d kv heads, "
           "head dim %d, causal\n%-24s %-9s %13s %17s\n",
           anyattn_version_string(), o->workload, anyattn_backend_name(b.backend), dev, b.world,
           b.world / b.ranks_per_node, b.world / b.ranks_per_node > 1 ? "s" : "", b.ranks_per_node,
           tl_dtype_name(o->dtype), BENCH_HQ, BENCH_HKV, BENCH_D, "case", "schedule", "job (median)",
           decode ? "K/V bandwidth" : "throughput");
  if (b.rank == 0 && o->json_path && !rc) {
    json = fopen(o->json_path, "w");
    if (!json) fprintf(stderr, "anyattn: cannot write --json file '%s'\n", o->json_path), rc = 1;
    else
      fprintf(json, "{\"version\": \"%s\", \"workload\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", "
              "\"ranks\": %d, \"ranks_per_node\": %d, \"dtype\": \"%s\", \"cases\": [\n", anyattn_version_string(),
              o->workload, anyattn_backend_name(b.backend), dev, b.world, b.ranks_per_node, tl_dtype_name(o->dtype));
  }
  rc = (int)cp_boot_max(&b, rc);
  for (int i = 0; i < cases.count && !rc; i++) {
    const bench_case *bc = &cases.items[i];
    const int is_decode = bc->q_lens[0] == 1 && bc->kv_lens[0] > 1;
    if (is_decode != decode) {
      if (b.rank == 0) fprintf(stderr, "anyattn: case %s is not a %s case (%s)\n", bc->name, o->workload,
                               decode ? "BxC" : "pBxL");
      rc = 2;
      break;
    }
    rc |= decode ? run_decode(&b, o, ctx, bc) : run_prefill(&b, o, ctx, bc);
  }
  if (json) {
    fprintf(json, "\n]}\n");
    if (fclose(json) != 0) fprintf(stderr, "anyattn: cannot write --json file '%s'\n", o->json_path), rc |= 1;
    json = NULL;
  }
  bench_free_cases(&cases);
  anyattn_context_free(ctx);
  cp_boot_fini(&b);
  return rc;
}
#endif
