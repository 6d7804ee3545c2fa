/* ceilings.h: measured hardware ceilings of the host CPU, the denominators of
 * the CPU backend's roofline figures (bench prints achieved / ceiling). */
#ifndef ANYATTN_TOOLS_CEILINGS_H
#define ANYATTN_TOOLS_CEILINGS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ceilings of the CPU roofline figures, over all OpenMP threads:
 * - read_gbs: streaming read bandwidth in GB/s (1e9 bytes/s): every thread
 *   sums its share of a 1 GiB buffer, far larger than any last-level cache,
 *   the fastest of three loops (a plain sum; four vector accumulators and a
 *   software prefetch into L2; 32 KiB pages in address order read 4 at a
 *   time, their lines interleaved);
 * - paged_gbs: the read bandwidth of the bench's paged layout: the same 1 GiB
 *   as pages of page_bytes (a block's K or V rows) in a fixed shuffled order,
 *   each thread its share of the order; the fastest of four loops (a page at
 *   a time, its lines in address order, with no software prefetch or a
 *   prefetch into L1 or L2 256 lines ahead in the same order; 4 pages at a
 *   time, their lines interleaved, as the fused decode reads the blocks
 *   ahead on Intel CPUs). What paged K/V reads at with no math;
 * - fma_gflops: fp32 FMA throughput, independent chains of the native vector
 *   width, 2 flops per lane per FMA. */
typedef struct {
  double read_gbs, paged_gbs, fma_gflops;
} aa_cpu_ceiling_sample;

typedef struct aa_cpu_ceilings aa_cpu_ceilings;

/* The reads' buffer, allocated and first-touched (about a second), held
 * until aa_cpu_ceilings_free. NULL when page_bytes is not a multiple of 64
 * from 64 to 8 MiB or memory runs out. */
aa_cpu_ceilings *aa_cpu_ceilings_create(size_t page_bytes);
void aa_cpu_ceilings_free(aa_cpu_ceilings *c);

/* The ceilings at the start of a run: each loop's median of five passes, the
 * loops alternating. */
void aa_cpu_ceilings_measure(aa_cpu_ceilings *c, aa_cpu_ceiling_sample *s);

/* One pass of each loop (about 0.1 s), for a figure measured between the
 * timed calls of a case: on a shared VM the memory's speed can change by
 * more than 1.5x within seconds, so a percentage is only meaningful against
 * a ceiling taken beside the same calls. */
void aa_cpu_ceilings_sample(aa_cpu_ceilings *c, aa_cpu_ceiling_sample *s);

#ifdef __cplusplus
}
#endif
#endif
