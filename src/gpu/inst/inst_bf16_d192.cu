// inst_bf16_d192.cu: tensor-core kernels for bf16, head dim 192, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE(bf16, aa_bf16, 192)
AA_DEFINE_KERNEL_TABLE_STAGED(bf16, aa_bf16, 192)
AA_DEFINE_KERNEL_TABLE_WS(bf16, aa_bf16, 192)
