/* tl_util.c: random numbers, dtype conversion and medians shared by tests and tools. */
#define _POSIX_C_SOURCE 200809L
#include "tl_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t tl_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double tl_rng_uniform(uint64_t *s) { return (double)(tl_rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

int tl_rng_int(uint64_t *s, int lo, int hi) {
  if (hi <= lo) return lo;
  return lo + (int)(tl_rng_next(s) % (uint64_t)(hi - lo + 1));
}

double tl_rng_normal(uint64_t *s) {
  double u1 = tl_rng_uniform(s), u2 = tl_rng_uniform(s);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tl_seed_from_env_or_time(void) {
  const char *e = getenv("ANYATTN_SEED");
  if (e && *e) return strtoull(e, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
  return tl_rng_next(&s) & 0xFFFFFFFFull; /* short seeds are easier to paste back */
}

static int tl_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double tl_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, tl_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint32_t tl_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float tl_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t tl_f32_to_bf16(float f) {
  uint32_t u = tl_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float tl_bf16_to_f32(uint16_t b) { return tl_float((uint32_t)b << 16); }

uint16_t tl_f32_to_f16(float f) {
  uint32_t u = tl_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);      /* NaN */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);     /* overflow to inf (rounds past 65504) */
  if (a < 0x38800000u) {                                       /* subnormal or zero in half */
    /* value = a as float; half subnormal unit is 2^-24 */
    float v = tl_float(a);
    float scaled = v * 16777216.0f; /* / 2^-24 */
    uint32_t m = (uint32_t)nearbyintf(scaled); /* round-half-even under default mode */
    return (uint16_t)(sign | m);
  }
  uint32_t exp = (a >> 23) - 127 + 15;
  uint32_t mant = a & 0x7FFFFFu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

float tl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return tl_float(sign | 0x7F800000u | (mant << 13));
  return tl_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

float tl_load(anyattn_dtype dtype, const void *buf, size_t i) {
  switch (dtype) {
    case ANYATTN_DTYPE_F32: return ((const float *)buf)[i];
    case ANYATTN_DTYPE_F16: return tl_f16_to_f32(((const uint16_t *)buf)[i]);
    case ANYATTN_DTYPE_BF16: return tl_bf16_to_f32(((const uint16_t *)buf)[i]);
  }
  return NAN;
}

void tl_store(anyattn_dtype dtype, void *buf, size_t i, float v) {
  switch (dtype) {
    case ANYATTN_DTYPE_F32: ((float *)buf)[i] = v; break;
    case ANYATTN_DTYPE_F16: ((uint16_t *)buf)[i] = tl_f32_to_f16(v); break;
    case ANYATTN_DTYPE_BF16: ((uint16_t *)buf)[i] = tl_f32_to_bf16(v); break;
  }
}

float tl_round(anyattn_dtype dtype, float v) {
  switch (dtype) {
    case ANYATTN_DTYPE_F32: return v;
    case ANYATTN_DTYPE_F16: return tl_f16_to_f32(tl_f32_to_f16(v));
    case ANYATTN_DTYPE_BF16: return tl_bf16_to_f32(tl_f32_to_bf16(v));
  }
  return NAN;
}

void tl_fill_normal(anyattn_dtype dtype, void *buf, size_t n, float sigma, uint64_t *rng) {
  for (size_t i = 0; i < n; i++) tl_store(dtype, buf, i, (float)(sigma * tl_rng_normal(rng)));
}

void tl_fill_nan(anyattn_dtype dtype, void *buf, size_t n) {
  for (size_t i = 0; i < n; i++) tl_store(dtype, buf, i, NAN);
}

const char *tl_dtype_name(anyattn_dtype dtype) {
  switch (dtype) {
    case ANYATTN_DTYPE_F32: return "f32";
    case ANYATTN_DTYPE_F16: return "f16";
    case ANYATTN_DTYPE_BF16: return "bf16";
  }
  return "?";
}

/* ---- fp8 caches ------------------------------------------------------------ */
double tl_fp8_value(anyattn_kv_dtype kv, uint8_t c) {
  const int fnuz = kv == ANYATTN_KV_FP8_E4M3FNUZ, bias = fnuz ? 8 : 7;
  if (fnuz ? c == 0x80 : (c & 0x7f) == 0x7f) return NAN;
  const int e = (c >> 3) & 15, m = c & 7;
  const double v = e == 0 ? ldexp(m / 8.0, 1 - bias) : ldexp(1.0 + m / 8.0, e - bias);
  return (c & 0x80) ? -v : v;
}

double tl_cache_load(anyattn_kv_dtype kv, anyattn_dtype dtype, const void *buf, size_t i) {
  if (kv == ANYATTN_KV_AS_Q) return (double)tl_load(dtype, buf, i);
  return tl_fp8_value(kv, ((const uint8_t *)buf)[i]);
}

void tl_fill_fp8(anyattn_kv_dtype kv, uint8_t *buf, size_t n, uint64_t *rng) {
  const int bias = kv == ANYATTN_KV_FP8_E4M3FNUZ ? 8 : 7;
  for (size_t i = 0; i < n; i++) {
    const int pick = tl_rng_int(rng, 0, 99);
    int e;
    if (pick < 2) e = 0;                         /* zero and subnormals */
    else if (pick < 3) e = 15;                   /* the largest binade (x descale still moderate) */
    else e = tl_rng_int(rng, bias - 5, bias + 1); /* 2^-5 .. 4 */
    int m = tl_rng_int(rng, 0, 7);
    if (e == 15 && m == 7 && bias == 7) m = 6;   /* 0x7f is NaN in e4m3fn */
    int sign = tl_rng_int(rng, 0, 1);
    if (bias == 8 && e == 0 && m == 0) sign = 0; /* 0x80 is NaN in fnuz */
    buf[i] = (uint8_t)((sign << 7) | (e << 3) | m);
  }
}

uint8_t tl_fp8_nan(anyattn_kv_dtype kv) { return kv == ANYATTN_KV_FP8_E4M3FNUZ ? 0x80 : 0x7f; }

const char *tl_kv_name(anyattn_kv_dtype kv) {
  switch (kv) {
    case ANYATTN_KV_FP8_E4M3: return "fp8_e4m3";
    case ANYATTN_KV_FP8_E4M3FNUZ: return "fp8_e4m3fnuz";
    default: return "";
  }
}
