// inst_f16_d128.cu: tensor-core kernels for f16, head dim 128, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE(f16, aa_f16, 128)
AA_DEFINE_KERNEL_TABLE_STAGED(f16, aa_f16, 128)
AA_DEFINE_KERNEL_TABLE_WS(f16, aa_f16, 128)
