// inst_bf16_fp8_d64.cu: tensor-core kernels for bf16 q/out with fp8 K/V caches, head dim 64, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE_FP8(bf16, aa_bf16, 64)
