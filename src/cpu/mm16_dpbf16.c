/* mm16_dpbf16.c: the 16-bit products of the tiled path with AVX512-BF16
 * vdpbf16ps (docs/design/cpu.md, "16-bit products"; layouts in isa.h), for
 * CPUs with AVX512-BF16 and no AMX. Compiled with -mavx512bf16 and run only
 * where isa.c found it. */
#include <immintrin.h>

#include "isa.h"

/* 8 rows x 32 keys per block: 16 accumulators, per pair of dims 2 loads of
 * Kt and 8 broadcasts of a q pair for 16 vdpbf16ps; no horizontal sums,
 * since Kt holds keys along the vector. */
static void aa_dp_qk(const uint16_t *Q, int kd, const uint32_t *Kt, int ldk, float *S, int lds, int R32, int nkp) {
  const int kw = kd / 2; /* q pairs per row */
  for (int r = 0; r < R32; r += 8) {
    const uint32_t *q = (const uint32_t *)(Q + (size_t)r * kd);
    for (int n = 0; n < nkp; n += 32) {
      __m512 acc[8][2];
      for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
      for (int i = 0; i < kw; i++) {
        const __m512bh k0 = (__m512bh)_mm512_loadu_si512(Kt + (size_t)i * ldk + n);
        const __m512bh k1 = (__m512bh)_mm512_loadu_si512(Kt + (size_t)i * ldk + n + 16);
        for (int rr = 0; rr < 8; rr++) {
          const __m512bh qb = (__m512bh)_mm512_set1_epi32((int)q[(size_t)rr * kw + i]);
          acc[rr][0] = _mm512_dpbf16_ps(acc[rr][0], qb, k0);
          acc[rr][1] = _mm512_dpbf16_ps(acc[rr][1], qb, k1);
        }
      }
      for (int rr = 0; rr < 8; rr++) {
        _mm512_storeu_ps(S + (size_t)(r + rr) * lds + n, acc[rr][0]);
        _mm512_storeu_ps(S + (size_t)(r + rr) * lds + n + 16, acc[rr][1]);
      }
    }
  }
}

/* 4 rows x 64 dims per block, accumulators in registers across the keys:
 * per pair of keys 4 loads of Vp and 4 broadcasts of a P pair for 16
 * vdpbf16ps. d is a multiple of 32: a last 32-dim block takes half. */
static void aa_dp_pv(const uint16_t *P, int ldp, const uint32_t *Vp, int d, float *O, int R32, int terms, int bn,
                     int nkp) {
  const int pw = ldp / 2; /* P pairs per row */
  for (int r = 0; r < R32; r += 4) {
    const uint32_t *p = (const uint32_t *)(P + (size_t)r * ldp);
    for (int c = 0; c < d; c += 64) {
      const int nv = d - c >= 64 ? 4 : 2;
      __m512 acc[4][4];
      for (int rr = 0; rr < 4; rr++)
        for (int x = 0; x < nv; x++) acc[rr][x] = _mm512_loadu_ps(O + (size_t)(r + rr) * d + c + 16 * x);
      for (int t = 0; t < terms; t++) {
        for (int i = t * bn / 2; i < (t * bn + nkp) / 2; i++) {
          __m512bh v[4];
          for (int x = 0; x < nv; x++) v[x] = (__m512bh)_mm512_loadu_si512(Vp + (size_t)i * d + c + 16 * x);
          for (int rr = 0; rr < 4; rr++) {
            const __m512bh pb = (__m512bh)_mm512_set1_epi32((int)p[(size_t)rr * pw + i]);
            for (int x = 0; x < nv; x++) acc[rr][x] = _mm512_dpbf16_ps(acc[rr][x], pb, v[x]);
          }
        }
      }
      for (int rr = 0; rr < 4; rr++)
        for (int x = 0; x < nv; x++) _mm512_storeu_ps(O + (size_t)(r + rr) * d + c + 16 * x, acc[rr][x]);
    }
  }
}

const aa_mm16_ops *aa_mm16_dpbf16_ops(void) {
  static const aa_mm16_ops ops = {"avx512bf16", 0, 0, aa_dp_qk, aa_dp_pv, 0, 0, 0};
  return &ops;
}
