// inst_f16_fp8_d192.cu: tensor-core kernels for f16 q/out with fp8 K/V caches, head dim 192, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE_FP8(f16, aa_f16, 192)
