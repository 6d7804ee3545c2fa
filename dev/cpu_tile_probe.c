/* cpu_tile_probe.c: the fp32 prefill tile of src/cpu/tiled.c (scores, softmax,
 * P.V of 128 rows x 64 keys at head dim 128, q and scores AA_LS_PAD floats a
 * row longer than 128, as the library lays them) on scratch that stays in L1/L2,
 * timed in thread CPU time against an FMA loop measured in the same process:
 * the share of the FMA ceiling the tile reaches with no K/V traffic, and each
 * of its three parts timed alone (scores and P.V as shares of the ceiling for
 * their half of the FLOPs). The FMA loop runs on the register vector (aa_vr),
 * so the probe builds under AVX2 and AVX-512 alike. Run one
 * copy, then two at once (one per core) to see what the cores take from each
 * other that the FMA ceiling does not show.
 *   cc -O3 -march=native -ffp-contract=fast -fopenmp -Iinclude -Isrc/core -Isrc/cpu -Isrc \
 *      -o /tmp/cpu_tile_probe dev/cpu_tile_probe.c -lm
 *   /tmp/cpu_tile_probe [reps]; /tmp/cpu_tile_probe & /tmp/cpu_tile_probe */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tiled.c"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static volatile float sink;

/* The FMA ceiling of tools/cpu_ceilings.c on this thread: 12 chains. */
static double fma_peak(void) {
  aa_vr acc[12], mul = aa_rsplat(0.99999f), add = aa_rsplat(1e-5f);
  for (int c = 0; c < 12; c++) acc[c] = add * (float)c;
  const long iters = 20000000;
  const double t0 = now();
  for (long i = 0; i < iters; i++) {
    __asm__ volatile("" : "+v"(mul));
#pragma GCC unroll 16
    for (int c = 0; c < 12; c++) acc[c] = acc[c] * mul + add;
  }
  const double t = now() - t0;
  aa_vr s = acc[0];
  for (int c = 1; c < 12; c++) s += acc[c];
  sink = s[0];
  return 2.0 * AA_VR * 12 * iters / t * 1e-9;
}

static float *alloc_rand(size_t n) {
  float *p = aligned_alloc(256, aa_round_up(n * sizeof(float), 256));
  for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
  return p;
}

int main(int argc, char **argv) {
  enum { R16 = 128, NK = 64, D = 128, LS = R16 + AA_LS_PAD };
  const int reps = argc > 1 ? atoi(argv[1]) : 2000;
  float *Qt = alloc_rand((size_t)D * LS), *K = alloc_rand((size_t)NK * D), *V = alloc_rand((size_t)NK * D);
  float *St = alloc_rand((size_t)NK * LS), *acc = alloc_rand((size_t)R16 * D);
  float *m = alloc_rand(R16), *l = alloc_rand(R16), *alpha = alloc_rand(R16);
  int32_t lo[R16], hi[R16];
  const float *kp[NK];
  for (int j = 0; j < NK; j++) kp[j] = K + (size_t)j * D;
  for (int r = 0; r < R16; r++) lo[r] = 0, hi[r] = 1 << 20;
  anyattn_plan plan;
  anyattn_args a;
  aa_cpu_job job;
  memset(&plan, 0, sizeof plan);
  memset(&a, 0, sizeof a);
  memset(&job, 0, sizeof job);
  job.plan = &plan;
  job.a = &a;
  job.group = 4;
  job.d = D;
  job.L.dp = D;
  const double peak = fma_peak(), flops = 4.0 * R16 * NK * D;
  const int n6 = R16 / 6 / 2 * 2 * 6;
  double best = 1e9;
  for (int pass = 0; pass < 5; pass++) {
    const double t0 = now();
    for (int i = 0; i < reps; i++) {
      aa_tile_scores_t(R16, LS, D, kp, Qt, St, NK, lo, hi, R16, 0, NK);
      for (int r = 0; r < R16; r++) m[r] = 4.0f, l[r] = 1.0f;
      aa_tile_softmax_t(&job, R16, R16, LS, St, m, l, alpha, lo, hi, 0, NK, 0, 0);
      for (int r = 0; r < R16; r += r < n6 ? 6 : 4) {
        if (r < n6) aa_pv_t_rows6(acc + (size_t)r * D, D, alpha + r, St + r, LS, V, NK, NULL, 0);
        else aa_pv_t_rows4(acc + (size_t)r * D, D, alpha + r, St + r, LS, V, NK, NULL, 0);
      }
    }
    const double t = (now() - t0) / reps;
    best = t < best ? t : best;
  }
  /* each part alone, best of five passes */
  double part[3] = {1e9, 1e9, 1e9};
  for (int pass = 0; pass < 5; pass++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) aa_tile_scores_t(R16, LS, D, kp, Qt, St, NK, lo, hi, R16, 0, NK);
    double t = (now() - t0) / reps;
    part[0] = t < part[0] ? t : part[0];
    t0 = now();
    for (int i = 0; i < reps; i++) {
      for (int r = 0; r < R16; r++) m[r] = 4.0f, l[r] = 1.0f;
      aa_tile_softmax_t(&job, R16, R16, LS, St, m, l, alpha, lo, hi, 0, NK, 0, 0);
    }
    t = (now() - t0) / reps;
    part[1] = t < part[1] ? t : part[1];
    t0 = now();
    for (int i = 0; i < reps; i++)
      for (int r = 0; r < R16; r += r < n6 ? 6 : 4) {
        if (r < n6) aa_pv_t_rows6(acc + (size_t)r * D, D, alpha + r, St + r, LS, V, NK, NULL, 0);
        else aa_pv_t_rows4(acc + (size_t)r * D, D, alpha + r, St + r, LS, V, NK, NULL, 0);
      }
    t = (now() - t0) / reps;
    part[2] = t < part[2] ? t : part[2];
  }
  printf("scores %.2f us (%.1f%% of the ceiling), softmax %.2f us, P.V %.2f us (%.1f%%)\n", part[0] * 1e6,
         flops / 2 / part[0] * 1e-9 / peak * 100, part[1] * 1e6, part[2] * 1e6, flops / 2 / part[2] * 1e-9 / peak * 100);
  printf("FMA ceiling %.1f GFLOP/s; tile %.2f us, %.1f GFLOP/s, %.1f%% of it\n", peak, best * 1e6,
         flops / best * 1e-9, flops / best * 1e-9 / peak * 100);
  return 0;
}
