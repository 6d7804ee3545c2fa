/* ceilings.h: measured hardware ceilings of the host CPU, the denominators of
 * the CPU backend's roofline figures (bench prints achieved / ceiling). */
#ifndef ANYATTN_TOOLS_CEILINGS_H
#define ANYATTN_TOOLS_CEILINGS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Streaming read bandwidth in GB/s (1e9 bytes/s): every OpenMP thread sums its
 * share of a 1 GiB buffer, far larger than any last-level cache, with two
 * loops in turn (a plain sum; four vector accumulators and a software
 * prefetch into L2, as the decode path reads); the faster loop's median of a
 * few repetitions. Takes about a second (most of it first-touching the
 * buffer). Returns 0 if the buffer cannot be allocated. */
double aa_cpu_read_bandwidth_gbs(void);

/* Peak fp32 FMA throughput in GFLOP/s over all OpenMP threads: independent
 * FMA chains of the native vector width, 2 flops per lane per FMA; median of
 * a few repetitions. Takes well under a second. */
double aa_cpu_fma_peak_gflops(void);

#ifdef __cplusplus
}
#endif
#endif
