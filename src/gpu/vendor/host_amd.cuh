/* host_amd.cuh: the host-side vendor layer on AMD (host.cuh): plain launches;
 * HIP has no programmatic dependent launch, no clusters and no tensor maps. */
#ifndef ANYATTN_GPU_VENDOR_HOST_AMD_CUH
#define ANYATTN_GPU_VENDOR_HOST_AMD_CUH

#include <stdint.h>

#include "internal.h"
#include "params.cuh"

namespace aa {

/* One launch, checked; pdl and cluster_y ask for what HIP does not have and are ignored. */
template <typename... Args>
anyattn_status launch(void (*kernel)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool /*pdl*/,
                      int /*cluster_y*/, Args... args) {
  kernel<<<grid, block, smem, stream>>>(args...);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return aa_error(ANYATTN_STATUS_DEVICE_ERROR, "kernel launch: %s", cudaGetErrorString(e));
  return ANYATTN_STATUS_OK;
}

/* Clusters of c blocks the device co-schedules: none on AMD (-1: unknown). */
inline int cluster_active(const void *, int, size_t, int) { return -1; }

/* Tensor maps of the caches: none on AMD, the kernels take 16-byte copies. */
struct TmaView {
  const void *base;
  const int64_t *strides; /* block, token, head, elements */
};
inline bool tma_maps(TmaMap *, TmaMap *, TmaView, TmaView, anyattn_dtype, int, int, int, int, int, int) { return false; }
inline int tma_mode() { return 0; }
inline bool tma_token_map(int, TmaMap *, const void *, anyattn_dtype, int, int, int, int, int) { return false; }
/* No producer warpgroup on AMD (launch.cu, ws_kernel). */
inline bool ws_mode() { return false; }
inline int persist_mode() { return 0; }
/* No L2 priorities (host_nv.cuh's l2hint_mode): the producer's boxes are sm_90's. */
inline bool l2hint_mode() { return false; }
/* No producer warpgroup, so no decode loop of its own (host_nv.cuh's ws_dec_mode). */
inline bool ws_dec_mode() { return false; }
/* No cap on programs per CU (host_nv.cuh's stream_warps; not measured on CDNA). */
inline int stream_warps(int) { return 0; }

}  // namespace aa

#endif /* ANYATTN_GPU_VENDOR_HOST_AMD_CUH */
