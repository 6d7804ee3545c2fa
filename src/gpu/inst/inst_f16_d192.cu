// inst_f16_d192.cu: tensor-core kernels for f16, head dim 192, one per config.
#include "kernels.cuh"
AA_DEFINE_KERNEL_TABLE(f16, aa_f16, 192)
AA_DEFINE_KERNEL_TABLE_STAGED(f16, aa_f16, 192)
AA_DEFINE_KERNEL_TABLE_WS(f16, aa_f16, 192)
