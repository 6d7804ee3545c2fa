// inst_f16_d64.cu: tensor-core kernels for f16, head dim 64, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE(f16, aa_f16, 64)
AA_DEFINE_KERNEL_TABLE_STAGED(f16, aa_f16, 64)
AA_DEFINE_KERNEL_TABLE_WS(f16, aa_f16, 64)
