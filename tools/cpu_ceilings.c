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

double aa_cpu_read_bandwidth_gbs(void) {
  const size_t n = (size_t)1 << 28; /* 1 GiB of floats */
  float *buf = (float *)aligned_alloc(4096, n * sizeof(float));
  if (!buf) return 0.0;
  /* First touch in parallel with the same static split as the reads, so
   * pages land near the threads that read them (NUMA hosts). */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);

  double gbs[CEIL_REPS];
  for (int r = 0; r < CEIL_REPS; r++) {
    float sum = 0.0f;
    const double t0 = omp_get_wtime();
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += buf[i];
    const double t = omp_get_wtime() - t0;
    ceil_sink = sum;
    gbs[r] = (double)(n * sizeof(float)) / t * 1e-9;
  }
  free(buf);
  return ceil_median(gbs, CEIL_REPS);
}

#if defined(__AVX512F__)
#define CEIL_VBYTES 64
#elif defined(__AVX__)
#define CEIL_VBYTES 32
#else
#define CEIL_VBYTES 16
#endif
typedef float ceil_vf __attribute__((vector_size(CEIL_VBYTES)));
#define CEIL_LANES (CEIL_VBYTES / 4)
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
