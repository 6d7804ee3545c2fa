/* tl_util.h: random numbers, dtype conversion and medians shared by tests and tools. */
#ifndef ANYATTN_TL_UTIL_H
#define ANYATTN_TL_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64: small, fast, good enough for test data. */
uint64_t tl_rng_next(uint64_t *state);
double tl_rng_uniform(uint64_t *state);            /* [0, 1) */
int tl_rng_int(uint64_t *state, int lo, int hi);   /* [lo, hi] inclusive */
double tl_rng_normal(uint64_t *state);              /* N(0, 1) */
uint64_t tl_seed_from_env_or_time(void);            /* $ANYATTN_SEED, else time-based */

/* The median of v[0..n) (n >= 1; the mean of the middle two for even n),
 * sorting v in place. */
double tl_median(double *v, int n);

/* IEEE half and bfloat16, round to nearest even. */
uint16_t tl_f32_to_f16(float f);
float tl_f16_to_f32(uint16_t h);
uint16_t tl_f32_to_bf16(float f);
float tl_bf16_to_f32(uint16_t b);

/* Element i of a buffer of `dtype`, as float, and the store back. */
float tl_load(anyattn_dtype dtype, const void *buf, size_t i);
void tl_store(anyattn_dtype dtype, void *buf, size_t i, float v);
/* Rounds v to the nearest value representable in dtype. */
float tl_round(anyattn_dtype dtype, float v);
/* n elements of N(0, sigma^2), rounded to dtype. */
void tl_fill_normal(anyattn_dtype dtype, void *buf, size_t n, float sigma, uint64_t *rng);
/* n elements set to quiet NaN in dtype (poison). */
void tl_fill_nan(anyattn_dtype dtype, void *buf, size_t n);
const char *tl_dtype_name(anyattn_dtype dtype);

/* fp8 caches (problem->kv_dtype), written from the format definitions in
 * docs/semantics.md independently of the library's conversion. */
/* The exact value of an fp8 code of kv (FP8_E4M3 or FP8_E4M3FNUZ); NaN codes give NaN. */
double tl_fp8_value(anyattn_kv_dtype kv, uint8_t code);
/* Element i of a cache: tl_load of dtype for AS_Q, else the value of the fp8 code. */
double tl_cache_load(anyattn_kv_dtype kv, anyattn_dtype dtype, const void *buf, size_t i);
/* n random non-NaN codes of kv: magnitudes mostly within [2^-5, 4), with
 * zeros, subnormals and the format's largest values mixed in. */
void tl_fill_fp8(anyattn_kv_dtype kv, uint8_t *buf, size_t n, uint64_t *rng);
/* A NaN code of kv (poison for unread cache slots). */
uint8_t tl_fp8_nan(anyattn_kv_dtype kv);
/* "fp8_e4m3" / "fp8_e4m3fnuz" / "" for AS_Q: the conformance names' part. */
const char *tl_kv_name(anyattn_kv_dtype kv);

#ifdef __cplusplus
}
#endif
#endif
