/* simd.h: the CPU backend's vector vocabulary. One 16-lane fp32 vector
 * type (GCC/Clang vector extensions, so the code is portable and the compiler
 * maps it to one zmm, two ymm or four NEON registers), dtype loads that widen
 * to fp32, a polynomial exp, and the scalar round-to-nearest-even stores. */
#ifndef AA_CPU_SIMD_H
#define AA_CPU_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

#if defined(__F16C__) || defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Without AVX-512, GCC warns that 64-byte vector arguments change the ABI;
 * every helper here is always inlined, so no such call exists. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define AA_VL 16 /* fp32 lanes per vector; head_dim is padded to a multiple */

typedef float aa_vf __attribute__((vector_size(64)));
typedef int32_t aa_vi __attribute__((vector_size(64)));
typedef uint32_t aa_vu __attribute__((vector_size(64)));
typedef uint16_t aa_vh __attribute__((vector_size(32)));
typedef uint8_t aa_vb __attribute__((vector_size(16)));

#define AA_INLINE static inline __attribute__((always_inline))

AA_INLINE aa_vf aa_splat(float x) { return (aa_vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
AA_INLINE aa_vi aa_splati(int32_t x) { return (aa_vi){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
AA_INLINE aa_vi aa_iota(void) { return (aa_vi){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; }

/* Loads and stores of scratch rows (64-byte aligned: the workspace is 256-byte
 * aligned and every scratch row is a multiple of AA_VL floats). */
#if defined(__AVX2__) && !defined(__AVX512F__)
/* Under AVX2, GCC 12 stores a 16-lane vector through the stack in 16-byte
 * pieces; two ymm loads and stores instead (the memcpy is a register move;
 * the unaligned forms cost nothing on aligned rows). */
AA_INLINE aa_vf aa_ld(const float *p) {
  const __m256 h[2] = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  aa_vf v;
  memcpy(&v, h, sizeof v);
  return v;
}
AA_INLINE void aa_st(float *p, aa_vf v) {
  __m256 h[2];
  memcpy(h, &v, sizeof h);
  _mm256_storeu_ps(p, h[0]);
  _mm256_storeu_ps(p + 8, h[1]);
}
#else
AA_INLINE aa_vf aa_ld(const float *p) { return *(const aa_vf *)__builtin_assume_aligned(p, 64); }
AA_INLINE void aa_st(float *p, aa_vf v) { *(aa_vf *)__builtin_assume_aligned(p, 64) = v; }
#endif

/* The register vector: one machine register of fp32 lanes (a zmm under
 * AVX-512, a ymm under AVX2; two q registers of NEON). The hot kernels count
 * their register blocks in it, so that a block fits the ISA's register file:
 * a block of aa_vf sized for AVX-512's 32 zmm is 64 ymm under AVX2's 16, and
 * GCC spills most of it (docs/design/cpu.md, "Register blocks"). AA_VREGS:
 * how many the register file holds. */
#if defined(__AVX512F__)
#define AA_VR 16
#define AA_VREGS 32
#else
#define AA_VR 8
#define AA_VREGS 16
#endif
typedef float aa_vr __attribute__((vector_size(AA_VR * 4)));
typedef uint32_t aa_vru __attribute__((vector_size(AA_VR * 4)));
#if AA_VR == 16
AA_INLINE aa_vr aa_rsplat(float x) { return (aa_vr){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
#else
AA_INLINE aa_vr aa_rsplat(float x) { return (aa_vr){x, x, x, x, x, x, x, x}; }
#endif
/* aligned to the register's size: scratch rows are 64-byte aligned and
 * callers step by whole register vectors */
AA_INLINE aa_vr aa_rld(const float *p) { return *(const aa_vr *)__builtin_assume_aligned(p, AA_VR * 4); }
AA_INLINE void aa_rst(float *p, aa_vr v) { *(aa_vr *)__builtin_assume_aligned(p, AA_VR * 4) = v; }

/* Lane-wise compares (masks: lanes all ones or all zeros), select and
 * maximum. Under AVX2, GCC 12 turns the generic forms (vector operators on
 * 16-lane vectors) into a scalar compare and move per lane: fp32 prefill
 * 1x1024 spent a sixth of its item time in the softmax's maxima. There they
 * run on the two ymm halves instead. aa_max(a, b) is a > b ? a : b, NaN
 * included (vmaxps' rule). */
#if defined(__AVX2__) && !defined(__AVX512F__)
/* op on the two ymm halves of a and b (the memcpys are register moves) */
#define AA_HALVES(T, op, a, b)                   \
  do {                                           \
    __m256 x_[2], y_[2];                         \
    memcpy(x_, &(a), sizeof x_);                 \
    memcpy(y_, &(b), sizeof y_);                 \
    x_[0] = (__m256)op(x_[0], y_[0]);            \
    x_[1] = (__m256)op(x_[1], y_[1]);            \
    T r_;                                        \
    memcpy(&r_, x_, sizeof r_);                  \
    return r_;                                   \
  } while (0)
#define AA_CMP_LT(x, y) _mm256_cmp_ps(x, y, _CMP_LT_OQ)
#define AA_CMP_EQ(x, y) _mm256_cmp_ps(x, y, _CMP_EQ_OQ)
#define AA_ICMP_GT(x, y) _mm256_cmpgt_epi32((__m256i)(x), (__m256i)(y))
#define AA_ICMP_EQ(x, y) _mm256_cmpeq_epi32((__m256i)(x), (__m256i)(y))
AA_INLINE aa_vi aa_lt(aa_vf a, aa_vf b) { AA_HALVES(aa_vi, AA_CMP_LT, a, b); }
AA_INLINE aa_vi aa_eq(aa_vf a, aa_vf b) { AA_HALVES(aa_vi, AA_CMP_EQ, a, b); }
AA_INLINE aa_vi aa_igt(aa_vi a, aa_vi b) { AA_HALVES(aa_vi, AA_ICMP_GT, a, b); }
AA_INLINE aa_vi aa_ieq(aa_vi a, aa_vi b) { AA_HALVES(aa_vi, AA_ICMP_EQ, a, b); }
AA_INLINE aa_vf aa_max(aa_vf a, aa_vf b) { AA_HALVES(aa_vf, _mm256_max_ps, a, b); }
AA_INLINE aa_vf aa_sel(aa_vi mask, aa_vf a, aa_vf b) {
  __m256 x[2], y[2], m[2];
  memcpy(x, &a, sizeof x);
  memcpy(y, &b, sizeof y);
  memcpy(m, &mask, sizeof m);
  x[0] = _mm256_blendv_ps(y[0], x[0], m[0]);
  x[1] = _mm256_blendv_ps(y[1], x[1], m[1]);
  memcpy(&a, x, sizeof a);
  return a;
}
#undef AA_ICMP_EQ
#undef AA_ICMP_GT
#undef AA_CMP_EQ
#undef AA_CMP_LT
#undef AA_HALVES
#else
AA_INLINE aa_vi aa_lt(aa_vf a, aa_vf b) { return a < b; }
AA_INLINE aa_vi aa_eq(aa_vf a, aa_vf b) { return a == b; }
AA_INLINE aa_vi aa_igt(aa_vi a, aa_vi b) { return a > b; }
AA_INLINE aa_vi aa_ieq(aa_vi a, aa_vi b) { return a == b; }
AA_INLINE aa_vf aa_sel(aa_vi mask, aa_vf a, aa_vf b) {
  return (aa_vf)(((aa_vi)a & mask) | ((aa_vi)b & ~mask));
}
/* vmaxps on AVX-512 is this rule exactly (its first operand where greater,
 * else its second: NaN and signed zeros alike), in one instruction where
 * GCC makes a compare and a masked move of the vector expression. */
AA_INLINE aa_vf aa_max(aa_vf a, aa_vf b) {
#if defined(__AVX512F__)
  return (aa_vf)_mm512_max_ps((__m512)a, (__m512)b);
#else
  return aa_sel(a > b, a, b);
#endif
}
#endif
/* lo <= x < hi lane-wise */
AA_INLINE aa_vi aa_in_range(aa_vi x, aa_vi lo, aa_vi hi) { return ~aa_igt(lo, x) & aa_igt(hi, x); }

AA_INLINE float aa_hmax(aa_vf v) {
  float m = v[0];
  for (int i = 1; i < AA_VL; i++) m = v[i] > m ? v[i] : m;
  return m;
}
AA_INLINE float aa_hsum(aa_vf v) {
  aa_vf t = v + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  t = t + __builtin_shufflevector(t, t, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
  t = t + __builtin_shufflevector(t, t, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
  return t[0] + t[1];
}

/* Folds two vectors: lanes whose bit h is clear hold x's (then y's) partial
 * sums of lane L and L+h. Four levels turn 16 vectors into one vector whose
 * lane k is the horizontal sum of input k: 45 ops for 16 dot products
 * instead of 16 separate horizontal sums. */
AA_INLINE aa_vf aa_fold8(aa_vf x, aa_vf y) {
  return __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
         __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}
AA_INLINE aa_vf aa_fold4(aa_vf x, aa_vf y) {
  return __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
         __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
}
AA_INLINE aa_vf aa_fold2(aa_vf x, aa_vf y) {
  return __builtin_shufflevector(x, y, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
         __builtin_shufflevector(x, y, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
}
AA_INLINE aa_vf aa_fold1(aa_vf x, aa_vf y) {
  return __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}
/* The same folds taking the maximum: lane k of the result is the maximum of
 * input k's lanes. */
AA_INLINE aa_vf aa_reduce16_max(const aa_vf a[16]) {
  aa_vf b[8], c[4], d[2];
  for (int i = 0; i < 8; i++)
    b[i] = aa_max(__builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                  __builtin_shufflevector(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                          31));
  for (int i = 0; i < 4; i++)
    c[i] = aa_max(__builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27),
                  __builtin_shufflevector(b[2 * i], b[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30,
                                          31));
  for (int i = 0; i < 2; i++)
    d[i] = aa_max(__builtin_shufflevector(c[2 * i], c[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29),
                  __builtin_shufflevector(c[2 * i], c[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30,
                                          31));
  return aa_max(__builtin_shufflevector(d[0], d[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                __builtin_shufflevector(d[0], d[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
}
AA_INLINE aa_vf aa_reduce16(const aa_vf a[16]) {
  aa_vf b[8], c[4], d[2];
  for (int i = 0; i < 8; i++) b[i] = aa_fold8(a[2 * i], a[2 * i + 1]);
  for (int i = 0; i < 4; i++) c[i] = aa_fold4(b[2 * i], b[2 * i + 1]);
  for (int i = 0; i < 2; i++) d[i] = aa_fold2(c[2 * i], c[2 * i + 1]);
  return aa_fold1(d[0], d[1]);
}

/* aa_reduce16 over register vectors: lane k of the result is the sum of
 * a[k]'s lanes. Under AA_VR 8, three fold levels per eight inputs. */
AA_INLINE aa_vf aa_rreduce16(const aa_vr a[16]) {
#if AA_VR == 16
  return aa_reduce16(a);
#else
  aa_vr h[2];
  for (int g = 0; g < 2; g++) {
    const aa_vr *x = a + 8 * g;
    aa_vr b[4], c[2];
    for (int i = 0; i < 4; i++)
      b[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
             __builtin_shufflevector(x[2 * i], x[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    for (int i = 0; i < 2; i++)
      c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13) +
             __builtin_shufflevector(b[2 * i], b[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15);
    h[g] = __builtin_shufflevector(c[0], c[1], 0, 2, 4, 6, 8, 10, 12, 14) +
           __builtin_shufflevector(c[0], c[1], 1, 3, 5, 7, 9, 11, 13, 15);
  }
  return __builtin_shufflevector(h[0], h[1], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
}

/* Maximum and sum over lanes in four shuffle steps (the scalar loops above
 * are for cold paths; these run once per row per decode key block). */
AA_INLINE aa_vf aa_allmax(aa_vf v) {
  v = aa_max(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = aa_max(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = aa_max(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  return aa_max(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
}
AA_INLINE aa_vf aa_allsum(aa_vf v) {
  v = v + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v = v + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v = v + __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  return v + __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
}

/* Transposes four vectors seen as 4x4 blocks of 4 lanes: out[r] block b =
 * in[b] block r. Eight shuffles (vshuff32x4 / vpermt2ps on AVX-512). */
AA_INLINE void aa_transpose4x4q(const aa_vf in[4], aa_vf out[4]) {
  const aa_vf a = __builtin_shufflevector(in[0], in[1], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const aa_vf b = __builtin_shufflevector(in[0], in[1], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const aa_vf c = __builtin_shufflevector(in[2], in[3], 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const aa_vf d = __builtin_shufflevector(in[2], in[3], 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  out[0] = __builtin_shufflevector(a, c, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  out[1] = __builtin_shufflevector(a, c, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  out[2] = __builtin_shufflevector(b, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  out[3] = __builtin_shufflevector(b, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}

/* One butterfly level of a 16x16 transpose: rows a (bit h of its index clear)
 * and b (set) swap their off-diagonal blocks of h lanes. */
#define AA_TR_LO(h, k) (((k) & (h)) ? 16 + (k) - (h) : (k))
#define AA_TR_HI(h, k) (((k) & (h)) ? 16 + (k) : (k) + (h))
#define AA_TR_LEVEL(h)                                                                                              \
  for (int i = 0; i < 16; i++)                                                                                    \
    if (!(i & (h))) {                                                                                             \
      const aa_vf a = r[i], b = r[i + (h)];                                                                       \
      r[i] = __builtin_shufflevector(a, b, AA_TR_LO(h, 0), AA_TR_LO(h, 1), AA_TR_LO(h, 2), AA_TR_LO(h, 3),          \
                                     AA_TR_LO(h, 4), AA_TR_LO(h, 5), AA_TR_LO(h, 6), AA_TR_LO(h, 7), AA_TR_LO(h, 8), \
                                     AA_TR_LO(h, 9), AA_TR_LO(h, 10), AA_TR_LO(h, 11), AA_TR_LO(h, 12),              \
                                     AA_TR_LO(h, 13), AA_TR_LO(h, 14), AA_TR_LO(h, 15));                             \
      r[i + (h)] = __builtin_shufflevector(a, b, AA_TR_HI(h, 0), AA_TR_HI(h, 1), AA_TR_HI(h, 2), AA_TR_HI(h, 3),    \
                                           AA_TR_HI(h, 4), AA_TR_HI(h, 5), AA_TR_HI(h, 6), AA_TR_HI(h, 7),          \
                                           AA_TR_HI(h, 8), AA_TR_HI(h, 9), AA_TR_HI(h, 10), AA_TR_HI(h, 11),        \
                                           AA_TR_HI(h, 12), AA_TR_HI(h, 13), AA_TR_HI(h, 14), AA_TR_HI(h, 15));     \
    }

/* Transposes 16 vectors in place (r[i] lane j <-> r[j] lane i): the block
 * transpose at 8, 4, 2 and 1 lanes, 64 two-source shuffles. */
AA_INLINE void aa_transpose16(aa_vf r[16]) {
  AA_TR_LEVEL(8)
  AA_TR_LEVEL(4)
  AA_TR_LEVEL(2)
  AA_TR_LEVEL(1)
}
#undef AA_TR_LEVEL
#undef AA_TR_HI
#undef AA_TR_LO

/* exp on 16 lanes, Cephes-style: range reduction by n*ln2 in two parts and a
 * degree-7 polynomial; about 1 ulp. Inputs below -87 give ~1e-38 rather than
 * 0; callers zero masked lanes themselves. */
AA_INLINE aa_vf aa_exp(aa_vf x) {
  const aa_vf lo = aa_splat(-87.0f), hi = aa_splat(88.0f);
  x = aa_sel(aa_lt(x, lo), lo, x);
  x = aa_sel(aa_lt(hi, x), hi, x);
  const aa_vf magic = aa_splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
  aa_vf t = x * aa_splat(1.44269504088896341f) + magic;
  aa_vi n = (aa_vi)t - (aa_vi)magic;
  aa_vf nf = t - magic;
  aa_vf r = x - nf * aa_splat(0.693359375f);
  r = r - nf * aa_splat(-2.12194440e-4f);
  aa_vf p = aa_splat(1.9875691500e-4f);
  p = p * r + aa_splat(1.3981999507e-3f);
  p = p * r + aa_splat(8.3334519073e-3f);
  p = p * r + aa_splat(4.1665795894e-2f);
  p = p * r + aa_splat(1.6666665459e-1f);
  p = p * r + aa_splat(5.0000001201e-1f);
  p = p * (r * r) + r + aa_splat(1.0f);
  return (aa_vf)((aa_vi)p + (n << 23));
}

/* 2^t: t = n + f, |f| <= 1/2, 2^f by Cephes' exp2f polynomial (relative
 * error about 2e-7), times 2^n (vscalefps on AVX-512, else the exponent
 * field); t below -126 gives 2^-126, not 0, and NaN stays NaN on AVX-512. 10
 * ops against aa_exp's 19, for callers that fold log2(e) into an FMA before
 * it. The AVX-512 form is the 16-bit path's (tiled16.c), and aa_rexp2 below
 * the register vector's. */
#if defined(__AVX512F__)
AA_INLINE __m512 aa_exp2_512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-126.0f), x); /* vmaxps returns its second operand for NaN: NaN stays NaN */
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
#endif
/* The softmax's operations on the register vector (aa_vr): compares as
 * GCC's vector operators (one vcmpps or vpcmpgtd on a machine register),
 * select, maximum and 2^t. On AVX2 the 16-lane forms above cost a spill of the
 * loop's running sums through general registers on every key of the prefill
 * softmax (docs/design/cpu.md, fp32 path). aa_rmax(a, b) is aa_max's rule. */
typedef int32_t aa_vri __attribute__((vector_size(AA_VR * 4)));
AA_INLINE aa_vri aa_rspli(int32_t x) { return (aa_vri){0} + x; }
AA_INLINE aa_vr aa_rsel(aa_vri mask, aa_vr a, aa_vr b) {
#if AA_VR == 8 && defined(__AVX2__)
  return (aa_vr)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)mask);
#else
  return (aa_vr)(((aa_vri)a & mask) | ((aa_vri)b & ~mask));
#endif
}
AA_INLINE aa_vr aa_rmax(aa_vr a, aa_vr b) {
#if AA_VR == 16 && defined(__AVX512F__)
  return (aa_vr)_mm512_max_ps((__m512)a, (__m512)b);
#elif AA_VR == 8 && defined(__AVX2__)
  return (aa_vr)_mm256_max_ps((__m256)a, (__m256)b);
#else
  return aa_rsel(a > b, a, b);
#endif
}
/* lo <= x < hi lane-wise */
AA_INLINE aa_vri aa_rin_range(aa_vri x, aa_vri lo, aa_vri hi) { return ~(lo > x) & (hi > x); }
/* 2^t on the register vector (aa_exp2_512's polynomial and clamps above) */
AA_INLINE aa_vr aa_rexp2(aa_vr t) {
#if AA_VR == 16 && defined(__AVX512F__)
  return (aa_vr)aa_exp2_512((__m512)t);
#else
  t = aa_rsel(t < aa_rsplat(-126.0f), aa_rsplat(-126.0f), t);
  t = aa_rsel(aa_rsplat(127.0f) < t, aa_rsplat(127.0f), t);
  const aa_vr magic = aa_rsplat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
  const aa_vr nm = t + magic, nf = nm - magic;
  const aa_vr f = t - nf;
  aa_vr p = aa_rsplat(1.535336188319500e-4f);
  p = p * f + aa_rsplat(1.339887440266574e-3f);
  p = p * f + aa_rsplat(9.618437357674640e-3f);
  p = p * f + aa_rsplat(5.550332471162809e-2f);
  p = p * f + aa_rsplat(2.402264791363012e-1f);
  p = p * f + aa_rsplat(6.931472028550421e-1f);
  p = p * f + aa_rsplat(1.0f);
  return (aa_vr)((aa_vri)p + (((aa_vri)nm - (aa_vri)magic) << 23));
#endif
}

/* Transposes AA_VR register vectors in place (r[i] lane j <-> r[j] lane i).
 * Under AVX2 the 16-lane aa_transpose16 goes through the stack: the prefill
 * items' q transpose took 5% of fp32 prefill 1x1024 there (perf); 8 x 8 by
 * unpacks, shuffles and lane permutes, 24 operations, instead. */
AA_INLINE void aa_rtranspose(aa_vr r[AA_VR]) {
#if AA_VR == 16
  aa_transpose16(r);
#elif defined(__AVX2__)
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps((__m256)r[i], (__m256)r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps((__m256)r[i], (__m256)r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = (aa_vr)_mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = (aa_vr)_mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
#else
  for (int i = 0; i < AA_VR; i++)
    for (int j = i + 1; j < AA_VR; j++) {
      const float x = r[i][j];
      r[i][j] = r[j][i];
      r[j][i] = x;
    }
#endif
}

/* ---- dtype conversions: scalar ones in src/core/dtype.h ------------------- */

/* 16 consecutive elements widened to fp32 (unaligned source). */
AA_INLINE aa_vf aa_load_f32(const float *p) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  return aa_ld(p); /* two unaligned ymm loads */
#else
  aa_vf v;
  memcpy(&v, p, sizeof v);
  return v;
#endif
}
AA_INLINE aa_vf aa_load_bf16(const uint16_t *p) {
#if defined(__AVX512F__)
  /* GCC 12 lowers the generic convert below to two ymm widenings and an
   * insert; one vpmovzxwd zmm is a third of the work in the decode hot loop */
  __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16);
  aa_vf v;
  memcpy(&v, &w, sizeof v);
  return v;
#elif defined(__AVX2__)
  /* the generic form below goes through the stack under AVX2 */
  const __m256i w[2] = {_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 8))), 16)};
  aa_vf v;
  memcpy(&v, w, sizeof v);
  return v;
#else
  aa_vh h;
  memcpy(&h, p, sizeof h);
  return (aa_vf)(__builtin_convertvector(h, aa_vu) << 16);
#endif
}
/* 32 consecutive bf16 as two fp32 vectors without a widening instruction:
 * each 32-bit lane holds a pair, so a shift gives the even elements (2i) and
 * a mask the odd ones (2i+1). Callers keep their fp32 data in that
 * even/odd order (per 32 elements: 16 even, then 16 odd). */
AA_INLINE void aa_load_bf16_pairs(const uint16_t *p, aa_vf *even, aa_vf *odd) {
  aa_vu u;
  memcpy(&u, p, sizeof u);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  *even = (aa_vf)(u & 0xFFFF0000u);
  *odd = (aa_vf)(u << 16);
#else
  *even = (aa_vf)(u << 16);
  *odd = (aa_vf)(u & 0xFFFF0000u);
#endif
}
AA_INLINE aa_vf aa_load_f16(const uint16_t *p) {
#if defined(__AVX512F__)
  aa_vf v;
  __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
  memcpy(&v, &w, sizeof v);
  return v;
#elif defined(__F16C__)
  __m256 w[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)))};
  aa_vf v;
  memcpy(&v, w, sizeof v);
  return v;
#else
  aa_vf v;
  for (int i = 0; i < AA_VL; i++) v[i] = aa_f16_to_f32(p[i]);
  return v;
#endif
}

/* 16 fp8 E4M3 codes widened to fp32, exactly (the vector form of
 * aa_fp8_to_f32 in dtype.h; fnuz as there, a constant at every call). */
AA_INLINE aa_vf aa_load_fp8(const uint8_t *p, const int fnuz) {
  aa_vu c;
#if defined(__AVX512F__)
  /* GCC 12 lowers the generic widening below to 16 single-lane inserts */
  const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
  memcpy(&c, &w, sizeof c);
#elif defined(__AVX2__)
  const __m256i w[2] = {_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)),
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8)))};
  memcpy(&c, w, sizeof c);
#else
  aa_vb b;
  memcpy(&b, p, sizeof b);
  c = __builtin_convertvector(b, aa_vu);
#endif
  const aa_vu sign = (c & 0x80u) << 24, mag = c & 0x7Fu;
  const aa_vu normal = (mag << 20) + (fnuz ? 119u << 23 : 120u << 23);
  const aa_vf subf = __builtin_convertvector((aa_vi)mag, aa_vf) * aa_splat(fnuz ? 0.0009765625f : 0.001953125f);
  aa_vu bits = (aa_vu)aa_sel(aa_ieq((aa_vi)(mag >> 3), aa_splati(0)), subf, (aa_vf)normal);
  const aa_vi nan = fnuz ? aa_ieq((aa_vi)c, aa_splati(0x80)) : aa_ieq((aa_vi)mag, aa_splati(0x7F));
  bits = (aa_vu)aa_sel(nan, (aa_vf)aa_splati(0x7FC00000), (aa_vf)bits);
  return (aa_vf)(bits | sign);
}

/* ---- fp8 codes for the fused decode path (decode.c) ----------------------
 * The fp16 bit pattern (c & 0x80) << 8 | (c & 0x7F) << 7 of an E4M3 code c
 * has the code's exponent field under fp16's bias of 15 and its mantissa on
 * top of fp16's, so it is the code's value times 2^-8 (e4m3fn, bias 7) or
 * 2^-7 (fnuz, bias 8) for every finite code: subnormal codes land on fp16
 * subnormals with the same factor, and vcvtph2ps widens those exactly. Three
 * integer ops and a widening per 16 codes instead of aa_load_fp8's dozen;
 * the caller folds the power of two into a descale. NaN codes (e4m3fn 0x7F
 * and 0xFF, fnuz 0x80) would read as +-1.875 and 0 there, so with nan set
 * their lanes become NaN (two or three ops more): decode.c asks for that only
 * in key blocks where its scan (aa_dec_scan) saw a NaN code. */
#if defined(__AVX512BW__)
#define AA_FP8_F16 1
/* 32 codes' signed bytes as words (sign-extended, so bit 15 is the sign). */
AA_INLINE __m512i aa_fp8_words32(const uint8_t *p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
/* Lanes of w (aa_fp8_words32) that hold a NaN code. */
AA_INLINE __mmask32 aa_fp8_nan32(__m512i w, const int fnuz) {
  if (fnuz) return _mm512_cmpeq_epi16_mask(w, _mm512_set1_epi16(-128));
  return _mm512_cmpeq_epi16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7F));
}
/* 32 codes as fp32 in natural order, times 2^-8 (e4m3fn) or 2^-7 (fnuz). */
AA_INLINE void aa_load_fp8x32_f16(const uint8_t *p, const int fnuz, const int nan, aa_vf *lo, aa_vf *hi) {
  const __m512i w = aa_fp8_words32(p);
  __m512i h = _mm512_and_si512(_mm512_slli_epi16(w, 7), _mm512_set1_epi16((short)0xBF80));
  if (nan) h = _mm512_mask_mov_epi16(h, aa_fp8_nan32(w, fnuz), _mm512_set1_epi16(0x7E00));
  const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(h)), b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  memcpy(lo, &a, sizeof a);
  memcpy(hi, &b, sizeof b);
}
/* 32 codes as exact bf16 (no factor), in natural order: a normal code is its
 * fields shifted under bf16's and the exponent rebiased (one add); the
 * subnormal codes (exponent field 0, zeros included) take their value m *
 * 2^-9 (fnuz 2^-10) from an 8-entry table through vpermw, whose index is the
 * low 5 bits of the word, m there; the sign is ORed in last. */
AA_INLINE __m512i aa_load_fp8x32_bf16(const uint8_t *p, const int fnuz, const int nan) {
  const __m512i w = aa_fp8_words32(p);
  __m512i r = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x07F0)),
                               _mm512_set1_epi16(fnuz ? 119 << 7 : 120 << 7));
  /* bf16 of m * 2^-10 (fnuz) and m * 2^-9, m = 7 .. 0 */
  const __m512i sub = fnuz ? _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              0x3BE0, 0x3BC0, 0x3BA0, 0x3B80, 0x3B40, 0x3B00, 0x3A80, 0)
                           : _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              0x3C60, 0x3C40, 0x3C20, 0x3C00, 0x3BC0, 0x3B80, 0x3B00, 0);
  r = _mm512_mask_permutexvar_epi16(r, _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x78)), w, sub);
  r = _mm512_ternarylogic_epi32(r, w, _mm512_set1_epi16((short)0x8000), 0xF8); /* r | (w & 0x8000) */
  if (nan) r = _mm512_mask_mov_epi16(r, aa_fp8_nan32(w, fnuz), _mm512_set1_epi16(0x7FC0));
  return r;
}
#else
#define AA_FP8_F16 0
#endif
/* The same fp16 pattern 8 codes at a time for builds with ymm register
 * vectors (AVX2 and F16C, no AVX-512): four integer ops and a widening per
 * register instead of aa_load_fp8's dozen per 16 codes. */
#if AA_VR == 8 && defined(__AVX2__) && defined(__F16C__)
#define AA_FP8_F16R 1
AA_INLINE aa_vr aa_load_fp8x8_f16(const uint8_t *p, const int fnuz, const int nan) {
  const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)p)); /* sign-extended words */
  __m128i h = _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16((short)0xBF80));
  if (nan) {
    const __m128i m = fnuz ? _mm_cmpeq_epi16(w, _mm_set1_epi16(-128))
                           : _mm_cmpeq_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7F)), _mm_set1_epi16(0x7F));
    h = _mm_blendv_epi8(h, _mm_set1_epi16(0x7E00), m);
  }
  const __m256 f = _mm256_cvtph_ps(h);
  aa_vr v;
  memcpy(&v, &f, sizeof v);
  return v;
}
#else
#define AA_FP8_F16R 0
#endif

#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
#define AA_FP8_VBMI 1
/* 64 codes' exact bf16 (no factor) as its low bytes (*blo) and high bytes
 * (*bhi), from two byte lookups in 128-entry tables (vpermt2b over two
 * registers, the index the code's low 7 bits; e4m3fn's 0x7F is NaN there)
 * and the sign ORed into the high byte: three ops per 64 codes. With nan
 * set, fnuz's NaN code 0x80 (sign over a zero magnitude) becomes NaN too. */
AA_INLINE void aa_load_fp8x64_bytes(const uint8_t *p, const int fnuz, const int nan, __m512i *blo, __m512i *bhi) {
  /* [format][low byte, high byte][magnitude] */
  static const uint8_t tab[2][2][128] __attribute__((aligned(64))) = {
      {
          {
              0x00, 0x00, 0x80, 0xC0, 0x00, 0x20, 0x40, 0x60, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0,
              0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xC0,
          },
          {
              0x00, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C,
              0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D,
              0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E,
              0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F,
              0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
              0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41,
              0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
              0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x7F,
          },
      },
      {
          {
              0x00, 0x80, 0x00, 0x40, 0x80, 0xA0, 0xC0, 0xE0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
          },
          {
              0x00, 0x3A, 0x3B, 0x3B, 0x3B, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C,
              0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3C, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D,
              0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3D, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E,
              0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3E, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F,
              0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
              0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41,
              0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
              0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43,
          },
      },
  };
  const uint8_t(*t)[128] = tab[fnuz ? 1 : 0];
  const __m512i c = _mm512_loadu_si512(p);
  __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(t[0]), c, _mm512_load_si512(t[0] + 64));
  __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(t[1]), c, _mm512_load_si512(t[1] + 64));
  hi = _mm512_ternarylogic_epi32(hi, c, _mm512_set1_epi8((char)0x80), 0xF8); /* hi | (c & 0x80) */
  if (nan && fnuz) {                                                         /* 0x7FC0, a NaN */
    const __mmask64 k = _mm512_cmpeq_epi8_mask(c, _mm512_set1_epi8((char)0x80));
    lo = _mm512_mask_mov_epi8(lo, k, _mm512_set1_epi8((char)0xC0));
    hi = _mm512_mask_mov_epi8(hi, k, _mm512_set1_epi8(0x7F));
  }
  *blo = lo;
  *bhi = hi;
}
/* The same bytes interleaved into bf16 words: five ops per 64 codes against
 * seven per 32 in aa_load_fp8x32_bf16. The interleave works within 128-bit
 * lanes, so the words come out permuted: *w0 holds codes 16L + 0..7 and *w1
 * codes 16L + 8..15 of each lane L (aa_fp8_vbmi_pos). */
AA_INLINE void aa_load_fp8x64_vbmi(const uint8_t *p, const int fnuz, const int nan, __m512i *w0, __m512i *w1) {
  __m512i lo, hi;
  aa_load_fp8x64_bytes(p, fnuz, nan, &lo, &hi);
  *w0 = _mm512_unpacklo_epi8(lo, hi);
  *w1 = _mm512_unpackhi_epi8(lo, hi);
}
/* Where code r (0..63) of a 64-code group lands among aa_load_fp8x64_vbmi's
 * 64 words (*w0's 32, then *w1's). */
AA_INLINE int aa_fp8_vbmi_pos(int r) { return ((r >> 3) & 1) * 32 + (r >> 4) * 8 + (r & 7); }
#else
#define AA_FP8_VBMI 0
#endif

#endif /* AA_CPU_SIMD_H */
