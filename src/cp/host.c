/* host.c: the CPU backend's context-parallel math, in host memory: copies,
 * batch metadata and block tables, the fp32 LSE merge of step partials, the
 * final rounding with sinks, and the decode partials' pack and merge. The
 * CUDA kernels in kernels.cu compute the same, element for element. */
#include <math.h>
#include <string.h>

#include "cp.h"
#include "dtype.h"

static float cp_load(anyattn_dtype dt, const void *p, size_t i) {
  if (dt == ANYATTN_DTYPE_F32) return ((const float *)p)[i];
  const uint16_t h = ((const uint16_t *)p)[i];
  return dt == ANYATTN_DTYPE_F16 ? aa_f16_to_f32(h) : aa_bf16_to_f32(h);
}
static void cp_store(anyattn_dtype dt, void *p, size_t i, float v) {
  if (dt == ANYATTN_DTYPE_F32) ((float *)p)[i] = v;
  else ((uint16_t *)p)[i] = dt == ANYATTN_DTYPE_F16 ? aa_f32_to_f16(v) : aa_f32_to_bf16(v);
}

static anyattn_status cp_host_copy(void *dst, const void *src, size_t bytes, void *stream) {
  (void)stream;
  memcpy(dst, src, bytes);
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_host_ints(int32_t *dst, const int32_t *src, int n, void *stream) {
  (void)stream;
  memcpy(dst, src, (size_t)n * sizeof *src);
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_host_table(int32_t *table, const int32_t *page0, int ne, int stride, cp_view v,
                                    void *stream) {
  (void)stream;
  for (int i = 0; i < ne; i++)
    for (int p = 0; p < stride; p++) {
      const int lp = page0[i] + p;
      table[(size_t)i * stride + p] = lp < v.c0 ? v.b0 + lp : v.b1 + (lp - v.c0);
    }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_host_merge(const cp_merge_args *a, void *stream) {
  (void)stream;
  const int64_t n = (int64_t)a->rows * a->hq;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++) {
    float *acc = a->acc + (size_t)r * a->d;
    const float ls = a->lse[r], la = a->init ? -INFINITY : a->acc_lse[r];
    const float m = ls > la ? ls : la;
    /* weights of the running merge and of this partial; a side with lse = -inf weighs 0 */
    const float wa = la == -INFINITY ? 0.0f : expf(la - m), ws = ls == -INFINITY ? 0.0f : expf(ls - m);
    const float sum = wa + ws;
    if (sum == 0.0f) { /* no key so far */
      for (int e = 0; e < a->d; e++) acc[e] = 0.0f;
      a->acc_lse[r] = -INFINITY;
      continue;
    }
    for (int e = 0; e < a->d; e++) {
      const float o = cp_load(a->dtype, a->out, (size_t)r * a->d + e);
      acc[e] = wa == 0.0f ? o : (acc[e] * wa + o * ws) / sum;
    }
    a->acc_lse[r] = m + logf(sum);
  }
  return ANYATTN_STATUS_OK;
}

/* out = acc scaled for the sink, lse = log(exp(lse) + exp(sink)); an empty
 * row stays out = 0, lse = -inf (docs/semantics.md). */
static anyattn_status cp_host_finish(const cp_finish_args *a, void *stream) {
  (void)stream;
  const int64_t n = (int64_t)a->rows * a->hq;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++) {
    const float la = a->acc_lse[r];
    float scale = 1.0f, lse = la;
    if (la == -INFINITY) scale = 0.0f;
    else if (a->sinks) {
      const float s = a->sinks[r % a->hq], m = la > s ? la : s;
      lse = m + logf(expf(la - m) + expf(s - m));
      scale = expf(la - lse);
    }
    for (int e = 0; e < a->d; e++) cp_store(a->dtype, a->out, (size_t)r * a->d + e, a->acc[(size_t)r * a->d + e] * scale);
    if (a->lse) a->lse[r] = lse;
  }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_host_decode_pack(const cp_decode_args *a, void *stream) {
  (void)stream;
  const int64_t n = (int64_t)a->rows * a->hq;
  const int d = a->d;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++) {
    float *dst = a->part + (size_t)r * (d + 1);
    for (int e = 0; e < d; e++) dst[e] = cp_load(a->dtype, a->out, (size_t)r * d + e);
    dst[d] = a->lse[r];
  }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_host_decode_merge(const cp_decode_args *a, void *stream) {
  (void)stream;
  const int d = a->d, valid = *a->cu_end;
  const int64_t n = (int64_t)(valid < a->rows ? valid : a->rows) * a->hq;
  const size_t per_rank = (size_t)a->rows * a->hq * (d + 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++) {
    float m = a->sinks ? a->sinks[r % a->hq] : -INFINITY;
    for (int k = 0; k < a->ranks; k++) {
      const float l = a->gathered[k * per_rank + (size_t)r * (d + 1) + d];
      if (l > m) m = l;
    }
    int any = 0;
    float sum = 0.0f;
    for (int k = 0; k < a->ranks; k++) {
      const float l = a->gathered[k * per_rank + (size_t)r * (d + 1) + d];
      if (l != -INFINITY) any = 1, sum += expf(l - m);
    }
    if (!any) { /* no key on any rank */
      for (int e = 0; e < d; e++) cp_store(a->dtype, a->final_out, (size_t)r * d + e, 0.0f);
      if (a->final_lse) a->final_lse[r] = -INFINITY;
      continue;
    }
    if (a->sinks) sum += expf(a->sinks[r % a->hq] - m);
    for (int e = 0; e < d; e++) {
      float o = 0.0f;
      for (int k = 0; k < a->ranks; k++) {
        const float *p = a->gathered + k * per_rank + (size_t)r * (d + 1);
        if (p[d] != -INFINITY) o += expf(p[d] - m) * p[e];
      }
      cp_store(a->dtype, a->final_out, (size_t)r * d + e, o / sum);
    }
    if (a->final_lse) a->final_lse[r] = m + logf(sum);
  }
  return ANYATTN_STATUS_OK;
}

const cp_math *cp_host_math(void) {
  static const cp_math m = {cp_host_copy,  cp_host_ints,        cp_host_table,       cp_host_merge,
                            cp_host_finish, cp_host_decode_pack, cp_host_decode_merge};
  return &m;
}
