/* test_cpu_f32.c: the fp32 prefill kernels of the CPU tiled path (src/cpu/
 * tiled.c, included here so that its static kernels are reachable, built
 * with the library's CPU flags) against a double-precision reference, on
 * fresh random inputs (seed printed; ANYATTN_SEED repeats it): the score
 * blocks from K rows and transposed q, P.V from transposed probabilities,
 * and aa_rexp2 (simd.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiled.c"
#include "tl_check.h"
#include "tl_util.h"

static float *alloc_f(size_t n) { return aligned_alloc(64, aa_round_up(n * sizeof(float), 64)); }

/* The row block of aa_tile_scores_t that holds row r: 64, 32, then 16 rows
 * under AVX-512 (4, 2, 1 register vectors), 16 under AVX2. */
static void row_block(int R16, int r, int *b0, int *bw) {
  const int w[3] = {4 * AA_VR, 2 * AA_VR, AA_VR};
  int at = 0;
  for (int k = AA_VREGS >= 32 ? 0 : 1; k < (AA_VREGS >= 32 ? 3 : 2); k++)
    for (; at + w[k] <= R16; at += w[k])
      if (r < at + w[k]) {
        *b0 = at;
        *bw = w[k];
        return;
      }
}

/* St[j][r] = K[j] . Qt[:, r] for nkp keys (each row its own allocation, as
 * cache rows are) and R16 rows, Qt and St ls floats a row: an fp32 sum of d
 * products, so the bound is d units of fp32 rounding of sum |q k|; rows
 * R16..ls of St stay as they were. causal: row r sees keys [0, r / 4 + 1)
 * of the tile (4 q heads a token), so each block of rows needs only the keys
 * its last row sees, rounded up to 4 (aa_rows_keys): those are checked, and
 * the rest of the block's scores must stay unwritten. */
static void test_scores(int R16, int ls, int d, int nkp, int causal, uint64_t *rng) {
  float *Qt = alloc_f((size_t)d * ls), *St = alloc_f((size_t)nkp * ls);
  float *K[AA_CPU_MAX_BN];
  for (int i = 0; i < d * ls; i++) Qt[i] = (float)tl_rng_normal(rng);
  for (int j = 0; j < nkp; j++) {
    K[j] = malloc((size_t)d * sizeof(float));
    for (int c = 0; c < d; c++) K[j][c] = (float)tl_rng_normal(rng);
  }
  for (int i = 0; i < nkp * ls; i++) St[i] = NAN;
  int32_t lo[128], hi[128];
  for (int r = 0; r < R16; r++) {
    lo[r] = 0;
    hi[r] = causal ? r / 4 + 1 : nkp;
  }
  aa_tile_scores_t(R16, ls, d, (const float *const *)K, Qt, St, nkp, lo, hi, R16, 0, nkp);
  int bad = 0;
  for (int j = 0; j < nkp && !bad; j++) {
    for (int r = 0; r < R16 && !bad; r++) {
      int b0 = 0, bw = 0;
      row_block(R16, r, &b0, &bw);
      int need = causal ? ((b0 + bw - 1) / 4 + 1 + 3) / 4 * 4 : nkp;
      if (need > nkp) need = nkp;
      if (j >= need) {
        if (!isnan(St[(size_t)j * ls + r])) {
          bad = 1;
          EXPECT(0, "scores R16 %d ls %d d %d nkp %d causal: St[%d][%d] past the block's keys written", R16, ls, d,
                 nkp, j, r);
        }
        continue;
      }
      double ref = 0, mag = 0;
      for (int c = 0; c < d; c++) {
        ref += (double)K[j][c] * Qt[(size_t)c * ls + r];
        mag += fabs((double)K[j][c] * Qt[(size_t)c * ls + r]);
      }
      const double got = St[(size_t)j * ls + r];
      if (!(fabs(got - ref) <= d * 0x1p-24 * mag + 1e-30)) {
        bad = 1;
        EXPECT(0, "scores R16 %d ls %d d %d nkp %d: St[%d][%d] = %.9g, reference %.9g", R16, ls, d, nkp, j, r, got,
               ref);
      }
    }
    for (int r = R16; r < ls && !bad; r++)
      if (!isnan(St[(size_t)j * ls + r])) {
        bad = 1;
        EXPECT(0, "scores R16 %d ls %d d %d nkp %d: St[%d][%d] (past the rows) written", R16, ls, d, nkp, j, r);
      }
  }
  EXPECT(!bad, "scores R16 %d ls %d d %d nkp %d causal %d", R16, ls, d, nkp, causal);
  for (int j = 0; j < nkp; j++) free(K[j]);
  free(Qt);
  free(St);
}

/* acc[r] = acc[r] alpha[r] + sum_j Pt[j][r] V[j] for R4 rows (6-row calls,
 * then 4-row ones, as aa_cpu_item_t makes them; Pt pad floats a row past R4
 * rounded up to AA_VL), with prefetch lines handed in: nk + 1 roundings of
 * sum |terms|. */
static void test_pv(int R4, int pad, int dp, int nk, uint64_t *rng) {
  const int ldp = (int)aa_round_up((size_t)R4, AA_VL) + pad;
  float *Pt = alloc_f((size_t)nk * ldp), *V = alloc_f((size_t)nk * dp), *acc = alloc_f((size_t)R4 * dp);
  float *alpha = alloc_f((size_t)ldp);
  double *acc0 = malloc((size_t)R4 * dp * sizeof(double));
  for (int i = 0; i < nk * ldp; i++) Pt[i] = (float)tl_rng_uniform(rng);
  for (int i = 0; i < nk * dp; i++) V[i] = (float)tl_rng_normal(rng);
  for (int i = 0; i < R4 * dp; i++) acc0[i] = acc[i] = (float)tl_rng_normal(rng);
  for (int r = 0; r < R4; r++) alpha[r] = r % 3 ? (float)tl_rng_uniform(rng) : 1.0f;
  const char *pl[16];
  for (int i = 0; i < 16; i++) pl[i] = (const char *)(V + (size_t)i * 16 % ((size_t)nk * dp));
  const int n6 = R4 / 6 / 2 * 2 * 6;
  for (int r = 0; r < R4; r += r < n6 ? 6 : 4) {
    if (r < n6) aa_pv_t_rows6(acc + (size_t)r * dp, dp, alpha + r, Pt + r, ldp, V, nk, pl, 16);
    else aa_pv_t_rows4(acc + (size_t)r * dp, dp, alpha + r, Pt + r, ldp, V, nk, pl, 16);
  }
  int bad = 0;
  for (int r = 0; r < R4 && !bad; r++)
    for (int c = 0; c < dp && !bad; c++) {
      double ref = acc0[(size_t)r * dp + c] * alpha[r], mag = fabs(ref);
      for (int j = 0; j < nk; j++) {
        ref += (double)Pt[(size_t)j * ldp + r] * V[(size_t)j * dp + c];
        mag += fabs((double)Pt[(size_t)j * ldp + r] * V[(size_t)j * dp + c]);
      }
      const double got = acc[(size_t)r * dp + c];
      if (!(fabs(got - ref) <= (nk + 1) * 0x1p-24 * mag + 1e-30)) {
        bad = 1;
        EXPECT(0, "pv R4 %d ldp %d dp %d nk %d: acc[%d][%d] = %.9g, reference %.9g", R4, ldp, dp, nk, r, c, got,
               ref);
      }
    }
  EXPECT(!bad, "pv R4 %d ldp %d dp %d nk %d", R4, ldp, dp, nk);
  free(Pt);
  free(V);
  free(acc);
  free(alpha);
  free(acc0);
}

/* aa_rexp2 on [-126, 10] within 3 units of fp32 rounding of 2^t; NaN stays NaN on AVX-512. */
static void test_exp2(uint64_t *rng) {
  double worst = 0;
  for (int i = 0; i < 1 << 17; i++) {
    aa_vr t;
    for (int k = 0; k < AA_VR; k++) t[k] = (float)(-126.0 + 136.0 * tl_rng_uniform(rng));
    if (i == 0) t[0] = -126.0f, t[1] = 0.0f, t[2] = 0.5f, t[3] = -0.5f;
    const aa_vr p = aa_rexp2(t);
    for (int k = 0; k < AA_VR; k++) {
      const double ref = exp2((double)t[k]), err = fabs(p[k] - ref) / ref;
      worst = err > worst ? err : worst;
    }
  }
  EXPECT(worst <= 3 * 0x1p-24, "exp2: worst relative error %.3g", worst);
  printf("exp2: worst relative error %.3g (%.2f units of 2^-24)\n", worst, worst / 0x1p-24);
#if defined(__AVX512F__)
  EXPECT(isnan(aa_rexp2(aa_rsplat(NAN))[0]), "exp2(NaN)");
#endif
}

int main(void) {
  const char *env = getenv("ANYATTN_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  printf("seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed, (unsigned long long)seed);
  uint64_t rng = seed;
  for (int R16 = 16; R16 <= 128; R16 += 16)
    for (int d = 16; d <= 256; d *= 2)
      for (int nkp = 4; nkp <= 64; nkp += 12) {
        test_scores(R16, R16, d, nkp, 0, &rng);
        test_scores(R16, R16 + AA_LS_PAD, d, nkp, 0, &rng);
        test_scores(R16, R16 + AA_LS_PAD, d, nkp, 1, &rng);
      }
  for (int R4 = 4; R4 <= 128; R4 += R4 < 16 ? 4 : 28)
    for (int dp = 16; dp <= 256; dp *= 2)
      for (int nk = 1; nk <= 64; nk += 21) {
        test_pv(R4, 0, dp, nk, &rng);
        test_pv(R4, AA_LS_PAD, dp, nk, &rng);
      }
  test_exp2(&rng);
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
