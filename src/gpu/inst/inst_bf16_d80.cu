// inst_bf16_d80.cu: tensor-core kernels for bf16, head dim 80, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE(bf16, aa_bf16, 80)
AA_DEFINE_KERNEL_TABLE_STAGED(bf16, aa_bf16, 80)
AA_DEFINE_KERNEL_TABLE_WS(bf16, aa_bf16, 80)
