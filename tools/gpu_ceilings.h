/* gpu_ceilings.h: GPU ceilings measured in the same run as a benchmark. */
#ifndef ANYATTN_TOOLS_GPU_CEILINGS_H
#define ANYATTN_TOOLS_GPU_CEILINGS_H

/* Device-to-device copy, GB/s counting bytes read plus bytes written (median
 * of several copies of 2 GiB); < 0 when unavailable. */
double aa_gpu_copy_bandwidth_gbs(int device);
/* bf16 8192^3 matmul through cuBLAS, TFLOP/s on random data (median); < 0
 * when unavailable. */
double aa_gpu_bf16_matmul_tflops(int device);

#endif
