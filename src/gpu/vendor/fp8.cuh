/* fp8.cuh: FP8 E4M3 cache codes to the 16-bit compute type, exactly, without
 * fp8 hardware (every vendor's fallback; tile_nv.cuh uses the sm_89+
 * conversion instruction where it has one). Both E4M3 variants have 3
 * mantissa bits, so each code is exact in f16 and bf16:
 *   e4m3fn   (OCP): bias 7, 0x7f/0xff NaN, max 448
 *   e4m3fnuz (AMD): bias 8, 0x80 the only NaN, max 240
 * Two codes per 32-bit word: each byte goes to bits 14..7 of a 16-bit lane
 * (exponent to the low 4 bits of f16's, mantissa to its top 3), the sign to bit
 * 15: the f16 number 2^-8 (fn) or 2^-7 (fnuz) times the code's value,
 * subnormal codes included; one f16x2 multiply by 2^8 or 2^7 is exact. bf16
 * goes on through f32 (exact, the low 16 bits zero). NaN codes become f16 NaN
 * in a rare path (found by a test on the word). */
#ifndef ANYATTN_GPU_VENDOR_FP8_CUH
#define ANYATTN_GPU_VENDOR_FP8_CUH

#include <stdint.h>

#include "vendor.h"

namespace aa {

__device__ __forceinline__ __half2 u32_as_half2(uint32_t u) {
  __half2 h;
  __builtin_memcpy(&h, &u, 4);
  return h;
}
__device__ __forceinline__ uint32_t half2_as_u32(__half2 h) {
  uint32_t u;
  __builtin_memcpy(&u, &h, 4);
  return u;
}

/* Codes k = 0..3 of x that are NaN: a nonzero word iff there is one. */
__device__ __forceinline__ uint32_t fp8x4_nan_any(uint32_t x, bool fnuz) {
  if (fnuz) { /* a byte equal to 0x80: a zero byte of x ^ 0x80808080 */
    const uint32_t v = x ^ 0x80808080u;
    return (v - 0x01010101u) & ~v & 0x80808080u;
  }
  return ((x & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u; /* low 7 bits all ones */
}

/* The rare path: lanes of NaN codes set to the f16 NaN. */
static __device__ __noinline__ void fp8x4_nan_fix(uint32_t x, bool fnuz, uint32_t &lo, uint32_t &hi) {
  for (int k = 0; k < 4; k++) {
    const uint32_t b = (x >> (8 * k)) & 0xffu;
    const bool nan = fnuz ? b == 0x80u : (b & 0x7fu) == 0x7fu;
    if (!nan) continue;
    uint32_t &w = k < 2 ? lo : hi;
    const int sh = 16 * (k & 1);
    w = (w & ~(0xffffu << sh)) | (0x7e00u << sh);
  }
}

/* Codes 0..3 of x (lowest byte first) -> f16 bit patterns, codes 0, 1 in lo
 * (code 0 in the low half), 2, 3 in hi. */
__device__ __forceinline__ void fp8x4_to_f16_portable(uint32_t x, bool fnuz, uint32_t &lo, uint32_t &hi) {
  const uint32_t t0 = __byte_perm(x, 0u, 0x1404), t1 = __byte_perm(x, 0u, 0x3424); /* code << 8 per lane */
  const uint32_t a = ((t0 >> 1) & 0x3f803f80u) | (t0 & 0x80008000u);
  const uint32_t b = ((t1 >> 1) & 0x3f803f80u) | (t1 & 0x80008000u);
  const __half2 m = u32_as_half2(fnuz ? 0x58005800u : 0x5c005c00u); /* 2^7, 2^8 */
  lo = half2_as_u32(__hmul2(u32_as_half2(a), m));
  hi = half2_as_u32(__hmul2(u32_as_half2(b), m));
  if (fp8x4_nan_any(x, fnuz)) fp8x4_nan_fix(x, fnuz, lo, hi);
}

/* Two f16 (a word) -> two bf16 (a word): through f32, exact for these values. */
__device__ __forceinline__ uint32_t f16x2_to_bf16x2(uint32_t w) {
  const __half2 h = u32_as_half2(w);
  return __byte_perm(__float_as_uint(__low2float(h)), __float_as_uint(__high2float(h)), 0x7632);
}

/* Eight f16 (four words) -> the compute type's eight 16-bit values. */
template <typename T>
__device__ __forceinline__ uint4 f16x8_to(uint32_t a, uint32_t b, uint32_t c, uint32_t d);
template <>
__device__ __forceinline__ uint4 f16x8_to<aa_f16>(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return make_uint4(a, b, c, d);
}
template <>
__device__ __forceinline__ uint4 f16x8_to<aa_bf16>(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return make_uint4(f16x2_to_bf16x2(a), f16x2_to_bf16x2(b), f16x2_to_bf16x2(c), f16x2_to_bf16x2(d));
}

}  // namespace aa

#endif /* ANYATTN_GPU_VENDOR_FP8_CUH */
