/* cp_model.c: `anyattn cp-model`: predicted time, communication hidden under
 * compute, and memory of context-parallel causal prefill, ring against
 * two-level, for 2-128 GPUs and 128k-1M tokens. Compute comes from the
 * single-GPU prefill rates measured by `anyattn bench --workload prefill`
 * (its JSON), communication from the link bandwidths given, memory from the
 * library itself (anyattn_cp_plan_estimate). The assumptions are listed in
 * the output and in docs/design/context-parallel.md#model. */
#include "cp_model.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#if defined(ANYATTN_WITH_CP)
#include "anyattn_cp.h"
#endif

#ifndef ANYATTN_SOURCE_DIR
#define ANYATTN_SOURCE_DIR "."
#endif

enum { MAX_POINTS = 16 };

typedef struct {
  int n;
  double pairs[MAX_POINTS], tflops[MAX_POINTS]; /* causal single-sequence prefill: L(L+1)/2 pairs */
  double hbm_gbs;                               /* device copy, read + write */
  char device[128];
} rates;

/* The "prefill 1xL" cases of a bench JSON, by growing size. */
static int read_rates(const char *path, rates *r) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "anyattn: cannot read --rates '%s'\n", path), 1;
  char *text = (char *)malloc(1 << 20);
  const size_t len = fread(text, 1, (1 << 20) - 1, f);
  fclose(f);
  text[len] = '\0';
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *cases = cJSON_GetObjectItem(root, "cases"), *bw = cJSON_GetObjectItem(root, "bandwidth_gbs");
  const cJSON *dev = cJSON_GetObjectItem(root, "device");
  memset(r, 0, sizeof *r);
  r->hbm_gbs = cJSON_IsNumber(bw) ? bw->valuedouble : 0;
  snprintf(r->device, sizeof r->device, "%s", cJSON_IsString(dev) ? dev->valuestring : "?");
  const cJSON *c;
  cJSON_ArrayForEach(c, cases) {
    const cJSON *name = cJSON_GetObjectItem(c, "case"), *gf = cJSON_GetObjectItem(c, "gflops");
    int len_ = 0;
    if (!cJSON_IsString(name) || !cJSON_IsNumber(gf) || sscanf(name->valuestring, "prefill 1x%d", &len_) != 1) continue;
    if (r->n == MAX_POINTS) break;
    int at = r->n++;
    const double pairs = 0.5 * len_ * (len_ + 1.0);
    while (at > 0 && r->pairs[at - 1] > pairs) r->pairs[at] = r->pairs[at - 1], r->tflops[at] = r->tflops[at - 1], at--;
    r->pairs[at] = pairs;
    r->tflops[at] = gf->valuedouble / 1e3;
  }
  cJSON_Delete(root);
  if (r->n == 0 || r->hbm_gbs <= 0)
    return fprintf(stderr, "anyattn: '%s' holds no \"prefill 1xL\" case or no bandwidth_gbs\n", path), 1;
  return 0;
}

/* TFLOP/s of a call of `pairs` visible (query, key) pairs: log-linear between
 * the measured sizes, the largest measured rate beyond them. */
static double rate_of(const rates *r, double pairs) {
  if (pairs <= r->pairs[0]) return r->tflops[0];
  for (int i = 1; i < r->n; i++)
    if (pairs <= r->pairs[i]) {
      const double f = log(pairs / r->pairs[i - 1]) / log(r->pairs[i] / r->pairs[i - 1]);
      return r->tflops[i - 1] + f * (r->tflops[i] - r->tflops[i - 1]);
    }
  return r->tflops[r->n - 1];
}

typedef struct {
  double ms, hidden, eff;
} cp_pred;

/* One schedule: N steps of compute c (merge included); transfers feeding
 * each step; what exceeds the step before it is exposed. */
static cp_pred predict(int N, int R, double c, double S, double bi, double bx, double share, int two_level,
                       double one_gpu) {
  const int G = N / R;
  double exposed = 0, comm = 0;
  for (int k = 1; k < N; k++) {
    const int t = (k - 1) % R; /* inner step of the step before k, which the transfer overlaps */
    double x;
    if (!two_level) x = S / (G > 1 ? bx : bi); /* a ring across nodes waits for its slowest hop every step */
    else if (t < R - 1) x = fmax(S / bi, R > 1 ? share * S / ((R - 1) * bx) : 0); /* intra; ahead share on the NIC */
    else x = (R > 1 ? 1.0 - share : 1.0) * S / bx;                              /* the rest, in the last inner step */
    comm += x;
    exposed += fmax(0, x - c);
  }
  cp_pred p;
  p.ms = 1e3 * (N * c + exposed);
  p.hidden = comm > 0 ? 100.0 * (1 - exposed / comm) : 100.0;
  p.eff = 100.0 * one_gpu / (N * p.ms * 1e-3);
  return p;
}

#if defined(ANYATTN_WITH_CP)
/* Extra bytes over local attention (MiB) and the default prefetch share, from the library. */
static double extra_mib(anyattn_context *ctx, const cp_model_options *o, int tokens, int N, int R, int mode,
                        int prefetch, int *share) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = o->q_heads, pr.num_kv_heads = o->kv_heads, pr.head_dim = o->head_dim, pr.causal = 1;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1, lim.max_tokens = lim.max_context = tokens;
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = (anyattn_cp_mode)mode, opt.prefetch_percent = prefetch;
  anyattn_cp_plan_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (anyattn_cp_plan_estimate(ctx, &pr, &lim, &opt, N, R, 0, &info) != ANYATTN_STATUS_OK) return NAN;
  if (share) *share = info.prefetch_percent;
  return info.extra_bytes / 1048576.0;
}
#endif

int cp_model_main(const cp_model_options *o) {
  const char *path = o->rates ? o->rates : ANYATTN_SOURCE_DIR "/bench/results/h200/prefill.json";
  rates r;
  if (read_rates(path, &r)) return 1;
  const double es = 2; /* bf16 */
  printf("cp-model: causal prefill, %d q heads, %d kv heads, head dim %d, bf16, one sequence; compute from %s (%s: "
         "%.0f-%.0f TFLOP/s over %d sizes, HBM %.0f GB/s); links %.0f GB/s within a node, %.0f GB/s between nodes, "
         "%d GPUs a node. Assumptions: docs/design/context-parallel.md#model\n\n",
         o->q_heads, o->kv_heads, o->head_dim, path, r.device, r.tflops[0], r.tflops[r.n - 1], r.n, r.hbm_gbs,
         o->intra_gbs, o->inter_gbs, o->gpus_per_node);
  printf("| GPUs | nodes x GPUs | tokens | step ms | ring ms | ring eff | ring hidden | two-level ms (ahead) | "
         "two-level eff | two-level hidden | ahead 100%% ms | extra MiB ring / two-level / 100%% |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
#if defined(ANYATTN_WITH_CP)
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) != ANYATTN_STATUS_OK) return 1;
#endif
  static const int gpus[] = {2, 4, 8, 16, 32, 64, 128}, toks[] = {131072, 262144, 524288, 1048576};
  for (size_t gi = 0; gi < sizeof gpus / sizeof gpus[0]; gi++)
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
      const int N = gpus[gi], R = N < o->gpus_per_node ? N : o->gpus_per_node, L = toks[ti];
      const double T = (double)L / N, flop_pair = 4.0 * o->q_heads * o->head_dim;
      const double step_pairs = 0.5 * T * T; /* zigzag: every step half of a T x T block */
      const double merge = T * o->q_heads * (o->head_dim * 10.0 + 12.0) / (r.hbm_gbs * 1e9);
      const double c = flop_pair * step_pairs / (rate_of(&r, step_pairs) * 1e12) + merge;
      const double S = T * o->kv_heads * o->head_dim * 2 * es, one = flop_pair * 0.5 * L * (L + 1.0) /
                                                                     (rate_of(&r, 0.5 * L * (L + 1.0)) * 1e12);
      int share = 0;
      double mr = NAN, mt = NAN, mf = NAN;
#if defined(ANYATTN_WITH_CP)
      mr = extra_mib(ctx, o, L, N, R, ANYATTN_CP_RING, -1, NULL);
      mt = extra_mib(ctx, o, L, N, R, ANYATTN_CP_TWO_LEVEL, -1, &share);
      mf = extra_mib(ctx, o, L, N, R, ANYATTN_CP_TWO_LEVEL, 100, NULL);
#endif
      const cp_pred ring = predict(N, R, c, S, o->intra_gbs * 1e9, o->inter_gbs * 1e9, 0, 0, one);
      const cp_pred two = predict(N, R, c, S, o->intra_gbs * 1e9, o->inter_gbs * 1e9, share / 100.0, 1, one);
      const cp_pred full = predict(N, R, c, S, o->intra_gbs * 1e9, o->inter_gbs * 1e9, 1.0, 1, one);
      printf("| %d | %d x %d | %dk | %.3f | %.1f | %.0f%% | %.0f%% | %.1f (%d%%) | %.0f%% | %.0f%% | %.1f | %.0f / %.0f / "
             "%.0f |\n",
             N, N / R, R, L / 1024, c * 1e3, ring.ms, ring.eff, ring.hidden, two.ms, share, two.eff, two.hidden,
             full.ms, mr, mt, mf);
    }
#if defined(ANYATTN_WITH_CP)
  anyattn_context_free(ctx);
#endif
  return 0;
}
