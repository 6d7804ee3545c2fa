// inst_f32.cu: the fp32 CUDA-core kernel (fp32 has no tensor-core path).
#include "kernels.cuh"

aa::KernelF32Fn aa_kernel_f32(void) { return &aa::attn_f32_kernel<aa::kF32Warps>; }
