/* test_cpu_mm16.c: the CPU tiled path's 16-bit product kernels (src/cpu/isa.h:
 * AVX512-BF16 and AMX) against a double-precision reference of the same
 * products, on fresh random bf16 inputs (seed printed; ANYATTN_SEED repeats
 * it), for each kernel this machine runs; and the ISA choice of isa.c.
 *   test_cpu_mm16                 the kernel tests (exit 77 when no 16-bit kernel runs here)
 *   test_cpu_mm16 --supported X   exit 0 when ANYATTN_CPU_ISA=X runs here, else 77 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa.h"
#include "tl_check.h"
#include "tl_util.h"

static uint16_t bf16_of(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static double of_bf16(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* S = Q . K^T with K given as Kt pairs; fp32 accumulation of exact bf16
 * products, so the bound is a few ulps of sum |q k| per term. */
static void test_qk(const aa_mm16_ops *ops, int R32, int kd, int nkp, int ldk, uint64_t *rng) {
  uint16_t *Q = aligned_alloc(64, (size_t)R32 * kd * 2), *K = malloc((size_t)nkp * kd * 2);
  uint32_t *Kt = aligned_alloc(64, (size_t)kd / 2 * ldk * 4);
  float *S = aligned_alloc(64, (size_t)R32 * ldk * 4);
  for (int i = 0; i < R32 * kd; i++) Q[i] = bf16_of(tl_rng_normal(rng));
  for (int i = 0; i < nkp * kd; i++) K[i] = bf16_of(tl_rng_normal(rng));
  for (int i = 0; i < kd / 2; i++)
    for (int n = 0; n < nkp; n++) Kt[(size_t)i * ldk + n] = K[n * kd + 2 * i] | (uint32_t)K[n * kd + 2 * i + 1] << 16;
  for (int i = 0; i < R32 * ldk; i++) S[i] = NAN;
  if (ops->begin) ops->begin();
  ops->qk(Q, kd, Kt, ldk, S, ldk, R32, nkp);
  if (ops->end) ops->end();
  int bad = 0;
  for (int r = 0; r < R32 && !bad; r++)
    for (int n = 0; n < nkp && !bad; n++) {
      double ref = 0, mag = 0;
      for (int e = 0; e < kd; e++) {
        ref += of_bf16(Q[r * kd + e]) * of_bf16(K[n * kd + e]);
        mag += fabs(of_bf16(Q[r * kd + e]) * of_bf16(K[n * kd + e]));
      }
      const double got = S[(size_t)r * ldk + n];
      if (!(fabs(got - ref) <= 1e-6 * mag + 1e-30)) {
        bad = 1;
        EXPECT(0, "%s qk R32 %d kd %d nkp %d: S[%d][%d] = %.9g, reference %.9g", ops->name, R32, kd, nkp, r, n, got,
               ref);
      }
    }
  EXPECT(!bad, "%s qk", ops->name);
  free(Q);
  free(K);
  free(Kt);
  free(S);
}

/* O += sum over terms of P . V with V given as Vp pairs. */
static void test_pv(const aa_mm16_ops *ops, int R32, int d, int terms, int bn, int nkp, uint64_t *rng) {
  const int ldp = terms * bn;
  uint16_t *P = aligned_alloc(64, (size_t)R32 * ldp * 2), *V = malloc((size_t)terms * bn * d * 2);
  uint32_t *Vp = aligned_alloc(64, (size_t)terms * bn / 2 * d * 4);
  float *O = aligned_alloc(64, (size_t)R32 * d * 4);
  double *O0 = malloc((size_t)R32 * d * sizeof(double));
  for (int i = 0; i < R32 * ldp; i++) P[i] = bf16_of(tl_rng_uniform(rng));
  for (int i = 0; i < terms * bn * d; i++) V[i] = bf16_of(tl_rng_normal(rng));
  for (int i = 0; i < terms * bn / 2; i++)
    for (int c = 0; c < d; c++) Vp[(size_t)i * d + c] = V[(2 * i) * d + c] | (uint32_t)V[(2 * i + 1) * d + c] << 16;
  for (int i = 0; i < R32 * d; i++) O[i] = (float)(O0[i] = tl_rng_normal(rng));
  if (ops->begin) ops->begin();
  ops->pv(P, ldp, Vp, d, O, R32, terms, bn, nkp);
  if (ops->end) ops->end();
  int bad = 0;
  for (int r = 0; r < R32 && !bad; r++)
    for (int c = 0; c < d && !bad; c++) {
      double ref = O0[r * d + c], mag = fabs(ref);
      for (int t = 0; t < terms; t++)
        for (int k = t * bn; k < t * bn + nkp; k++) {
          ref += of_bf16(P[r * ldp + k]) * of_bf16(V[k * d + c]);
          mag += fabs(of_bf16(P[r * ldp + k]) * of_bf16(V[k * d + c]));
        }
      const double got = O[r * d + c];
      if (!(fabs(got - ref) <= 1e-6 * mag + 1e-30)) {
        bad = 1;
        EXPECT(0, "%s pv R32 %d d %d terms %d nkp %d: O[%d][%d] = %.9g, reference %.9g", ops->name, R32, d, terms,
               nkp, r, c, got, ref);
      }
    }
  EXPECT(!bad, "%s pv", ops->name);
  free(P);
  free(V);
  free(Vp);
  free(O);
  free(O0);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--supported")) {
    for (int i = 0; i < AA_CPU_ISA_COUNT; i++)
      if (!strcmp(argv[2], aa_cpu_isa_name((aa_cpu_isa)i))) return aa_cpu_isa_supported((aa_cpu_isa)i) ? 0 : 77;
    fprintf(stderr, "test_cpu_mm16: unknown ISA '%s'\n", argv[2]);
    return 2;
  }
  const char *env = getenv("ANYATTN_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  printf("seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed, (unsigned long long)seed);
  uint64_t rng = seed;

  /* The choice: fp32 inputs, head dims that are not multiples of 8 and those
   * that would pad to twice their length stay on fp32 FMA; bf16 at 80 (padded
   * to 96) takes what bf16 at 128 takes; fp16 takes AMX only; a forced
   * unknown name fails the plan. */
  aa_cpu_isa isa, at128;
  unsetenv("ANYATTN_CPU_ISA");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_F32, 128, &isa) == ANYATTN_STATUS_OK && isa == AA_CPU_ISA_FP32, "fp32");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 128, &at128) == ANYATTN_STATUS_OK, "d 128");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 80, &isa) == ANYATTN_STATUS_OK && isa == at128, "d 80");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 37, &isa) == ANYATTN_STATUS_OK && isa == AA_CPU_ISA_FP32, "d 37");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 16, &isa) == ANYATTN_STATUS_OK && isa == AA_CPU_ISA_FP32, "d 16");
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_F16, 128, &isa) == ANYATTN_STATUS_OK &&
             isa == (aa_cpu_isa_supported(AA_CPU_ISA_AMX) ? AA_CPU_ISA_AMX : AA_CPU_ISA_FP32),
         "fp16");
  setenv("ANYATTN_CPU_ISA", "avx1024", 1);
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 128, &isa) == ANYATTN_STATUS_UNSUPPORTED_CONFIG, "unknown name");
  setenv("ANYATTN_CPU_ISA", "fp32", 1);
  EXPECT(aa_cpu_isa_choose(ANYATTN_DTYPE_BF16, 128, &isa) == ANYATTN_STATUS_OK && isa == AA_CPU_ISA_FP32, "forced");
  unsetenv("ANYATTN_CPU_ISA");

  int ran = 0;
#if defined(ANYATTN_CPU_MM16)
  const struct {
    aa_cpu_isa isa;
    const aa_mm16_ops *(*ops)(void);
  } kernels[] = {{AA_CPU_ISA_AVX512BF16, aa_mm16_dpbf16_ops}, {AA_CPU_ISA_AMX, aa_mm16_amx_ops}};
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
    if (!aa_cpu_isa_supported(kernels[k].isa)) {
      printf("SKIP %s: this CPU does not run it\n", aa_cpu_isa_name(kernels[k].isa));
      continue;
    }
    const aa_mm16_ops *ops = kernels[k].ops();
    const int before = failures;
    for (int R32 = 32; R32 <= 96; R32 += 32)
      for (int kd = 32; kd <= 384; kd *= 2 + (kd == 128))
        for (int nkp = 32; nkp <= 64; nkp += 32) test_qk(ops, R32, kd, nkp, 64, &rng);
    for (int R32 = 32; R32 <= 64; R32 += 32)
      for (int d = 32; d <= 256; d *= 2)
        for (int terms = 1; terms <= 3; terms += 2)
          for (int nkp = 32; nkp <= 64; nkp += 32) test_pv(ops, R32, d, terms, 64, nkp, &rng);
    printf("%s %s\n", failures == before ? "PASS" : "FAIL", ops->name);
    ran++;
  }
#endif
  printf("%d checks, %d failed\n", checks, failures);
  if (failures) return 1;
  return ran ? 0 : 77;
}
