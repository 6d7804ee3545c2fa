/* cpu_stream_probe.c: how fast the CPU streams a paged K/V cache under math,
 * apart from the library. 32 KiB pages (16 keys x 8 kv heads x 128 bf16 dims,
 * the bench's layout) in shuffled order, split between the threads; every
 * 64-byte line is loaded and feeds W FMAs (W = 0, 4, 8, 12 or 16), and a
 * software prefetch (hint T0, T1 or NTA) goes D lines ahead in the same order.
 * The lines of a page are taken in address order, or with `head` head by head
 * as the decode's math reads them (a head's 4 lines of each key, keys 2 KiB
 * apart); the pages are shuffled, or with `ordered` taken in address order;
 * with K > 1 only every K-th line is prefetched. With S > 1 (2, 4 or 8) a
 * thread reads S pages at a time, their lines interleaved (line 0 of each,
 * then line 1, ...), as decode reads a block's K and V pages together, and
 * D counts lines ahead within each page stream (into the next S pages at
 * the end of a page). Prints GB/s, the best of 7 passes.
 *
 *   cc -O2 -march=native -fopenmp -o /tmp/cpu_stream_probe dev/cpu_stream_probe.c
 *   /tmp/cpu_stream_probe MiB W D [t0|t1|nta] [addr|head] [shuffled|ordered] [K] [S]
 *   /tmp/cpu_stream_probe 512 16 0 t1 head; /tmp/cpu_stream_probe 512 16 1024 t1 head
 *   /tmp/cpu_stream_probe 512 0 0 t1 addr ordered; /tmp/cpu_stream_probe 512 16 256 t1 addr shuffled 4
 *   /tmp/cpu_stream_probe 1024 0 128 t0 addr shuffled 1 2      (two page streams a thread)
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PAGE = 32768, LINES = PAGE / 64 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Byte offset of the l-th line of a page in the chosen order. */
static size_t line_offset(size_t l, int head) {
  if (!head) return l * 64;
  const size_t hb = l >> 6, key = (l >> 2) & 15, ln = l & 3; /* 8 heads x 16 keys x 4 lines */
  return key * 2048 + hb * 256 + ln * 64;
}

#define FM(k) acc[2 + (k) % 6] = _mm256_fmadd_ps(acc[2 + (k) % 6], x, v0);

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MiB W D [t0|t1|nta] [addr|head] [shuffled|ordered] [K] [S]\n", argv[0]);
    return 2;
  }
  const size_t bytes = (size_t)atoi(argv[1]) << 20, np = bytes / PAGE;
  const int W = atoi(argv[2]), D = atoi(argv[3]);
  const char *hint = argc > 4 ? argv[4] : "t1";
  const int head = argc > 5 && !strcmp(argv[5], "head");
  const int ordered = argc > 6 && !strcmp(argv[6], "ordered");
  const int K = argc > 7 ? atoi(argv[7]) : 1, S = argc > 8 ? atoi(argv[8]) : 1;
  if (np < 2 || (W != 0 && W != 4 && W != 8 && W != 12 && W != 16) || D < 0 || K < 1 ||
      (S != 1 && S != 2 && S != 4 && S != 8) || (S > 1 && D >= LINES)) {
    fprintf(stderr,
            "cpu_stream_probe: MiB >= 1, W in {0, 4, 8, 12, 16}, D >= 0, K >= 1, S in {1, 2, 4, 8} "
            "(D < %d when S > 1)\n",
            LINES);
    return 2;
  }
  char *buf = aligned_alloc(4096, np * PAGE);
  int *perm = malloc(np * sizeof *perm);
  if (!buf || !perm) return 1;
  memset(buf, 1, np * PAGE);
  for (size_t i = 0; i < np; i++) perm[i] = (int)i;
  srand(1);
  for (size_t i = np - 1; i > 0 && !ordered; i--) {
    const size_t j = (size_t)rand() % (i + 1);
    const int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  double best = 1e30;
  float sink = 0;
  for (int pass = 0; pass < 7; pass++) {
    const double t0 = now();
#pragma omp parallel reduction(+ : sink)
    {
      const int nt = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t lo = np * id / nt, hi = np * (id + 1) / nt, nl = (hi - lo) * LINES;
      __m256 acc[8];
      for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
      const __m256 x = _mm256_set1_ps(1.0001f);
#define PREFETCH(p)                    \
  do {                                 \
    if (hint[1] == '0')                \
      _mm_prefetch((p), _MM_HINT_T0);  \
    else if (hint[0] == 'n')           \
      _mm_prefetch((p), _MM_HINT_NTA); \
    else                               \
      _mm_prefetch((p), _MM_HINT_T1);  \
  } while (0)
#define CONSUME(a)                                                                                        \
  do {                                                                                                    \
    const __m256 v0 = _mm256_load_ps((const float *)(a)), v1 = _mm256_load_ps((const float *)((a) + 32)); \
    acc[0] = _mm256_add_ps(acc[0], v0);                                                                   \
    acc[1] = _mm256_add_ps(acc[1], v1);                                                                   \
    switch (W) { /* constant FMA chains per line, no loop */                                              \
      case 16:                                                                                            \
        FM(15)                                                                                            \
        FM(14) FM(13) FM(12)                                    /* fall through */                        \
            case 12 : FM(11) FM(10) FM(9) FM(8)                 /* fall through */                        \
                      case 8 : FM(7) FM(6) FM(5) FM(4)          /* fall through */                        \
                               case 4 : FM(3) FM(2) FM(1) FM(0) /* fall through */                        \
                                        default : break;                                                  \
    }                                                                                                     \
  } while (0)
      if (S == 1)
        for (size_t l = 0; l < nl; l++) {
          if (D && l + D < nl && l % (size_t)K == 0) {
            const size_t l2 = l + D;
            PREFETCH(buf + (size_t)perm[lo + l2 / LINES] * PAGE + line_offset(l2 % LINES, head));
          }
          CONSUME(buf + (size_t)perm[lo + l / LINES] * PAGE + line_offset(l % LINES, head));
        }
      else /* S pages at a time, their lines interleaved; D lines ahead in each */
        for (size_t g = 0, ng = (hi - lo) / (size_t)S; g < ng; g++) {
          const char *p[8], *q[8];
          for (int k = 0; k < S; k++) {
            p[k] = buf + (size_t)perm[lo + g * S + k] * PAGE;
            q[k] = g + 1 < ng ? buf + (size_t)perm[lo + (g + 1) * S + k] * PAGE : NULL;
          }
          for (int ln = 0; ln < LINES; ln++)
            for (int k = 0; k < S; k++) {
              const int l2 = ln + D;
              if (D && ln % K == 0 && (l2 < LINES || q[k]))
                PREFETCH(l2 < LINES ? p[k] + line_offset(l2, head) : q[k] + line_offset(l2 - LINES, head));
              CONSUME(p[k] + line_offset(ln, head));
            }
        }
#undef CONSUME
#undef PREFETCH
      float f[8];
      __m256 s = acc[0];
      for (int i = 1; i < 8; i++) s = _mm256_add_ps(s, acc[i]);
      _mm256_storeu_ps(f, s);
      sink += f[0];
    }
    const double t = now() - t0;
    if (t < best) best = t;
  }
  printf(
      "%zu MiB, %d FMAs a line, prefetch %d lines ahead (%s, every %d), %s order, %s pages, %d at a time: %.1f GB/s "
      "(%.2f ms)%s\n",
      bytes >> 20, W, D, hint, K, head ? "head" : "address", ordered ? "ordered" : "shuffled", S,
      np * PAGE / best * 1e-9, best * 1e3, sink == 12345.0f ? " " : "");
  free(perm);
  free(buf);
  return 0;
}
