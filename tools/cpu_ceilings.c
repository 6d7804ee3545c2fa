/* cpu_ceilings.c: the host's streaming read bandwidth and fp32 FMA peak,
 * measured with OpenMP over all threads, for the CPU roofline figures. */
#include "ceilings.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define CEIL_REPS 5

static int ceil_cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double ceil_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, ceil_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

double aa_cpu_read_bandwidth_gbs(void) {
  const size_t n = (size_t)1 << 28; /* 1 GiB of floats */
  float *buf = (float *)aligned_alloc(4096, n * sizeof(float));
  if (!buf) return 0.0;
  /* First touch in parallel with the same static split as the reads, so
   * pages land near the threads that read them (NUMA hosts). */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);

  /* The two reads alternate, so drift on a shared host hits both; the
   * ceiling is the faster one's median. The plain sum alone read 12% slower
   * than the prefetching one on the 2-core Xeon (23.1 against 26.2 GB/s, 12
   * alternating rounds), below what the decode path's own reads get. */
  double gbs[2][CEIL_REPS];
  for (int r = 0; r < CEIL_REPS; r++)
    for (int k = 0; k < 2; k++) gbs[k][r] = ceil_read_pass(buf, n, k);
  free(buf);
  const double plain = ceil_median(gbs[0], CEIL_REPS), pf = ceil_median(gbs[1], CEIL_REPS);
  return plain > pf ? plain : pf;
}

/* 12 independent chains cover FMA latency (4-5 cycles) x 2 pipes with room. */
#define CEIL_CHAINS 12

double aa_cpu_fma_peak_gflops(void) {
  const long iters = 20L * 1000 * 1000;
  double gf[CEIL_REPS];
  for (int r = 0; r < CEIL_REPS; r++) {
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
    gf[r] = 2.0 * CEIL_LANES * CEIL_CHAINS * (double)iters * threads / t * 1e-9;
  }
  return ceil_median(gf, CEIL_REPS);
}
