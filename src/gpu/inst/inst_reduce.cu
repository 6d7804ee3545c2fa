// inst_reduce.cu: the split-KV reduce (src/gpu/kernel/reduce.cuh) for f16 and bf16,
// head dims up to 256 and up to 512.
#include "kernels.cuh"

aa::KernelF32Fn aa_reduce_f16(int head_dim) {
  return head_dim <= 256 ? &aa::attn_split_reduce_kernel<aa_f16, 256> : &aa::attn_split_reduce_kernel<aa_f16, 512>;
}
aa::KernelF32Fn aa_reduce_bf16(int head_dim) {
  return head_dim <= 256 ? &aa::attn_split_reduce_kernel<aa_bf16, 256> : &aa::attn_split_reduce_kernel<aa_bf16, 512>;
}
