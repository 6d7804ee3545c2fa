/* backend.c: the CPU backend's entry points. plan picks the tile sizes and
 * lays out one scratch per thread in the workspace; run cuts a batch into
 * work items (sequence, kv heads, block of query tokens) that OpenMP threads
 * take dynamically, each on the fused decode path (decode.c) or the tiled
 * path (tiled.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Query rows (tokens x group) per work item the planner aims for: each K/V
 * tile is staged once per item, so more rows share its staging and
 * prefetch. fp32 prefill 1x1024 (dev/cpu_ab.c, 2 threads, Xeon): 128 rows
 * 1.2x faster than 64, 256 the same as 128; on the Zen 5 VM 256 rows ran
 * fp32 prefill 1x1024, 4x512 and 1x500 1.03-1.05x faster than 128 (384 and
 * 512 less), on the Zen 3 EPYC (AVX2) 1.05-1.08x slower. q and the
 * accumulators of 256 rows at head_dim 128 are 256 KiB, in L2. */
#ifndef AA_CPU_TARGET_ROWS
#define AA_CPU_TARGET_ROWS (AA_VREGS >= 32 ? 256 : 128)
#endif
/* The same for the 16-bit path (tiled16.c), whose K transpose is shared by
 * all rows of an item: 256 rows 1.05-1.2x faster than 128 on prefill 1x1024,
 * 1x500, 4x512 and the mixed batch (bf16, AMX). */
#ifndef AA_CPU_TARGET_ROWS16
#define AA_CPU_TARGET_ROWS16 256
#endif
/* Decode items per thread the run keeps before it packs more kv heads into
 * one item. Xeon (16 threads, bf16 decode 64x1024): 1 -> 76.5 GB/s,
 * 2 -> 69 GB/s, 4 -> 68 GB/s, heads one at a time -> 53 GB/s; 16x4096: all
 * within 54-59 GB/s. 2 keeps some slack for ragged batches. */
#ifndef AA_CPU_ITEMS_PER_THREAD
#define AA_CPU_ITEMS_PER_THREAD 2
#endif

/* The CPU backend's plan state (plan->state). */
typedef struct {
  aa_cpu_isa isa;      /* products of the prefill items (isa.h) */
  int threads;         /* threads run() uses */
  int block_q;         /* query tokens per work item */
  int block_n;         /* keys per KV tile */
  size_t thread_bytes; /* scratch bytes per thread in the workspace */
  size_t llc_bytes;    /* the last-level cache (aa_cpu_llc_bytes) */
  size_t l2_bytes;     /* a core's L2 (aa_cpu_l2_bytes) */
  int intel;           /* aa_cpu_intel */
  int spread;          /* ANYATTN_CPU_DECODE_SPREAD, 0 where unset (aa_cpu_decode_spread) */
  int isa_forced;      /* ANYATTN_CPU_ISA named the products */
} aa_cpu_state;

static const aa_cpu_state *aa_cpu_state_of(const anyattn_plan *plan) { return (const aa_cpu_state *)plan->state; }

/* ---- device ------------------------------------------------------------- */
static int aa_cpu_threads(void) { return omp_get_max_threads(); }

static void aa_cpu_device_name(char *buf, size_t size) {
#if defined(__x86_64__)
  const char *arch = "x86_64";
#elif defined(__aarch64__)
  const char *arch = "aarch64";
#else
  const char *arch = "unknown-arch";
#endif
  char model[96] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      /* x86 says "model name", some ARM kernels "Model" or nothing at all */
      if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(model, sizeof model, "%s", v);
        model[strcspn(model, "\n")] = '\0';
        break;
      }
    }
    fclose(f);
  }
  if (model[0])
    snprintf(buf, size, "%s CPU (%s), %d threads", arch, model, aa_cpu_threads());
  else
    snprintf(buf, size, "%s CPU, %d threads", arch, aa_cpu_threads());
}

/* ---- scratch layout ------------------------------------------------------ */
/* Bytes of widened K and V one decode item may stage per tile: with all kv
 * heads of a key staged together an NHD cache is read in address order, which
 * the hardware prefetchers follow; per-head rows (256 B every 2 KiB) they do not. */
#ifndef AA_CPU_DECODE_STAGE_BYTES
#define AA_CPU_DECODE_STAGE_BYTES (256 * 1024)
#endif

/* Keys per tile of the fp32 path: for items of several kv heads (decode),
 * the widened K and V tiles of a head together fill 32 KiB, half of L1d on
 * current x86 cores, so a tile stays in L1 across the score, the softmax and
 * the P.V passes (32 at head_dim 128; 64 there made fp32 decode 16x4096
 * 1.13x slower). Items of one kv head (prefill) take twice that, 64 KiB in
 * L2: the softmax's work per row and tile, and the calls of the product
 * kernels, spread over twice the keys (fp32 prefill 1x1024 1.10x faster,
 * 4x512 1.03x, `dev/cpu_ab.c`, 2 threads; 4x the keys 1.04x slower than 2x).
 * With 16 vector registers (AVX2) prefill items take three times, 96 keys at
 * head_dim 128: whole blocks of the 6-key score kernel, none of 4 (fp32 and
 * bf16 prefill 1.00-1.09x faster than 64 keys on the 2-core EPYC). */
static int aa_cpu_block_n32(int dp, int heads) {
  const int bytes = heads ? 4096 : AA_VREGS >= 32 ? 8192 : 12288;
  const int bn = bytes / dp / AA_VL * AA_VL;
  return bn < 16 ? 16 : bn > AA_CPU_MAX_BN ? AA_CPU_MAX_BN : bn;
}

/* Keys per tile of the 16-bit path (tiled16.c): a multiple of 32 (the P.V
 * products take 32 keys at a time). Its softmax and product calls pay per row
 * and tile: prefill 1x1024 and 4x512 bf16 (AMX, dev/cpu_ab.c) ran 1.08-1.13x
 * faster at 128 than at 64, and 1.04-1.07x faster again at 256, the tile in L2. */
#ifndef AA_CPU_BLOCK_N16
#define AA_CPU_BLOCK_N16 256
#endif

static size_t aa_zmax(size_t a, size_t b) { return a > b ? a : b; }

static aa_cpu_layout aa_cpu_layout_of(const anyattn_plan *plan) {
  aa_cpu_layout L;
  const aa_cpu_state *st = aa_cpu_state_of(plan);
  const int group = plan->group, bq = st->block_q, d = plan->problem.head_dim;
  L.dp = (int)aa_round_up((size_t)d, AA_VL);
  L.bn = aa_cpu_block_n32(L.dp, 0);
  L.bnh = aa_cpu_block_n32(L.dp, 1);
  L.terms = st->isa == AA_CPU_ISA_FP32 ? 0 : plan->problem.dtype == ANYATTN_DTYPE_F16 ? 3 : 1;
  L.dec_q = 16 / group < 1 ? 1 : 16 / group;
  if (L.dec_q > bq) L.dec_q = bq;
  const size_t stage_row = (size_t)L.bnh * L.dp * sizeof(float) * 2;
  L.max_hpi = (int)(AA_CPU_DECODE_STAGE_BYTES / stage_row);
  if (L.max_hpi < 1) L.max_hpi = 1;
  if (L.max_hpi > plan->problem.num_kv_heads) L.max_hpi = plan->problem.num_kv_heads;
  const size_t prefill_rows = aa_round_up((size_t)bq * group, AA_VL); /* tiled.c's prefill items: 16 */
  const size_t decode_rows = (size_t)L.max_hpi * aa_round_up((size_t)L.dec_q * group, 4);
  L.rows = (int)(prefill_rows > decode_rows ? prefill_rows : decode_rows);
  /* The fp32 path's segments (tiled.c, decode.c), and where the 16-bit path
   * is on, the larger of those and its own (layouts in isa.h, tiled16.c). */
  size_t nq = (size_t)L.rows * L.dp, nacc = nq, nk = aa_zmax((size_t)L.max_hpi * L.bnh, (size_t)L.bn) * L.dp, nv = nk;
  size_t ns = (size_t)L.rows * L.bn, np = 0, nx = 0;
  /* the fused decode path's q and accumulator rows: d rounded up to 32 */
  nq = aa_zmax(nq, decode_rows * aa_round_up((size_t)d, 32));
  nacc = aa_zmax(nacc, decode_rows * aa_round_up((size_t)d, 32));
  nq = aa_zmax(nq, (prefill_rows + AA_LS_PAD) * L.dp);
  ns = aa_zmax(ns, (prefill_rows + AA_LS_PAD) * L.bn);
  if (L.terms) {
    const size_t dq = aa_round_up((size_t)d, 32), r32 = aa_round_up((size_t)bq * group, 32);
    const size_t kd = (size_t)L.terms * dq, bn16 = st->block_n;
    nq = aa_zmax(nq, r32 * kd / 2);
    nacc = aa_zmax(nacc, r32 * dq);
    nk = aa_zmax(nk, kd / 2 * bn16);
    nv = aa_zmax(nv, (size_t)L.terms * bn16 / 2 * dq);
    ns = aa_zmax(ns, r32 * bn16);
    np = r32 * L.terms * bn16 / 2;
    nx = 33 * kd / 2; /* 32 split rows and a zero row */
    L.rows = (int)aa_zmax((size_t)L.rows, r32);
    L.bn = (int)bn16;
  }
  size_t at = 0;
#define AA_SEG(name, n) \
  L.name = at;          \
  at += aa_round_up((size_t)(n), AA_VL)
  AA_SEG(q, nq);
  AA_SEG(acc, nacc);
  AA_SEG(k, nk);
  AA_SEG(v, nv);
  AA_SEG(s, ns);
  AA_SEG(p, np);
  AA_SEG(x, nx);
  AA_SEG(m, L.rows);
  AA_SEG(l, L.rows);
  AA_SEG(alpha, L.rows);
  AA_SEG(mx, L.rows);
  AA_SEG(lo, L.rows); /* int32 */
  AA_SEG(hi, L.rows); /* int32 */
#undef AA_SEG
  L.total = at;
  return L;
}

/* Keys per chunk of a decode sequence split over its keys, at least
 * (aa_cpu_decode_split). */
#define AA_CPU_DECODE_CHUNK_MIN 256

/* Floats of one decode item's partial result (aa_cpu_decode16's part): the
 * accumulator rows (head dim rounded up to 32), their maxima and sums. */
static size_t aa_cpu_decode_slot(const aa_cpu_layout *L, int group, int d) {
  const size_t rows = (size_t)L->max_hpi * aa_round_up((size_t)L->dec_q * group, 4);
  return rows * (aa_round_up((size_t)d, 32) + 2);
}

/* The workspace before the threads' scratch (aa_cpu_shared_bytes): the
 * prefix sums of work items per sequence, then the partial results of decode
 * items split over their keys, one slot per item, fewer than 2 *
 * AA_CPU_ITEMS_PER_THREAD * threads of them (aa_cpu_decode_split), then
 * fp32 copies of 16-bit alibi_slopes and sinks (aa_cpu_widen). */
static size_t aa_cpu_prefix_bytes(const anyattn_plan *plan) {
  return aa_round_up(((size_t)plan->limits.max_seqs + 1) * sizeof(int64_t), 256);
}
static size_t aa_cpu_slot_bytes(const anyattn_plan *plan, size_t slots, const aa_cpu_layout *L) {
  return aa_round_up(slots * aa_cpu_decode_slot(L, plan->group, plan->problem.head_dim) * sizeof(float), 256);
}
static size_t aa_cpu_vector_bytes(const anyattn_plan *plan) {
  return aa_round_up((size_t)2 * (size_t)plan->problem.num_q_heads * sizeof(float), 256);
}
static size_t aa_cpu_shared_bytes(const anyattn_plan *plan) {
  const aa_cpu_layout L = aa_cpu_layout_of(plan);
  const size_t slots = (size_t)2 * AA_CPU_ITEMS_PER_THREAD * (size_t)aa_cpu_state_of(plan)->threads;
  return aa_cpu_prefix_bytes(plan) + aa_cpu_slot_bytes(plan, slots, &L) + aa_cpu_vector_bytes(plan);
}

/* ---- plan ---------------------------------------------------------------- */
static anyattn_status aa_cpu_plan(anyattn_plan *plan) {
  const anyattn_problem *pr = &plan->problem;
  AA_CHECK(pr->config == NULL || strcmp(pr->config, "cpu") == 0, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
           "problem->config '%s' is not a CPU config (the CPU backend has one: \"cpu\")", pr->config);
  AA_CHECK(pr->head_dim >= 1 && pr->head_dim <= AA_CPU_MAX_HEAD_DIM, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim is %d; the CPU backend supports 1..%d", pr->head_dim, AA_CPU_MAX_HEAD_DIM);
  AA_CHECK(pr->dtype == ANYATTN_DTYPE_F32 || pr->dtype == ANYATTN_DTYPE_F16 || pr->dtype == ANYATTN_DTYPE_BF16,
           ANYATTN_STATUS_UNSUPPORTED_DTYPE, "problem->dtype %d is not supported by the CPU backend",
           (int)pr->dtype);
  AA_CHECK(pr->block_size >= 1, ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE, "problem->block_size is %d, must be >= 1",
           pr->block_size);

  aa_cpu_isa isa;
  AA_TRY(aa_cpu_isa_choose(pr->dtype, pr->head_dim, &isa));
  const char *isa_env = getenv("ANYATTN_CPU_ISA");
  const int isa_forced = isa_env && *isa_env && strcmp(isa_env, "auto") != 0;
  int spread = 0;
  const char *env = getenv("ANYATTN_CPU_DECODE_SPREAD");
  if (env && *env && strcmp(env, "auto") != 0) {
    spread = !strcmp(env, "1") ? 1 : !strcmp(env, "2") ? 2 : !strcmp(env, "4") ? 4 : 0;
    AA_CHECK(spread, ANYATTN_STATUS_UNSUPPORTED_CONFIG, "ANYATTN_CPU_DECODE_SPREAD='%s' is not one of auto, 1, 2, 4",
             env);
  }
  const int bn = isa == AA_CPU_ISA_FP32 ? aa_cpu_block_n32((int)aa_round_up((size_t)pr->head_dim, AA_VL), 0)
                                        : AA_CPU_BLOCK_N16;
  int bq = (isa == AA_CPU_ISA_FP32 ? AA_CPU_TARGET_ROWS : AA_CPU_TARGET_ROWS16) / plan->group;
  if (bq < 1) bq = 1;
  if (bq > plan->limits.max_tokens) bq = plan->limits.max_tokens;
  aa_cpu_state *st = (aa_cpu_state *)calloc(1, sizeof *st);
  AA_CHECK(st != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan: CPU state allocation failed");
  plan->state = st;
  st->isa = isa;
  st->block_q = bq;
  st->block_n = bn;
  st->llc_bytes = aa_cpu_llc_bytes();
  st->l2_bytes = aa_cpu_l2_bytes();
  st->intel = aa_cpu_intel();
  st->spread = spread;
  st->isa_forced = isa_forced;
  st->threads = omp_get_max_threads();
  if (st->threads < 1) st->threads = 1;
  const aa_cpu_layout L = aa_cpu_layout_of(plan);
  st->thread_bytes = aa_round_up(L.total * sizeof(float), 256);
  plan->workspace_size = aa_cpu_shared_bytes(plan) + (size_t)st->threads * st->thread_bytes;
  snprintf(plan->describe, sizeof plan->describe, "cpu: %s, block_q %d, block_n %d, %d threads, %.1f MiB workspace",
           aa_cpu_isa_name(isa), bq, bn, st->threads, (double)plan->workspace_size / (1024.0 * 1024.0));
  return ANYATTN_STATUS_OK;
}

/* ---- run ---------------------------------------------------------------------- */
static aa_cpu_job aa_cpu_job_of(const anyattn_plan *plan, const anyattn_args *a) {
  aa_cpu_job job;
  job.plan = plan;
  job.a = a;
  job.L = aa_cpu_layout_of(plan);
  job.es = aa_dtype_size(plan->problem.dtype);
  job.kv = plan->problem.kv_dtype;
  job.kes = aa_kv_dtype_size(job.kv, plan->problem.dtype);
  job.d = plan->problem.head_dim;
  job.group = plan->group;
  job.nqh = plan->problem.num_q_heads;
  job.kvh = plan->problem.num_kv_heads;
  job.bq = aa_cpu_state_of(plan)->block_q;
  job.hpi = 1;
  job.dec_pf2 = 0;
  job.dec_spread = 1;
  job.dec_amx = 1;
  job.dec_chunks = 1;
  job.dec_slot = 0;
  job.dec_part = NULL;
  job.mm16 = NULL;
#if defined(ANYATTN_CPU_MM16)
  const aa_cpu_isa isa = aa_cpu_state_of(plan)->isa;
  if (isa == AA_CPU_ISA_AMX) job.mm16 = aa_mm16_amx_ops();
  if (isa == AA_CPU_ISA_AVX512BF16) job.mm16 = aa_mm16_dpbf16_ops();
#endif
  return job;
}

/* kv heads per decode item: as many as the scratch holds, but keep at least
 * AA_CPU_ITEMS_PER_THREAD items per thread for load balance; a divisor of
 * num_kv_heads. */
static int aa_cpu_heads_per_item(const aa_cpu_job *job, int nt) {
  const anyattn_args *a = job->a;
  int n_dec = 0;
  for (int s = 0; s < a->num_seqs; s++) {
    const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
    n_dec += q_len > 0 && q_len <= job->L.dec_q;
  }
  int hpi = job->L.max_hpi;
  while (hpi > 1 && (job->kvh % hpi != 0 || (int64_t)n_dec * (job->kvh / hpi) < AA_CPU_ITEMS_PER_THREAD * nt))
    hpi--;
  return hpi;
}

/* The K and V bytes of the run's decode-like sequences. */
static double aa_cpu_decode_bytes(const aa_cpu_job *job) {
  const anyattn_args *a = job->a;
  const double row = (double)job->kvh * job->d * (double)job->kes * 2.0; /* K and V bytes per key */
  double bytes = 0.0;
  for (int s = 0; s < a->num_seqs; s++) {
    const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
    if (q_len > 0 && q_len <= job->L.dec_q) bytes += (double)a->seq_lens_k[s] * row;
  }
  return bytes;
}

/* Blocks of keys whose K and V pages the fused decode's prefetch reads at
 * once (decode.c, aa_dec_pf_head): ANYATTN_CPU_DECODE_SPREAD where set; else
 * 4 on Intel CPUs for runs whose decode rows are more than the threads' L2
 * caches hold, 1 otherwise. On the 2-core Xeon VM 4 blocks' pages at a time
 * read decode from memory 1.06-1.43x faster than one block's (AMX,
 * vdpbf16ps, fp16, fp32 and fp8 caches); decode 1x512, its rows in L2, ran
 * 0.91-0.96x with 4, hence the L2 bound. AMD CPUs keep 1 until measured
 * (docs/design/cpu.md, Fused decode). */
static int aa_cpu_decode_spread(double dec_bytes, const aa_cpu_state *st, int nt) {
  if (st->spread) return st->spread;
  return st->intel && dec_bytes > (double)st->l2_bytes * nt ? 4 : 1;
}

/* Decode batches too small to give every thread AA_CPU_ITEMS_PER_THREAD
 * items of whole head groups split each sequence's keys into dec_chunks
 * chunks instead of its heads into smaller groups (aa_cpu_heads_per_item):
 * an item of 2 of 8 kv heads reads a quarter of each token's row, and the
 * hardware prefetchers fetch the rest with it. Batches of decode-like
 * sequences only (a prefill item gives the threads work enough), fused
 * decode path only, chunks of AA_CPU_DECODE_CHUNK_MIN keys or more; the
 * chunks' partial results are merged after the items (aa_cpu_decode_merge).
 * On the 2-core Xeon VM decode 1x32768 took 9.3 ms against 5.4 for 4x8192,
 * the same bytes (docs/design/cpu.md, Work items). */
static void aa_cpu_decode_split(aa_cpu_job *job, int nt, int dec16) {
  const anyattn_args *a = job->a;
  int n_dec = 0, maxk = 0;
  for (int s = 0; s < a->num_seqs; s++) {
    const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
    if (q_len > job->L.dec_q) return;
    if (q_len > 0) {
      n_dec++;
      maxk = a->seq_lens_k[s] > maxk ? a->seq_lens_k[s] : maxk;
    }
  }
  int hpi = job->L.max_hpi;
  while (hpi > 1 && job->kvh % hpi != 0) hpi--;
  const int64_t groups = (int64_t)n_dec * (job->kvh / hpi), want = (int64_t)AA_CPU_ITEMS_PER_THREAD * nt;
  if (!dec16 || n_dec == 0 || groups >= want) return;
  int64_t c = (want + groups - 1) / groups;
  if (c > maxk / AA_CPU_DECODE_CHUNK_MIN) c = maxk / AA_CPU_DECODE_CHUNK_MIN;
  if (c < 2) return;
  job->hpi = hpi;
  job->dec_chunks = (int)c;
  job->dec_slot = aa_cpu_decode_slot(&job->L, job->group, job->d);
  job->dec_part = (float *)((char *)a->workspace + aa_cpu_prefix_bytes(job->plan));
}

/* Work items of sequence s: decode-like sequences (q_len <= dec_q) take
 * hpi kv heads per item (and dec_chunks chunks of their keys), the others
 * one kv head and block_q tokens. */
AA_INLINE int64_t aa_cpu_items_of(const aa_cpu_job *job, int q_len) {
  if (q_len == 0) return 0;
  if (q_len <= job->L.dec_q) return (int64_t)(job->kvh / job->hpi) * job->dec_chunks;
  return (((int64_t)q_len + job->bq - 1) / job->bq) * job->kvh;
}

/* Work item `it` of the run (q) on this thread's scratch ws. dec16: decode
 * items take the fused path (aa_cpu_fused_decode), which may claim the
 * thread's next item (q->next). */
AA_INLINE void aa_cpu_run_item(const aa_cpu_job *job, float *restrict ws, aa_cpu_items *q, int64_t it, int dec16) {
  const anyattn_args *a = job->a;
  int s, g0, chunk;
  int64_t local;
  const int dec = aa_cpu_item_at(job, q->prefix, it, &s, &local, &g0, &chunk);
  const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
  if (dec) {
    float *part = job->dec_chunks > 1 ? job->dec_part + (size_t)it * job->dec_slot : NULL;
    if (dec16 && job->kv != ANYATTN_KV_AS_Q)
      aa_cpu_decode_fp8(job, ws, s, g0, job->hpi, job->d, chunk, part, q);
    else if (dec16 && job->plan->problem.dtype == ANYATTN_DTYPE_BF16)
      aa_cpu_decode_bf16(job, ws, s, g0, job->hpi, job->d, chunk, part, q);
    else if (dec16 && job->plan->problem.dtype == ANYATTN_DTYPE_F16)
      aa_cpu_decode_f16(job, ws, s, g0, job->hpi, job->d, chunk, part, q);
    else if (dec16)
      aa_cpu_decode_f32(job, ws, s, g0, job->hpi, job->d, chunk, part, q);
    else aa_cpu_item_heads(job, ws, s, g0, job->hpi, q_len);
  } else {
    /* the last query blocks see the most keys under a causal mask: start them first */
    const int nb = (int)(((int64_t)q_len + job->bq - 1) / job->bq);
    const int qb = nb - 1 - (int)(local / job->kvh);
    const int t0 = qb * job->bq, g = (int)(local % job->kvh), nq = q_len - t0 < job->bq ? q_len - t0 : job->bq;
#if defined(ANYATTN_CPU_MM16)
    if (job->mm16) {
      aa_cpu_item16(job, ws, s, g, t0, nq);
      return;
    }
#endif
    aa_cpu_item_block(job, ws, s, g, t0, nq);
  }
}

/* A 16-bit alibi_slopes or sinks vector widened into dst (num_q_heads fp32);
 * the kernels read fp32 only. */
static const float *aa_cpu_widen(const void *v, anyattn_dtype dt, int n, float *dst) {
  if (v == NULL || dt == ANYATTN_DTYPE_F32) return (const float *)v;
  const uint16_t *h = (const uint16_t *)v;
  for (int i = 0; i < n; i++) dst[i] = dt == ANYATTN_DTYPE_BF16 ? aa_bf16_to_f32(h[i]) : aa_f16_to_f32(h[i]);
  return dst;
}

static anyattn_status aa_cpu_run(const anyattn_plan *plan, const anyattn_args *a_in) {
  if (a_in->num_tokens == 0 || a_in->num_seqs == 0) return ANYATTN_STATUS_OK;
  /* the vectors as fp32, in the workspace after the decode slots */
  const int hq = plan->problem.num_q_heads;
  const size_t shared_bytes = aa_cpu_shared_bytes(plan);
  float *vec = (float *)((char *)a_in->workspace + shared_bytes - aa_cpu_vector_bytes(plan));
  anyattn_args a32 = *a_in;
  a32.alibi_slopes = aa_cpu_widen(a_in->alibi_slopes, a_in->alibi_slopes_dtype, hq, vec);
  a32.sinks = aa_cpu_widen(a_in->sinks, a_in->sinks_dtype, hq, vec + hq);
  a32.alibi_slopes_dtype = a32.sinks_dtype = ANYATTN_DTYPE_F32;
  const anyattn_args *a = &a32;
  const aa_cpu_state *st = aa_cpu_state_of(plan);
  aa_cpu_job job = aa_cpu_job_of(plan, a);
  int nt = omp_get_max_threads();
  if (nt > st->threads) nt = st->threads; /* the workspace holds that many scratches */
  const int dec16 = aa_cpu_fused_decode(plan->problem.dtype, job.kv, job.d);
  job.hpi = aa_cpu_heads_per_item(&job, nt);
  aa_cpu_decode_split(&job, nt, dec16);
  /* the second prefetch (decode.c, AA_DEC_PF_TWICE) pays where the decode
   * rows are more than the last-level cache: from memory; below that they may
   * stay in cache from call to call, where it costs (docs/design/cpu.md,
   * Fused decode) */
  const double dec_bytes = aa_cpu_decode_bytes(&job);
  job.dec_pf2 = dec_bytes > (double)st->llc_bytes;
  job.dec_spread = aa_cpu_decode_spread(dec_bytes, st, nt);
  /* The fused decode's scores on AMX, where the plan has it, unless the run
   * reads its decode rows from memory: there the vdpbf16ps scores, which
   * prefetch the K lines from their own loop, read faster (on the 2-core
   * Xeon VM 1.08-1.12x from 134 MB of rows up, level at 100 MB, 0.91x at 67
   * MB, whose rows stay in part in its L3; its cpuid L3 is 480 MB: a quarter
   * of it is the bound). ANYATTN_CPU_ISA=amx keeps AMX for every run
   * (docs/design/cpu.md, Fused decode). */
  job.dec_amx = st->isa_forced || dec_bytes <= (double)st->llc_bytes / 4;

  /* Work items per sequence, as prefix sums, so that one flat dynamic loop
   * covers a ragged batch without empty iterations. */
  int64_t *prefix = (int64_t *)a->workspace;
  prefix[0] = 0;
  for (int s = 0; s < a->num_seqs; s++)
    prefix[s + 1] = prefix[s] + aa_cpu_items_of(&job, a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s]);
  const int64_t total = prefix[a->num_seqs];
  char *thread_base = (char *)a->workspace + shared_bytes;
  if (nt > total) nt = (int)total;
  if (nt < 1) nt = 1;

  int64_t counter = 0; /* items claimed after the threads' first ones */
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    /* the team may have fewer threads than asked for (nested in a caller's parallel region) */
    const int tid = omp_get_thread_num(), team = omp_get_num_threads();
    float *ws = (float *)(thread_base + (size_t)tid * st->thread_bytes);
    /* Items claimed one at a time after the first, as they differ in cost
     * (causal diagonal, ragged lengths); a decode item claims its thread's
     * next one before its end (aa_cpu_items). The first items go by thread
     * number, so that a batch run again meets its rows in the same cores'
     * caches (decode 1x512, two items on two threads, whose rows fit the
     * cores' L2: claimed in order of arrival, the items changed cores from
     * call to call and read from memory, 2.5x slower). */
    aa_cpu_items q = {
        .counter = &counter, .first = team, .total = total, .prefix = prefix, .next = -1, .threads = team, .warm = 0};
    for (int64_t it = tid; it < total;) {
      q.next = -1;
      aa_cpu_run_item(&job, ws, &q, it, dec16);
      it = q.next >= 0 ? q.next : aa_cpu_claim(&q);
    }
#pragma omp barrier
    if (job.dec_chunks > 1) { /* after the barrier: every chunk's partial result is in */
      const int groups = job.kvh / job.hpi;
#pragma omp for schedule(dynamic, 1)
      for (int64_t p = 0; p < (int64_t)a->num_seqs * groups; p++) {
        const int s = (int)(p / groups), g = (int)(p % groups);
        if (prefix[s + 1] == prefix[s]) continue; /* no query tokens */
        aa_cpu_decode_merge(&job, ws, s, g * job.hpi, job.hpi,
                            job.dec_part + (size_t)(prefix[s] + (int64_t)g * job.dec_chunks) * job.dec_slot);
      }
    }
  }
  return ANYATTN_STATUS_OK;
}

/* ---- the backend table ------------------------------------------------------------ */
static anyattn_status aa_cpu_device_count(int *count) {
  *count = 1;
  return ANYATTN_STATUS_OK;
}

static anyattn_status aa_cpu_context_init(anyattn_context *ctx) {
  AA_CHECK(ctx->device == 0, ANYATTN_STATUS_NO_DEVICE, "device %d: the CPU backend has device 0 only", ctx->device);
  aa_cpu_device_name(ctx->device_name, sizeof ctx->device_name);
  ctx->num_sms = aa_cpu_threads();
  return ANYATTN_STATUS_OK;
}

static void aa_cpu_plan_free(anyattn_plan *plan) {
  free(plan->state);
  plan->state = NULL;
}

static int aa_cpu_config_count(void) { return 0; }

static anyattn_status aa_cpu_config_get(int index, anyattn_config_info *info) {
  (void)info;
  return aa_error(ANYATTN_STATUS_INVALID_SIZE, "index %d: the CPU backend has no config table", index);
}

const aa_backend_ops *aa_cpu_backend(void) {
  static const aa_backend_ops ops = {
      .id = ANYATTN_BACKEND_CPU,
      .device_count = aa_cpu_device_count,
      .context_init = aa_cpu_context_init,
      .plan = aa_cpu_plan,
      .plan_free = aa_cpu_plan_free,
      .run = aa_cpu_run,
      .config_count = aa_cpu_config_count,
      .config_get = aa_cpu_config_get,
  };
  return &ops;
}
