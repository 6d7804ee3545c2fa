/* cpu.h: what the CPU backend's files share: the per-thread scratch layout,
 * the job one run hands every work item, the block-table walk and the visible
 * key ranges both item paths use, and the entry points of the two paths. */
#ifndef AA_CPU_H
#define AA_CPU_H

#include "backend.h"
#include "simd.h"

/* Prefetch into all cache levels: prefetchnta (hint 0) cut decode from 55 to
 * 21 GB/s on the same Xeon. */
#ifndef AA_PF_HINT
#define AA_PF_HINT 3
#endif

static inline size_t aa_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Per-thread scratch, in floats; every segment starts on a 64-byte boundary
 * and every row is dp (head_dim padded to AA_VL) or bn floats long. */
typedef struct {
  int dp, bn;
  int rows;    /* rows of q/acc/scores: the larger of the two item shapes below */
  int dec_q;   /* sequences with q_len <= dec_q run as decode items (several heads at once) */
  int max_hpi; /* kv heads per decode item, at most */
  size_t q, acc, k, v, s, m, l, alpha, lo, hi, total;
} aa_cpu_layout;

/* One run's view of the plan, shared read-only by every thread. */
typedef struct {
  const anyattn_plan *plan;
  const anyattn_args *a;
  aa_cpu_layout L;
  size_t es;              /* bytes per element */
  int d, group, nqh, kvh, bq;
  int hpi;                /* kv heads per decode item in this run */
} aa_cpu_job;

/* Address of key j's row for the item's first kv head, walking the block table. */
typedef struct {
  const char *base;
  const int32_t *bt;
  int64_t sb, st; /* bytes */
  int bs, page, row;
} aa_kv_walk;

AA_INLINE void aa_walk_init(aa_kv_walk *w, const void *cache, const int32_t *bt, int64_t sb, int64_t st,
                            int64_t sh, int g, size_t es, int bs, int j) {
  w->base = (const char *)cache + (int64_t)g * sh * (int64_t)es;
  w->bt = bt;
  w->sb = sb * (int64_t)es;
  w->st = st * (int64_t)es;
  w->bs = bs;
  w->page = j / bs;
  w->row = j % bs;
}
AA_INLINE const char *aa_walk_next(aa_kv_walk *w) {
  const char *p = w->base + (int64_t)w->bt[w->page] * w->sb + (int64_t)w->row * w->st;
  if (++w->row == w->bs) {
    w->row = 0;
    w->page++;
  }
  return p;
}

/* Visible key range [lo, hi) of every row of an item (row r: token r / group,
 * the same for every head) and their union [*ilo, *ihi): the item walks the
 * union only, so keys outside every row's range are never read. */
static inline void aa_row_ranges(const anyattn_problem *pr, int kv_len, int qpos0, int nq, int group, int32_t *lo,
                                 int32_t *hi, int *ilo, int *ihi) {
  *ilo = kv_len;
  *ihi = 0;
  for (int ti = 0; ti < nq; ti++) {
    const int p = qpos0 + ti;
    int rlo = pr->window_left >= 0 ? p - pr->window_left : 0;
    int rhi = pr->causal ? p + 1 : pr->window_right >= 0 ? p + pr->window_right + 1 : kv_len;
    if (rlo < 0) rlo = 0;
    if (rhi > kv_len) rhi = kv_len;
    if (rlo < rhi) {
      if (rlo < *ilo) *ilo = rlo;
      if (rhi > *ihi) *ihi = rhi;
    }
    for (int hh = 0; hh < group; hh++) {
      lo[ti * group + hh] = rlo;
      hi[ti * group + hh] = rhi;
    }
  }
}

/* The tiled path (tiled.c): query tokens [t0, t0 + nq) of sequence s
 * against kv heads g0 .. g0 + nh - 1, any dtype and head_dim. */
AA_HIDDEN void aa_cpu_item(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int t0, int nq);

/* The fused decode path (decode.c): every token of sequence s (q_len <=
 * dec_q) against kv heads g0 .. g0 + nh - 1, bf16 or fp16, head_dim d a
 * multiple of 32. */
AA_HIDDEN void aa_cpu_decode_bf16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d);
AA_HIDDEN void aa_cpu_decode_f16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d);

#endif /* AA_CPU_H */
