// inst_reduce.cu: the split-KV reduce (src/gpu/kernel/reduce.cuh) for f16 and bf16.
#include "kernels.cuh"

aa::KernelF32Fn aa_reduce_f16(void) { return &aa::attn_split_reduce_kernel<aa_f16>; }
aa::KernelF32Fn aa_reduce_bf16(void) { return &aa::attn_split_reduce_kernel<aa_bf16>; }
