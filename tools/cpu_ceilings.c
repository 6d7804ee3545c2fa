/* cpu_ceilings.c: the host's streaming read bandwidth, the read bandwidth of
 * a shuffled paged layout and the fp32 FMA peak, measured with OpenMP over
 * all threads, for the CPU roofline figures (ceilings.h). */
#include "ceilings.h"
#include "tl_util.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CEIL_REPS 5

/* Results land here so the compiler cannot drop the loops that make them. */
static volatile float ceil_sink;

#if defined(__AVX512F__)
#define CEIL_VBYTES 64
#elif defined(__AVX__)
#define CEIL_VBYTES 32
#else
#define CEIL_VBYTES 16
#endif
typedef float ceil_vf __attribute__((vector_size(CEIL_VBYTES)));
#define CEIL_LANES (CEIL_VBYTES / 4)
/* One timed pass over buf (n floats) by every thread, its static share
 * each. kind 0: the plain OpenMP sum, one vector accumulator; kind 1: four
 * vector accumulators, 256 bytes a step, and a software prefetch into L2
 * 4 KiB ahead, the way the decode path reads its K/V. */
static double ceil_read_pass(const float *buf, size_t n, int kind) {
  float sum = 0.0f;
  const double t0 = omp_get_wtime();
  if (kind == 0) {
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += buf[i];
  } else {
    const size_t step = 4 * CEIL_LANES, blocks = n / step;
#pragma omp parallel reduction(+ : sum)
    {
      ceil_vf acc[4] = {{0}};
#pragma omp for schedule(static)
      for (size_t b = 0; b < blocks; b++) {
        const float *p = buf + b * step;
        for (int o = 0; o < 4 * CEIL_VBYTES; o += 64) __builtin_prefetch((const char *)p + 4096 + o, 0, 2);
        for (int a = 0; a < 4; a++) acc[a] += *(const ceil_vf *)(p + a * CEIL_LANES);
      }
      const ceil_vf t = acc[0] + acc[1] + acc[2] + acc[3];
      for (int l = 0; l < CEIL_LANES; l++) sum += t[l];
    }
  }
  const double t = omp_get_wtime() - t0;
  ceil_sink = sum;
  return (double)(n * sizeof(float)) / t * 1e-9;
}

/* The page of order position i: perm[i], or i itself where perm is NULL. */
static const char *ceil_page(const char *buf, const uint32_t *perm, size_t i, size_t pg) {
  return buf + (size_t)(perm ? perm[i] : i) * pg;
}

/* One timed pass over the np pages of pg bytes at buf, in the order perm
 * lists them (NULL: address order), by every thread, its static share of
 * that order: native vector loads into four accumulators. Kinds 0-2 read
 * one page at a time, its lines in address order: kind 0 with no software
 * prefetch, kind 1 (2) with a prefetch into L1 (L2) of the line 256 lines
 * (16 KiB) ahead in the same order. Kind 3 reads CEIL_STREAMS pages at a
 * time, their lines interleaved (line 0 of each, then line 1, ...), with a
 * prefetch into L1 of the line 32 lines ahead in each page (into the next
 * group's pages at the end): on the 2-core Xeon VM a thread's misses then
 * go to several pages at once, and 4 streams read 28.6 GB/s over shuffled
 * 32 KiB pages and 34.4-34.8 in address order, against 18.5 and 29.1 for
 * one page at a time (docs/design/cpu.md, Bounds). */
enum { CEIL_STREAMS = 4 };
static double ceil_paged_pass(const char *buf, const uint32_t *perm, size_t np, size_t pg, int kind) {
  enum { AHEAD = 256, AHEAD_S = 32 };
  const size_t lines = pg / 64;
  float sum = 0.0f;
  const double t0 = omp_get_wtime();
#pragma omp parallel reduction(+ : sum)
  {
    const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    const size_t lo = np * id / nt, hi = np * (id + 1) / nt;
    ceil_vf acc[4] = {{0}};
    if (kind < 3) {
      size_t fp = lo + AHEAD / lines, fl = AHEAD % lines; /* the prefetch cursor: page, line */
      for (size_t i = lo; i < hi; i++) {
        const char *page = ceil_page(buf, perm, i, pg);
        for (size_t l = 0; l < lines; l++) {
          if (kind && fp < hi) {
            const char *f = ceil_page(buf, perm, fp, pg) + fl * 64;
            if (kind == 1)
              __builtin_prefetch(f, 0, 3);
            else
              __builtin_prefetch(f, 0, 2);
            if (++fl == lines) fl = 0, fp++;
          }
          for (int o = 0; o < 64; o += CEIL_VBYTES)
            acc[(o / CEIL_VBYTES) & 3] += *(const ceil_vf *)(page + l * 64 + (size_t)o);
        }
      }
    } else {
      /* groups of CEIL_STREAMS pages; a share's last pages, fewer than a group, one at a time */
      const size_t ng = (hi - lo) / CEIL_STREAMS;
      for (size_t g = 0; g < ng; g++) {
        const size_t i0 = lo + g * CEIL_STREAMS;
        for (size_t l = 0; l < lines; l++)
          for (size_t k = 0; k < CEIL_STREAMS; k++) {
            const size_t fg = g + (l + AHEAD_S) / lines, fl = (l + AHEAD_S) % lines;
            if (fg < ng) __builtin_prefetch(ceil_page(buf, perm, lo + fg * CEIL_STREAMS + k, pg) + fl * 64, 0, 3);
            const char *line = ceil_page(buf, perm, i0 + k, pg) + l * 64;
            for (int o = 0; o < 64; o += CEIL_VBYTES) acc[(o / CEIL_VBYTES) & 3] += *(const ceil_vf *)(line + o);
          }
      }
      for (size_t i = lo + ng * CEIL_STREAMS; i < hi; i++)
        for (size_t l = 0; l < lines; l++)
          for (int o = 0; o < 64; o += CEIL_VBYTES)
            acc[(o / CEIL_VBYTES) & 3] += *(const ceil_vf *)(ceil_page(buf, perm, i, pg) + l * 64 + (size_t)o);
    }
    const ceil_vf t = acc[0] + acc[1] + acc[2] + acc[3];
    for (int l = 0; l < CEIL_LANES; l++) sum += t[l];
  }
  const double t = omp_get_wtime() - t0;
  ceil_sink = sum;
  return (double)(np * pg) / t * 1e-9;
}

/* 12 independent chains cover FMA latency (4-5 cycles) x 2 pipes with room. */
#define CEIL_CHAINS 12
/* FMA steps a pass: about 30 ms (a whole measurement) and 8 ms (one sample) on a Zen 5 core */
#define CEIL_FMA_ITERS (20L * 1000 * 1000)
#define CEIL_FMA_SAMPLE_ITERS (5L * 1000 * 1000)

/* One timed pass of iters steps of the chains on every thread. */
static double ceil_fma_pass(long iters) {
  int threads = 1;
  const double t0 = omp_get_wtime();
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    ceil_vf acc[CEIL_CHAINS], mul, add;
    for (int l = 0; l < CEIL_LANES; l++) {
      mul[l] = 0.99999f; /* converges to add / (1 - mul): no overflow, no denormals */
      add[l] = 1e-5f * (float)(omp_get_thread_num() + 1);
    }
    for (int c = 0; c < CEIL_CHAINS; c++) acc[c] = add * (float)c;
    for (long i = 0; i < iters; i++) {
      /* opaque to the optimiser, so the chains cannot be folded or hoisted */
      __asm__ volatile("" : "+x"(mul));
#pragma GCC unroll 16
      for (int c = 0; c < CEIL_CHAINS; c++) acc[c] = acc[c] * mul + add;
    }
    ceil_vf s = acc[0];
    for (int c = 1; c < CEIL_CHAINS; c++) s += acc[c];
    float t = 0.0f;
    for (int l = 0; l < CEIL_LANES; l++) t += s[l];
#pragma omp atomic
    ceil_sink += t;
  }
  const double t = omp_get_wtime() - t0;
  return 2.0 * CEIL_LANES * CEIL_CHAINS * (double)iters * threads / t * 1e-9;
}

/* ---- the buffer, held for a run -------------------------------------------------- */
/* One buffer serves both reads: the streaming read takes it in order, the
 * paged read as np pages of pg bytes in the order perm lists. */
struct aa_cpu_ceilings {
  float *buf; /* n floats */
  size_t n;
  uint32_t *perm;
  size_t np, pg;
};

void aa_cpu_ceilings_free(aa_cpu_ceilings *c) {
  if (!c) return;
  free(c->buf);
  free(c->perm);
  free(c);
}

aa_cpu_ceilings *aa_cpu_ceilings_create(size_t page_bytes) {
  const size_t bytes = (size_t)1 << 30; /* 1 GiB, far larger than any last-level cache */
  if (page_bytes < 64 || page_bytes % 64 || page_bytes > bytes / 128) return NULL;
  aa_cpu_ceilings *c = (aa_cpu_ceilings *)calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n = bytes / sizeof(float);
  c->pg = page_bytes;
  c->np = bytes / page_bytes;
  c->buf = (float *)aligned_alloc(4096, bytes);
  c->perm = (uint32_t *)malloc(c->np * sizeof *c->perm);
  if (!c->buf || !c->perm) {
    aa_cpu_ceilings_free(c);
    return NULL;
  }
  /* First touch in parallel with the same static split as the streaming
   * read, so pages land near the threads that read them (NUMA hosts; the
   * paged read, like a paged cache, reads pages wherever they landed). */
  float *buf = c->buf;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < c->n; i++) buf[i] = (float)(i & 7);
  /* The paged order is a fixed shuffle (Fisher-Yates on a xorshift), so every
   * run reads the same pattern. */
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (size_t i = 0; i < c->np; i++) c->perm[i] = (uint32_t)i;
  for (size_t i = c->np - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const size_t j = (size_t)(x % (i + 1));
    const uint32_t t = c->perm[i];
    c->perm[i] = c->perm[j], c->perm[j] = t;
  }
  return c;
}

static double ceil_max(const double *v, int n) {
  double m = 0.0;
  for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
  return m;
}

/* The streaming read's third loop: the buffer in address order as 32 KiB
 * pages, CEIL_STREAMS at a time (ceil_paged_pass kind 3). */
#define CEIL_STREAM_PAGE 32768
static double ceil_streams_pass(const aa_cpu_ceilings *c) {
  return ceil_paged_pass((const char *)c->buf, NULL, c->n * sizeof(float) / CEIL_STREAM_PAGE, CEIL_STREAM_PAGE, 3);
}

void aa_cpu_ceilings_sample(aa_cpu_ceilings *c, aa_cpu_ceiling_sample *s) {
  double r[4];
  for (int k = 0; k < 2; k++) r[k] = ceil_read_pass(c->buf, c->n, k);
  r[2] = ceil_streams_pass(c);
  s->read_gbs = ceil_max(r, 3);
  for (int k = 0; k < 4; k++) r[k] = ceil_paged_pass((const char *)c->buf, c->perm, c->np, c->pg, k);
  s->paged_gbs = ceil_max(r, 4);
  s->fma_gflops = ceil_fma_pass(CEIL_FMA_SAMPLE_ITERS);
}

void aa_cpu_ceilings_measure(aa_cpu_ceilings *c, aa_cpu_ceiling_sample *s) {
  /* Each loop's median over the repetitions, the loops alternating so that
   * drift on a shared host hits all; a kind's figure is its faster loop's
   * median. The plain sum alone read 12% slower than the prefetching one on
   * the 2-core Xeon (23.1 against 26.2 GB/s, 12 alternating rounds). */
  double rd[3][CEIL_REPS], pg[4][CEIL_REPS], fm[CEIL_REPS];
  for (int i = 0; i < CEIL_REPS; i++) {
    for (int k = 0; k < 2; k++) rd[k][i] = ceil_read_pass(c->buf, c->n, k);
    rd[2][i] = ceil_streams_pass(c);
    for (int k = 0; k < 4; k++) pg[k][i] = ceil_paged_pass((const char *)c->buf, c->perm, c->np, c->pg, k);
    fm[i] = ceil_fma_pass(CEIL_FMA_ITERS);
  }
  double m[4];
  for (int k = 0; k < 3; k++) m[k] = tl_median(rd[k], CEIL_REPS);
  s->read_gbs = ceil_max(m, 3);
  for (int k = 0; k < 4; k++) m[k] = tl_median(pg[k], CEIL_REPS);
  s->paged_gbs = ceil_max(m, 4);
  s->fma_gflops = tl_median(fm, CEIL_REPS);
}
