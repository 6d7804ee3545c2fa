/* cpu.h: what the CPU backend's files share: the per-thread scratch layout,
 * the job one run hands every work item, an item's query rows and the keys
 * they see, the block-table walk, and the entry points of the two item paths.
 * The helpers are always inlined: they sit inside the hot loops of both. */
#ifndef AA_CPU_H
#define AA_CPU_H

#include "backend.h"
#include "isa.h"
#include "simd.h"

/* Prefetch hint of the tiled paths: T1, into L2 and beyond. The next tile's
 * K and V (64 KiB at head dim 128 in fp32) do not fit a 32 KiB L1 beside the
 * current tile's lines: on the 2-core EPYC (Zen 3) T1 runs fp32 and bf16
 * prefill 1.01-1.04x faster than T0 (`dev/cpu_ab.c`), and the same on the
 * Xeon. prefetchnta (hint 0) cut decode from 55 to 21 GB/s on that Xeon. */
#ifndef AA_PF_HINT
#define AA_PF_HINT 2
#endif

/* Software prefetch distance of the tiled paths' K/V walk, in bytes (see
 * aa_cpu_item in tiled.c). */
#ifndef AA_CPU_PREFETCH_BYTES
#define AA_CPU_PREFETCH_BYTES 16384
#endif

/* Floats between the row count of a prefill item's transposed q and scores
 * (Qt [dim][row], St [key][row]) and their row stride: at 128 rows an
 * unpadded stride of 512 bytes puts a row vector's lines at successive dims
 * or keys in 8 of a 32 KiB L1's 64 sets; one more line spreads them over all.
 * fp32 prefill 1.02-1.12x faster on the EPYC (docs/design/cpu.md, fp32 path).
 * A multiple of AA_VL keeps rows aligned for the register vectors. */
#define AA_LS_PAD AA_VL

/* Keys per tile of the fp32 path, at most (aa_cpu_block_n32 in backend.c). */
#define AA_CPU_MAX_BN 128
/* The largest head_dim the backend plans (backend.c); scratch sized by it
 * (decode.c, aa_dec_interleave_q). */
#define AA_CPU_MAX_HEAD_DIM 512

static inline size_t aa_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Per-thread scratch, in floats; every segment starts on a 64-byte boundary
 * and every row is dp (head_dim padded to AA_VL) or bn floats long. */
typedef struct {
  int dp, bn;  /* bn: keys per tile (fp32 path: of one-head items; the 16-bit path's) */
  int bnh;     /* fp32 path: keys per tile of items of several kv heads */
  int rows;    /* rows of q/acc/scores: the larger of the two item shapes below */
  int dec_q;   /* sequences with q_len <= dec_q run as decode items (several heads at once) */
  int max_hpi; /* kv heads per decode item, at most */
  int terms;   /* 16-bit path (tiled16.c): bf16 terms per element, 1 (bf16) or 3 (fp16); 0 when off */
  size_t q, acc, k, v, s, p, x, m, l, alpha, mx, lo, hi, total;
} aa_cpu_layout;

/* One run's view of the plan, shared read-only by every thread. */
typedef struct {
  const anyattn_plan *plan;
  const anyattn_args *a;
  aa_cpu_layout L;
  size_t es;  /* bytes per element of q and out */
  size_t kes; /* bytes per cache element: es, or 1 for fp8 caches */
  anyattn_kv_dtype kv; /* the caches' storage (AS_Q: the problem's dtype) */
  int d, group, nqh, kvh, bq;
  int hpi; /* kv heads per decode item in this run */
  int dec_pf2;             /* decode items prefetch each line twice (decode.c, AA_DEC_PF_TWICE) */
  int dec_spread;          /* blocks whose pages decode's prefetch reads at once: 1, 2 or 4 (decode.c) */
  int dec_amx;             /* decode items may take the AMX scores (backend.c, aa_cpu_run) */
  int dec_chunks;          /* key chunks per decode sequence and head group (backend.c, aa_cpu_decode_split) */
  size_t dec_slot;         /* floats of one chunk's partial result in dec_part */
  float *dec_part;         /* the chunks' partial results, one slot per work item (dec_chunks > 1) */
  const aa_mm16_ops *mm16; /* the 16-bit products of prefill items, or NULL (fp32 FMA) */
} aa_cpu_job;

/* Bytes a fused decode item hands to its thread's next one (decode.c,
 * aa_dec_carry). */
#define AA_CPU_DEC_CARRY 4096

/* The run's work items, claimed one at a time from a counter the threads
 * share (aa_cpu_run); prefix[s] is sequence s's first item. A fused decode
 * item claims its thread's next item when its prefetch has no block of its
 * own left, walks on into that item's first blocks, and hands its prefetch
 * over in carry (decode.c, aa_dec_claim). */
typedef struct {
  int64_t *counter;      /* items claimed after the threads' first ones, shared */
  int64_t first;         /* items taken first, one a thread: the team's threads */
  int64_t total;         /* the run's items */
  const int64_t *prefix; /* [num_seqs + 1] */
  int64_t next;          /* the item claimed to run after the current one; -1: none yet */
  int threads;           /* the team's threads */
  int warm;              /* carry holds the current item's prefetch */
  _Alignas(64) unsigned char carry[AA_CPU_DEC_CARRY];
} aa_cpu_items;

/* The next unclaimed item (total or more: none left), and how many are left. */
AA_INLINE int64_t aa_cpu_claim(aa_cpu_items *q) {
  return q->first + __atomic_fetch_add(q->counter, 1, __ATOMIC_RELAXED);
}
AA_INLINE int64_t aa_cpu_items_left(const aa_cpu_items *q) {
  return q->total - q->first - __atomic_load_n(q->counter, __ATOMIC_RELAXED);
}

/* Work item it of the run (prefix[s]: sequence s's first item): its
 * sequence *s and its index *local among that sequence's items; for a decode
 * item (q_len <= job->L.dec_q; returns 1) its first kv head *g0 and its key
 * chunk *chunk, in aa_cpu_items_of's order. */
AA_INLINE int aa_cpu_item_at(const aa_cpu_job *job, const int64_t *prefix, int64_t it, int *s, int64_t *local, int *g0,
                             int *chunk) {
  const anyattn_args *a = job->a;
  int lo = 0, hi = a->num_seqs; /* the largest s with prefix[s] <= it */
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (prefix[mid] <= it)
      lo = mid;
    else
      hi = mid;
  }
  *s = lo;
  *local = it - prefix[lo];
  if (a->cu_seqlens_q[lo + 1] - a->cu_seqlens_q[lo] > job->L.dec_q) return 0;
  *g0 = (int)(*local / job->dec_chunks) * job->hpi;
  *chunk = (int)(*local % job->dec_chunks);
  return 1;
}

/* The query rows of a work item: tokens [t0, t0 + nq) of sequence s, each
 * with every q head of a kv head's group. Row r of kv head g is token
 * r / group, q head g * group + r % group; rows R..R4 pad to a multiple of 4
 * (the 4-row score and P.V kernels) and see no key. */
typedef struct {
  int tok0;      /* the first token's index in q and out */
  int qpos0;     /* its position among the sequence's keys */
  int R, R4;     /* rows per kv head, real and padded */
  int ilo, ihi;  /* keys some row sees: the item walks these only */
  int32_t *lo;   /* [R] first key row r sees */
  int32_t *hi;   /* [R] one past its last */
} aa_cpu_rows;

/* The keys [*lo, *hi) a query at position p sees among kv_len (causal,
 * sliding window). */
AA_INLINE void aa_row_keys(const anyattn_problem *pr, int p, int kv_len, int *lo, int *hi) {
  int rlo = pr->window_left >= 0 ? p - pr->window_left : 0;
  int rhi = pr->causal ? p + 1 : pr->window_right >= 0 ? p + pr->window_right + 1 : kv_len;
  *lo = rlo < 0 ? 0 : rlo;
  *hi = rhi > kv_len ? kv_len : rhi;
}

/* The keys [*ilo, *ihi) that any of the q_len tokens of sequence s sees (an
 * empty range where none sees a key), as aa_rows_of finds them. */
AA_INLINE void aa_keys_of(const aa_cpu_job *job, int s, int *ilo, int *ihi) {
  const anyattn_args *a = job->a;
  const int q0 = a->cu_seqlens_q[s], q_len = a->cu_seqlens_q[s + 1] - q0, kv_len = a->seq_lens_k[s];
  const int qpos0 = a->q_pos ? a->q_pos[s] : kv_len - q_len;
  *ilo = kv_len;
  *ihi = 0;
  for (int ti = 0; ti < q_len; ti++) {
    int rlo, rhi;
    aa_row_keys(&job->plan->problem, qpos0 + ti, kv_len, &rlo, &rhi);
    if (rlo < rhi) {
      if (rlo < *ilo) *ilo = rlo;
      if (rhi > *ihi) *ihi = rhi;
    }
  }
}

/* The rows of tokens [t0, t0 + nq) of sequence s and the key range [lo, hi)
 * each sees (causal, sliding window), written to the scratch arrays lo, hi. */
AA_INLINE aa_cpu_rows aa_rows_of(const aa_cpu_job *job, int s, int t0, int nq, int32_t *lo, int32_t *hi) {
  const anyattn_problem *pr = &job->plan->problem;
  const anyattn_args *a = job->a;
  const int group = job->group;
  const int q0 = a->cu_seqlens_q[s];
  const int q_len = a->cu_seqlens_q[s + 1] - q0;
  const int kv_len = a->seq_lens_k[s];
  aa_cpu_rows rw;
  rw.tok0 = q0 + t0;
  rw.qpos0 = (a->q_pos ? a->q_pos[s] : kv_len - q_len) + t0; /* batch q_pos, else the last q_len keys */
  rw.R = nq * group;
  rw.R4 = (int)aa_round_up((size_t)rw.R, 4);
  rw.lo = lo;
  rw.hi = hi;
  rw.ilo = kv_len;
  rw.ihi = 0;
  for (int ti = 0; ti < nq; ti++) {
    int rlo, rhi;
    aa_row_keys(pr, rw.qpos0 + ti, kv_len, &rlo, &rhi);
    if (rlo < rhi) {
      if (rlo < rw.ilo) rw.ilo = rlo;
      if (rhi > rw.ihi) rw.ihi = rhi;
    }
    for (int hh = 0; hh < group; hh++) {
      lo[ti * group + hh] = rlo;
      hi[ti * group + hh] = rhi;
    }
  }
  return rw;
}

/* Visible keys of row r (of R real rows; lo and hi as in aa_cpu_rows) within
 * the key block [j0, j0 + nk), relative to j0: [*jlo, *jhi), empty for
 * padding rows and rows that see none of the block. */
AA_INLINE void aa_key_range(const int32_t *lo, const int32_t *hi, int R, int r, int j0, int nk, int *jlo, int *jhi) {
  *jlo = r < R && lo[r] > j0 ? lo[r] - j0 : 0;
  *jhi = r >= R ? 0 : hi[r] - j0 < nk ? hi[r] - j0 : nk;
}

/* Address of consecutive keys' K and V rows for one kv head, walking the
 * block table: a page of block_size keys at a time. */
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

/* The descale of sequence s, kv head g (NULL: 1; fp8 caches only), read
 * during the run as the layout says. */
AA_INLINE float aa_descale_of(const anyattn_args *a, const float *p, int s, int g, int kvh) {
  if (!p) return 1.0f;
  return a->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD ? p[(int64_t)s * kvh + g] : p[0];
}

/* K and V walked together from key j of sequence s, kv head g. */
typedef struct {
  aa_kv_walk k, v;
} aa_kv_walks;

AA_INLINE void aa_walks_init(aa_kv_walks *w, const aa_cpu_job *job, int s, int g, int j) {
  const anyattn_args *a = job->a;
  const int32_t *bt = a->block_table + (int64_t)s * a->block_table_stride;
  const int bs = job->plan->problem.block_size;
  aa_walk_init(&w->k, a->k_cache, bt, a->k_stride_block, a->k_stride_token, a->k_stride_head, g, job->kes, bs, j);
  aa_walk_init(&w->v, a->v_cache, bt, a->v_stride_block, a->v_stride_token, a->v_stride_head, g, job->kes, bs, j);
}

/* The tiled path (tiled.c), any dtype and head_dim: query tokens
 * [t0, t0 + nq) of sequence s against kv head g, or all nq tokens of s
 * against kv heads g0 .. g0 + nh - 1. */
AA_HIDDEN void aa_cpu_item_block(const aa_cpu_job *job, float *restrict ws, int s, int g, int t0, int nq);
AA_HIDDEN void aa_cpu_item_heads(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int nq);

/* The tiled path with 16-bit products (tiled16.c): query tokens [t0, t0 +
 * nq) of sequence s against kv head g, bf16 or fp16, head_dim a multiple of
 * 32, through job->mm16; only where isa.c found AVX-512 and AVX512-BF16. */
#if defined(ANYATTN_CPU_MM16)
AA_HIDDEN void aa_cpu_item16(const aa_cpu_job *job, float *restrict ws, int s, int g, int t0, int nq);
#endif

/* Whether the fused decode path reads cache rows whose length is not a
 * multiple of 32: AVX-512 builds load the block where a row ends masked
 * (AVX-512BW and VL), builds of 8-lane register vectors (AVX2) 8 elements
 * at a time (docs/design/cpu.md, Fused decode). */
#if AA_VR == 8 || (defined(__AVX512BW__) && defined(__AVX512VL__))
#define AA_DEC_TAILS 1
#else
#define AA_DEC_TAILS 0
#endif
/* Whether sequences of q_len <= dec_q take the fused decode path (decode.c):
 * bf16, fp16 (caches of the dtype or fp8) or fp32, head_dim a multiple of
 * 32, or with AA_DEC_TAILS of 8; in 8-lane builds not over fp8 caches there,
 * which the fused path read 1.5x slower than the tiled one at d80 (AVX2
 * build on the Zen 5 VM, decode 16x1024). */
AA_INLINE int aa_cpu_fused_decode(anyattn_dtype dt, anyattn_kv_dtype kv, int d) {
  if (dt != ANYATTN_DTYPE_BF16 && dt != ANYATTN_DTYPE_F16 && dt != ANYATTN_DTYPE_F32) return 0;
  return d % 32 == 0 || (AA_DEC_TAILS && d % 8 == 0 && (AA_VR == 16 || kv == ANYATTN_KV_AS_Q));
}

/* The fused decode path (decode.c): every token of sequence s (q_len <=
 * dec_q) against kv heads g0 .. g0 + nh - 1, bf16, fp16 or fp32, head_dim d
 * as aa_cpu_fused_decode allows; its q and accumulator rows are d rounded up
 * to 32 long. */
/* With job->dec_chunks > 1 the item covers key chunk `chunk` of the
 * sequence's keys and leaves its unnormalised partial result in part
 * (job->dec_slot floats) for aa_cpu_decode_merge. q: the run's items, of
 * which the item may claim its thread's next one (q->next). */
AA_HIDDEN void aa_cpu_decode_bf16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk,
                                  float *part, aa_cpu_items *q);
AA_HIDDEN void aa_cpu_decode_f16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk,
                                 float *part, aa_cpu_items *q);
AA_HIDDEN void aa_cpu_decode_f32(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk,
                                 float *part, aa_cpu_items *q);
/* The same over fp8 caches (job->kv), q and out bf16 or fp16. */
AA_HIDDEN void aa_cpu_decode_fp8(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk,
                                 float *part, aa_cpu_items *q);
/* The output (and LSE) of sequence s, kv heads g0 .. g0 + nh - 1, from the
 * job->dec_chunks partial results at parts (job->dec_slot floats apart). */
AA_HIDDEN void aa_cpu_decode_merge(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh,
                                   const float *parts);

#endif /* AA_CPU_H */
