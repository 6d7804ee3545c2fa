// cuda_backend.cu: placeholder until the unified kernel lands.
#include <cuda_runtime.h>
#include "internal.h"

extern "C" anyattn_status aa_cuda_device_count(int *count) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) { cudaGetLastError(); *count = 0;
    return aa_error(ANYATTN_STATUS_NO_DEVICE, "no CUDA device: %s", cudaGetErrorString(e)); }
  *count = n;
  return n > 0 ? ANYATTN_STATUS_OK : aa_error(ANYATTN_STATUS_NO_DEVICE, "no CUDA device");
}
extern "C" anyattn_status aa_cuda_context_init(anyattn_context *) { return aa_error(ANYATTN_STATUS_NO_DEVICE, "todo"); }
extern "C" anyattn_status aa_cuda_plan(anyattn_plan *) { return aa_error(ANYATTN_STATUS_NO_DEVICE, "todo"); }
extern "C" anyattn_status aa_cuda_run(const anyattn_plan *, const anyattn_args *) { return aa_error(ANYATTN_STATUS_NO_DEVICE, "todo"); }
extern "C" int aa_cuda_config_count(void) { return 0; }
extern "C" anyattn_status aa_cuda_config_get(int, anyattn_config_info *) { return aa_error(ANYATTN_STATUS_NO_DEVICE, "todo"); }
