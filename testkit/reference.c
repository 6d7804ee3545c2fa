/* reference.c: the double-precision reference, written line by line from
 * docs/semantics.md ("Scores, masks, softmax"; fp8 caches dequantised
 * exactly: K = k_descale * code, V = v_descale * code). Loops over sequence, query,
 * head; gathers every key's logit, masks, takes the max, sums. Slow on
 * purpose: nothing here is allowed to be clever. */
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tl_util.h"

void tl_resolve_strides(const anyattn_problem *pr, int64_t b, int64_t t, int64_t h, int64_t out[3]) {
  if (b == 0 && t == 0 && h == 0) { /* dense NHD, as the library resolves it */
    out[0] = (int64_t)pr->block_size * pr->num_kv_heads * pr->head_dim;
    out[1] = (int64_t)pr->num_kv_heads * pr->head_dim;
    out[2] = pr->head_dim;
  } else {
    out[0] = b;
    out[1] = t;
    out[2] = h;
  }
}

/* Key j of sequence s: element offset of its row for kv head kvh. */
static int64_t ref_row(const anyattn_batch *b, int s, int j, int block_size, const int64_t st[3],
                       int kvh) {
  const int32_t page = b->block_table[(int64_t)s * b->block_table_stride + j / block_size];
  return (int64_t)page * st[0] + (int64_t)(j % block_size) * st[1] + (int64_t)kvh * st[2];
}

static int ref_visible(const anyattn_problem *pr, int64_t j, int64_t p, int kv_len) {
  if (j >= kv_len) return 0;
  if (pr->causal && j > p) return 0;
  if (pr->window_left >= 0 && j < p - pr->window_left) return 0;
  if (!pr->causal && pr->window_right >= 0 && j > p + pr->window_right) return 0;
  return 1;
}

/* Page ids a sequence with queries will read must lie inside the caches. */
static int ref_check_metadata(const anyattn_problem *pr, const anyattn_batch *b, int64_t num_blocks) {
  for (int s = 0; s < b->num_seqs; s++) {
    const int q_len = b->cu_seqlens_q[s + 1] - b->cu_seqlens_q[s];
    const int kv_len = b->seq_lens_k[s];
    if (q_len < 0 || kv_len < 0 || b->cu_seqlens_q[s + 1] > b->num_tokens) {
      fprintf(stderr, "tl_reference: sequence %d has q_len %d, kv_len %d\n", s, q_len, kv_len);
      return -1;
    }
    if (q_len == 0) continue;
    const int pages = (kv_len + pr->block_size - 1) / pr->block_size;
    if (pages > b->block_table_stride) {
      fprintf(stderr, "tl_reference: sequence %d needs %d pages, table stride %d\n", s, pages,
              b->block_table_stride);
      return -1;
    }
    for (int j = 0; j < pages; j++) {
      const int32_t page = b->block_table[(int64_t)s * b->block_table_stride + j];
      if (page < 0 || page >= num_blocks) {
        fprintf(stderr, "tl_reference: block_table[%d][%d] = %d outside [0, %lld)\n", s, j, page,
                (long long)num_blocks);
        return -1;
      }
    }
  }
  return 0;
}

/* The descale of sequence s, kv head kvh (NULL: 1). */
static double ref_descale(const anyattn_tensors *t, const float *p, int s, int kvh, int num_kv_heads) {
  if (!p) return 1.0;
  return t->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD ? (double)p[(int64_t)s * num_kv_heads + kvh]
                                                           : (double)p[0];
}

int tl_reference(const anyattn_problem *pr, const anyattn_batch *b, const anyattn_tensors *t,
                 double *out, double *lse, double *absout, double *xmag) {
  const int hq = pr->num_q_heads, d = pr->head_dim;
  const int group = pr->num_q_heads / pr->num_kv_heads;
  const anyattn_dtype dt = pr->dtype;
  const anyattn_kv_dtype kv = pr->kv_dtype;
  const double scale = pr->scale != 0.0f ? (double)pr->scale : 1.0 / sqrt((double)d);
  const double softcap = pr->softcap;
  int64_t ks[3], vs[3];
  tl_resolve_strides(pr, t->k_stride_block, t->k_stride_token, t->k_stride_head, ks);
  tl_resolve_strides(pr, t->v_stride_block, t->v_stride_token, t->v_stride_head, vs);
  if (ref_check_metadata(pr, b, t->num_blocks) != 0) return -1;

  int max_kv = 0;
  for (int s = 0; s < b->num_seqs; s++)
    if (b->seq_lens_k[s] > max_kv) max_kv = b->seq_lens_k[s];
  double *x = (double *)malloc(sizeof(double) * (size_t)(max_kv + 1));
  char *vis = (char *)malloc((size_t)max_kv + 1);
  double *qrow = (double *)malloc(sizeof(double) * (size_t)d);
  if (!x || !vis || !qrow) {
    free(x);
    free(vis);
    free(qrow);
    fprintf(stderr, "tl_reference: out of memory\n");
    return -1;
  }

  for (int s = 0; s < b->num_seqs; s++) {
    const int t0 = b->cu_seqlens_q[s];
    const int q_len = b->cu_seqlens_q[s + 1] - t0;
    const int kv_len = b->seq_lens_k[s];
    for (int i = 0; i < q_len; i++) {
      const int tok = t0 + i;
      /* the query's absolute position: q_pos[s] + i, else the queries are the last q_len keys */
      const int64_t p = (b->q_pos ? (int64_t)b->q_pos[s] : (int64_t)kv_len - q_len) + i;
      for (int h = 0; h < hq; h++) {
        const int kvh = h / group;
        const double kd = kv == ANYATTN_KV_AS_Q ? 1.0 : ref_descale(t, t->k_descale, s, kvh, pr->num_kv_heads);
        const double vd = kv == ANYATTN_KV_AS_Q ? 1.0 : ref_descale(t, t->v_descale, s, kvh, pr->num_kv_heads);
        const size_t row = (size_t)tok * hq + h;
        double *o = out + row * d;
        double *ao = absout ? absout + row * d : NULL;
        for (int c = 0; c < d; c++) qrow[c] = tl_load(dt, t->q, row * d + c);

        /* Steps 1-3: scale * q.k, softcap, then ALiBi; and the mask. */
        int any = 0;
        double m = -INFINITY, mag = 0.0;
        for (int j = 0; j < kv_len; j++) {
          vis[j] = (char)ref_visible(pr, j, p, kv_len);
          if (!vis[j]) continue;
          const int64_t kr = ref_row(b, s, j, pr->block_size, ks, kvh);
          double dot = 0.0, adot = 0.0;
          for (int c = 0; c < d; c++) {
            const double term = qrow[c] * (kd * tl_cache_load(kv, dt, t->k_cache, (size_t)(kr + c)));
            dot += term;
            adot += fabs(term);
          }
          double xj = scale * dot, mj = fabs(scale) * adot; /* softcap's slope is at most 1 */
          if (softcap > 0.0) xj = softcap * tanh(xj / softcap);
          if (t->alibi_slopes) {
            const double al = (double)tl_load(t->alibi_slopes_dtype, t->alibi_slopes, (size_t)h) * (double)(j - p);
            xj += al;
            mj += fabs(al);
          }
          x[j] = xj;
          any = 1;
          if (xj > m) m = xj;
          if (mj > mag) mag = mj;
        }
        if (!any) { /* no visible key: out 0 and lse -inf, sinks or not */
          for (int c = 0; c < d; c++) o[c] = 0.0;
          if (ao)
            for (int c = 0; c < d; c++) ao[c] = 0.0;
          if (lse) lse[row] = -INFINITY;
          if (xmag) xmag[row] = 0.0;
          continue;
        }
        if (t->sinks) {
          const double sink = tl_load(t->sinks_dtype, t->sinks, (size_t)h);
          if (sink > m) m = sink;
          if (fabs(sink) > mag) mag = fabs(sink);
        }

        /* The sink joins the max and the denominator, never the numerator. */
        double denom = t->sinks ? exp((double)tl_load(t->sinks_dtype, t->sinks, (size_t)h) - m) : 0.0;
        for (int j = 0; j < kv_len; j++)
          if (vis[j]) denom += exp(x[j] - m);
        for (int c = 0; c < d; c++) o[c] = 0.0;
        if (ao)
          for (int c = 0; c < d; c++) ao[c] = 0.0;
        for (int j = 0; j < kv_len; j++) {
          if (!vis[j]) continue;
          const double w = exp(x[j] - m) / denom;
          const int64_t vr = ref_row(b, s, j, pr->block_size, vs, kvh);
          for (int c = 0; c < d; c++) {
            const double v = vd * tl_cache_load(kv, dt, t->v_cache, (size_t)(vr + c));
            o[c] += w * v;
            if (ao) ao[c] += w * fabs(v);
          }
        }
        if (lse) lse[row] = m + log(denom);
        if (xmag) xmag[row] = mag;
      }
    }
  }
  free(x);
  free(vis);
  free(qrow);
  return 0;
}
