/* host_nv.cuh: the host-side vendor layer on NVIDIA (host.cuh): launches with
 * programmatic dependent launch and cluster dimensions (sm_90), the cluster
 * occupancy query, and TMA tensor maps of the K/V caches through the driver's
 * encoder (reached through the runtime: no link to libcuda). */
#ifndef ANYATTN_GPU_VENDOR_HOST_NV_CUH
#define ANYATTN_GPU_VENDOR_HOST_NV_CUH

#include <cudaTypedefs.h> /* the driver's tensor-map types and encoder signature (header only) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "params.cuh"

namespace aa {

/* The launch attribute for clusters of (1, y, 1) blocks. */
inline cudaLaunchAttribute cluster_attr(int y) {
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 1;
  a.val.clusterDim.y = (unsigned)y;
  a.val.clusterDim.z = 1;
  return a;
}

/* One launch, checked; `pdl` adds the programmatic-stream-serialization
 * attribute (sm_90+: the kernels call griddepcontrol.wait before reading any
 * input); cluster_y > 0 launches clusters of (1, cluster_y, 1) blocks. */
template <typename... Args>
anyattn_status launch(void (*kernel)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      int cluster_y, Args... args) {
  cudaError_t e;
  if (pdl || cluster_y > 0) {
    cudaLaunchAttribute attr[2];
    int n = 0;
    if (pdl) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_y > 0) attr[n++] = cluster_attr(cluster_y);
    cudaLaunchConfig_t lc = {};
    lc.gridDim = grid;
    lc.blockDim = block;
    lc.dynamicSmemBytes = smem;
    lc.stream = stream;
    lc.attrs = attr;
    lc.numAttrs = (unsigned)n;
    e = cudaLaunchKernelEx(&lc, kernel, args...);
  } else {
    kernel<<<grid, block, smem, stream>>>(args...);
    e = cudaGetLastError();
  }
  if (e != cudaSuccess) return aa_error(ANYATTN_STATUS_DEVICE_ERROR, "kernel launch: %s", cudaGetErrorString(e));
  return ANYATTN_STATUS_OK;
}

/* Clusters of c blocks (of `threads` threads and `smem` bytes) of `kernel`
 * the device co-schedules, or -1 when the runtime cannot say. */
inline int cluster_active(const void *kernel, int threads, size_t smem, int c) {
  cudaLaunchAttribute at = cluster_attr(c);
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(1, (unsigned)c);
  lc.blockDim = dim3((unsigned)threads);
  lc.dynamicSmemBytes = smem;
  lc.attrs = &at;
  lc.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &lc) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return n;
}

/* ---- TMA tensor maps of the K/V caches (sm_90+) ------------------------------------
 * Tiles take K/V tiles as boxes of R cache rows (one page's rows of one kv
 * head) through a 4-d view of each cache: (head_dim, kv head, row in page,
 * page), strides from the call, the page count unbounded (2^31: the block
 * table only names pages that exist). Kind 1 (the padded tiles): each box row
 * is the compiled head dim + 8 elements wide; the columns from the problem's
 * head_dim on fall outside the tensor, so TMA writes them as zeros: exactly
 * the padded shared-memory row of the tile (with a head dim padded to the
 * compiled one, its zero columns too).
 * Kind 2 (the pipelined 128-row wgmma tile): 64-column boxes, 128-byte
 * swizzled, one per panel of its wgmma layout. Encoding fails, and run keeps
 * the 16-byte copies, where the view breaks a TMA rule (strides, sizes). */

/* ANYATTN_CUDA_TMA=0 keeps every tile on 16-byte copies (0), =all takes TMA
 * boxes in every launch that can (2), else where they pay (1); =log also
 * reports each new encoding on stderr (for comparisons and diagnosis only). */
inline const char *tma_env() {
  static const char *const env = getenv("ANYATTN_CUDA_TMA");
  return env ? env : "";
}
inline int tma_mode() { return strcmp(tma_env(), "0") == 0 ? 0 : strcmp(tma_env(), "all") == 0 ? 2 : 1; }

/* ANYATTN_CUDA_WS=0 runs the pipelined tile without its producer warpgroup
 * (launch.cu, ws_kernel; for comparisons). */
inline bool ws_mode() {
  static const bool on = [] {
    const char *e = getenv("ANYATTN_CUDA_WS");
    return !(e && strcmp(e, "0") == 0);
  }();
  return on;
}

/* L2 priorities on the producer's K/V boxes in mixed batches (mainloop_ws.cuh, WsProducer::fill;
 * docs/design/prefill.md#mixed-batches): ANYATTN_CUDA_L2HINT=0 leaves them out (for comparisons). */
inline bool l2hint_mode() {
  static const bool on = [] {
    const char *e = getenv("ANYATTN_CUDA_L2HINT");
    return !(e && strcmp(e, "0") == 0);
  }();
  return on;
}

/* A decode item of the producer's kernel on both consumer warpgroups with the keys as M
 * (mainloop_ws.cuh, ws_decode_item; docs/design/prefill.md#mixed-batches):
 * ANYATTN_CUDA_WSDEC=0 runs it on the tile's loop (for comparisons). */
inline bool ws_dec_mode() {
  static const bool on = [] {
    const char *e = getenv("ANYATTN_CUDA_WSDEC");
    return !(e && strcmp(e, "0") == 0);
  }();
  return on;
}

/* Persistent launches of the producer warpgroup's kernel (policy.h,
 * aa_gpu_producer_blocks): ANYATTN_CUDA_PERSIST=0 launches a block per
 * program everywhere (0; for comparisons), =N from 2 to 65536 at most N
 * blocks in every launch that has room for the second Q tile (N; for
 * tests: many items a block); else a block an SM past two waves (1). */
inline int persist_mode() {
  static const int mode = [] {
    const char *e = getenv("ANYATTN_CUDA_PERSIST");
    if (!e || !*e) return 1;
    char *end = nullptr;
    const long v = strtol(e, &end, 10);
    return *end == '\0' && v >= 0 && v <= 65536 ? (int)v : 1;
  }();
  return mode;
}

/* Warps of 16-row decode programs one SM keeps in an unsplit launch of
 * several waves over cache rows of more than 128 bytes (policy.h,
 * aa_gpu_launch_smem): 8 on sm_90 (measured on the H200:
 * docs/design/decode.md, "Rows and programs per SM"), no cap before it.
 * ANYATTN_CUDA_STREAM_WARPS=N sets it (0: no cap; for comparisons). */
inline int stream_warps(int arch) {
  static const int env = [] { /* read once: device_of runs at every launch; -1: unset or not 0..64 */
    const char *e = getenv("ANYATTN_CUDA_STREAM_WARPS");
    if (!e || !*e) return -1;
    char *end = nullptr;
    const long v = strtol(e, &end, 10);
    return *end == '\0' && v >= 0 && v <= 64 ? (int)v : -1;
  }();
  return env >= 0 ? env : arch >= 90 ? 8 : 0;
}

inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else /* CUDA 12.0-12.4: the unversioned lookup */
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) f = nullptr;
    cudaGetLastError(); /* a failed lookup leaves nothing behind */
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

/* One cache as TMA sees it: its base and element strides (block, token, head). */
struct TmaView {
  const void *base;
  const int64_t *strides;
};

/* kind 1: boxes compiled_dim + 8 wide, unswizzled (the padded rows); kind 2:
 * 64 wide (128 bytes), 128-byte swizzled (the wgmma tiles' panels, compiled_dim
 * / 64 of them, those past head_dim partly or wholly zeros); kind 3: fp8 codes
 * (one byte each), 128 wide, 128-byte swizzled (the pipelined tile's code
 * tiles at d128). The tensor is head_dim wide: every column past it reads as
 * zero. */
inline bool tma_encode(TmaMap *out, TmaView c, anyattn_dtype dt, int head_dim, int compiled_dim, int kv_heads,
                       int block_size, int box_rows, int kind) {
  static_assert(sizeof(CUtensorMap) == sizeof(TmaMap), "a tensor map is 128 bytes");
  const PFN_cuTensorMapEncodeTiled_v12000 enc = tma_encoder();
  if (!enc) return false;
  const bool codes = kind == 3;
  if (codes && compiled_dim != 128) return false;
  const cuuint64_t es = codes ? 1 : 2;
  const cuuint64_t dims[4] = {(cuuint64_t)head_dim, (cuuint64_t)kv_heads, (cuuint64_t)block_size, (cuuint64_t)1 << 31};
  const cuuint64_t strides[3] = {(cuuint64_t)c.strides[2] * es, (cuuint64_t)c.strides[1] * es,
                                 (cuuint64_t)c.strides[0] * es};
  const cuuint32_t box[4] = {kind == 2 ? 64u : codes ? (cuuint32_t)compiled_dim : (cuuint32_t)compiled_dim + 8, 1,
                             (cuuint32_t)box_rows, 1};
  const CUtensorMapDataType type = codes                      ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dt == ANYATTN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                              : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUtensorMapSwizzle swz = kind == 2 || codes ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMap m;
  const CUresult r = enc(&m, type, 4, const_cast<void *>(c.base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  memcpy(out, &m, sizeof m);
  return true;
}

/* The K and V maps of a call (false: the driver rejects the view; copies).
 * The last call's maps are kept per thread: a decode loop passes the same
 * caches and strides every step and pays a comparison, not two encodes (a
 * loop that alternates kinds re-encodes each call: host time only). */
inline bool tma_maps(TmaMap *k_map, TmaMap *v_map, TmaView k, TmaView v, anyattn_dtype dt, int head_dim,
                     int compiled_dim, int kv_heads, int block_size, int rows, int kind) {
  struct Key {
    const void *k, *v;
    int64_t ks[3], vs[3];
    int dtype, head_dim, compiled_dim, kv_heads, bs, rows, kind;
  };
  Key key;
  memset(&key, 0, sizeof key);
  key.k = k.base, key.v = v.base;
  for (int i = 0; i < 3; i++) key.ks[i] = k.strides[i], key.vs[i] = v.strides[i];
  key.dtype = (int)dt, key.head_dim = head_dim, key.compiled_dim = compiled_dim, key.kv_heads = kv_heads, key.bs = block_size, key.rows = rows,
  key.kind = kind;
  static thread_local Key last_key;
  static thread_local TmaMap last_k, last_v;
  static thread_local bool last_ok = false, have = false;
  if (!have || memcmp(&key, &last_key, sizeof key) != 0) {
    last_ok = tma_encode(&last_k, k, dt, head_dim, compiled_dim, kv_heads, block_size, rows, kind) &&
              tma_encode(&last_v, v, dt, head_dim, compiled_dim, kv_heads, block_size, rows, kind);
    last_key = key, have = true;
    if (strcmp(tma_env(), "log") == 0)
      fprintf(stderr, "anyattn: cuda: TMA boxes of %d rows, %s (block size %d, d%d): %s\n", rows,
              kind == 3 ? "swizzled fp8 rows" : kind == 2 ? "swizzled panels" : "padded rows", block_size, head_dim,
              last_ok ? "on" : "the driver rejected the cache view; 16-byte copies");
  }
  if (!last_ok) return false;
  *k_map = last_k, *v_map = last_v;
  return true;
}

/* The token-row maps of a producer-warpgroup launch: q's (slot 0,
 * mainloop_ws.cuh, ws_q_boxes) and out's (slot 1, epilogue.cuh,
 * own_rows_epilogue), 3-d views (head_dim, q head, token) of a contiguous
 * tensor, boxes of 64 columns x gh heads x bt tokens, 128-byte swizzled;
 * tokens past num_tokens and columns past head_dim read as zeros (and are not
 * written). false (16-byte copies): ANYATTN_CUDA_Q_TMA=0 (slot 0),
 * ANYATTN_CUDA_O_TMA=0 (slot 1) or ANYATTN_CUDA_TMA=0 (for comparisons), or
 * the driver rejects the view (the tensor not 16-byte aligned, say). The
 * last encoding of each slot is kept per thread, as in tma_maps. */
inline bool tma_token_map(int slot, TmaMap *out, const void *t, anyattn_dtype dt, int head_dim, int num_q_heads,
                          int num_tokens, int gh, int bt) {
  static const bool on[2] = {!(getenv("ANYATTN_CUDA_Q_TMA") && strcmp(getenv("ANYATTN_CUDA_Q_TMA"), "0") == 0),
                             !(getenv("ANYATTN_CUDA_O_TMA") && strcmp(getenv("ANYATTN_CUDA_O_TMA"), "0") == 0)};
  if (slot < 0 || slot > 1 || !on[slot] || tma_mode() == 0) return false;
  const PFN_cuTensorMapEncodeTiled_v12000 enc = tma_encoder();
  if (!enc || gh < 1 || gh > 256 || bt < 1 || bt > 256 || num_tokens < 1) return false;
  struct Key {
    const void *t;
    int dtype, head_dim, heads, tokens, gh, bt;
  };
  Key key;
  memset(&key, 0, sizeof key);
  key.t = t, key.dtype = (int)dt, key.head_dim = head_dim, key.heads = num_q_heads, key.tokens = num_tokens;
  key.gh = gh, key.bt = bt;
  static thread_local Key last_key[2];
  static thread_local TmaMap last[2];
  static thread_local bool last_ok[2] = {false, false}, have[2] = {false, false};
  if (!have[slot] || memcmp(&key, &last_key[slot], sizeof key) != 0) {
    const cuuint64_t dims[3] = {(cuuint64_t)head_dim, (cuuint64_t)num_q_heads, (cuuint64_t)num_tokens};
    const cuuint64_t strides[2] = {(cuuint64_t)head_dim * 2, (cuuint64_t)num_q_heads * head_dim * 2};
    const cuuint32_t box[3] = {64, (cuuint32_t)gh, (cuuint32_t)bt};
    const cuuint32_t estr[3] = {1, 1, 1};
    const CUtensorMapDataType type =
        dt == ANYATTN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUtensorMap m;
    last_ok[slot] = enc(&m, type, 3, const_cast<void *>(t), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    if (last_ok[slot]) memcpy(&last[slot], &m, sizeof m);
    last_key[slot] = key, have[slot] = true;
    if (strcmp(tma_env(), "log") == 0)
      fprintf(stderr, "anyattn: cuda: %s as TMA boxes of 64 x %d x %d (d%d): %s\n", slot ? "out" : "Q", gh, bt,
              head_dim, last_ok[slot] ? "on" : "the driver rejected the view; 16-byte copies");
  }
  if (!last_ok[slot]) return false;
  *out = last[slot];
  return true;
}

}  // namespace aa

#endif /* ANYATTN_GPU_VENDOR_HOST_NV_CUH */
