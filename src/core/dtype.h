/* dtype.h: scalar conversions between fp32 and the 16-bit dtypes (bf16, IEEE
 * half), round to nearest even, NaN kept quiet, and the exact widening of
 * fp8 cache codes: the CPU backend (src/cpu/) and the context-parallel merge
 * (src/cp/) share them. */
#ifndef ANYATTN_DTYPE_H
#define ANYATTN_DTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#define AA_DTYPE_INLINE static inline __attribute__((always_inline))

AA_DTYPE_INLINE float aa_bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
AA_DTYPE_INLINE uint32_t aa_f32_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

AA_DTYPE_INLINE float aa_bf16_to_f32(uint16_t b) { return aa_bits_to_f32((uint32_t)b << 16); }

AA_DTYPE_INLINE float aa_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) { /* zero or subnormal: m * 2^-24, exact in fp32 */
    return aa_bits_to_f32(sign | aa_f32_to_bits((float)m * 5.9604644775390625e-8f));
  }
  if (e == 31) return aa_bits_to_f32(sign | 0x7F800000u | (m << 13));
  return aa_bits_to_f32(sign | ((e + 112u) << 23) | (m << 13));
}

AA_DTYPE_INLINE uint16_t aa_f32_to_bf16(float f) {
  uint32_t u = aa_f32_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* keep NaN quiet */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

AA_DTYPE_INLINE uint16_t aa_f32_to_f16(float f) {
#if defined(__F16C__)
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  const uint32_t u = aa_f32_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504 */
  if (a < 0x38800000u) { /* half subnormal: scale so the unit 2^-24 is 1, round to even */
    return (uint16_t)(sign | (uint32_t)nearbyintf(aa_bits_to_f32(a) * 16777216.0f));
  }
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3FFu);
  const uint32_t rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
#endif
}

/* An fp8 E4M3 code as fp32, exactly: fnuz 0 is OCP e4m3fn (bias 7, 0x7f and
 * 0xff NaN), 1 e4m3fnuz (bias 8, 0x80 the only NaN). Normal codes move their
 * exponent and mantissa fields into place; subnormals (exponent 0) are the
 * mantissa times 2^(-bias-2), computed from an integer so that no fp32
 * subnormal (flushed under DAZ) is involved. */
AA_DTYPE_INLINE float aa_fp8_to_f32(uint8_t c, int fnuz) {
  const uint32_t sign = (uint32_t)(c & 0x80u) << 24, mag = c & 0x7Fu;
  if (fnuz ? c == 0x80u : mag == 0x7Fu) return aa_bits_to_f32(sign | 0x7FC00000u);
  if (mag >> 3 == 0) {
    const float sub = (float)mag * (fnuz ? 0.0009765625f : 0.001953125f); /* 2^-10, 2^-9 */
    return aa_bits_to_f32(sign | aa_f32_to_bits(sub));
  }
  return aa_bits_to_f32(sign | ((mag << 20) + ((fnuz ? 119u : 120u) << 23)));
}

#endif /* ANYATTN_DTYPE_H */
