/* tile_amd.cuh: AMD CDNA tile primitives for the attention body (gfx90a MI200,
 * gfx942 MI300): 16x16x16 matrix-core tiles from one MFMA (fp32 accumulate) on a
 * 64-lane wavefront, plain LDS loads, synchronous 16-byte copies, wave shuffles.
 * Same names and contract as tile_nv.cuh; the kernel parts (src/gpu/kernel/) see
 * only these.
 *
 * Layouts of v_mfma_f32_16x16x16{f16,bf16_1k} (AMD matrix instruction calculator,
 * gfx9 rules; L = lane, e = element 0..3 of the lane's 4-vector):
 *   MFMA A (16 m x 16 k): L holds A[L%16][4*(L/16)+e]
 *   MFMA B (16 k x 16 n): L holds B[4*(L/16)+e][L%16]
 *   MFMA C/D (16 x 16):   L holds C[4*(L/16)+e][L%16]
 * C has the B layout, not the A layout, so P = softmax(S) could not feed the
 * next product as an A operand without a shuffle. mma(c, a, b) therefore runs
 * the transposed product c^T += b^T a^T: the body's B fragment (K or V^T) goes
 * in as the MFMA A operand and its A fragment (Q or P) as the MFMA B operand.
 * A FragC then holds the body's tile transposed in registers: lane L has body
 * row L%16 and body columns 4*(L/16)+e, which is exactly the MFMA B layout of
 * the next product, so acc_to_a is a plain pack. Both A-side loads (Q, P) and
 * the K load read 4 consecutive k-elements of row L%16 at column 4*(L/16). */
#ifndef ANYATTN_GPU_TILE_AMD_CUH
#define ANYATTN_GPU_TILE_AMD_CUH

#include <stdint.h>

#include "fp8.cuh"
#include "vendor.h"

namespace aa {

typedef _Float16 aa_h4 __attribute__((ext_vector_type(4)));
typedef short aa_s4 __attribute__((ext_vector_type(4)));
typedef float aa_f4 __attribute__((ext_vector_type(4)));

/* ---- fragments: every tile the body touches is 16 x 16 ------------------ */
/* A operand, 16 (m) x 16 (k): row L%16, k = 4*(L/16) .. +3, packed pairs. */
struct FragA {
  uint32_t x[2];
};
/* B operand, 16 (k) x 16 (n): column L%16, k = 4*(L/16) .. +3, packed pairs. */
struct FragB {
  uint32_t x[2];
};
/* fp32 accumulator 16 x 16: row L%16, columns 4*(L/16) .. +3. */
struct FragC {
  float x[4];
};

/* Layout contract (see tile_nv.cuh): one row per lane (kFragCSlots = 1); the
 * four lanes L, L^16, L^32, L^48 share a row. */
constexpr int kFragCElems = 4;
constexpr int kFragCSlots = 1;
static_assert(AA_WARP_SIZE == 64, "the MFMA 16x16x16 layouts assume 64-lane wavefronts (CDNA)");

__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x & (AA_WARP_SIZE - 1)); }
__device__ __forceinline__ int frag_c_slot(int) { return 0; }
__device__ __forceinline__ int frag_c_row(int) { return lane_id() & 15; }
__device__ __forceinline__ int frag_c_col(int e) { return ((lane_id() >> 4) << 2) + e; }
__device__ __forceinline__ bool frag_c_row_owner() { return lane_id() < 16; }

__device__ __forceinline__ void zero(FragC &c) {
#pragma unroll
  for (int i = 0; i < kFragCElems; i++) c.x[i] = 0.0f;
}

/* ---- dtype helpers --------------------------------------------------------- */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<aa_f16>(float lo, float hi) {
  const _Float16 l = (_Float16)lo, h = (_Float16)hi; /* v_cvt_f16_f32: round to nearest even */
  return (uint32_t)__builtin_bit_cast(uint16_t, l) | ((uint32_t)__builtin_bit_cast(uint16_t, h) << 16);
}
/* fp32 -> bf16, round to nearest even; NaN stays NaN (quiet bit forced). */
__device__ __forceinline__ uint32_t bf16_bits(float f) {
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
template <>
__device__ __forceinline__ uint32_t pack2<aa_bf16>(float lo, float hi) {
  return bf16_bits(lo) | (bf16_bits(hi) << 16);
}

/* ---- LDS tile loads ----------------------------------------------------------- */
/* `at(r, c)` returns the shared-memory address of element (r, c) of the 16 x 16
 * tile as stored (rows contiguous); the primitive decides which lane reads what.
 * Rows are 16-byte aligned and c steps by 4 elements: 8-byte ds_read_b64. */
/* Q (A) and K (B, n-rows) share one pattern: lane L reads row L%16, the 4
 * contiguous k-elements from 4*(L/16). */
template <class At>
__device__ __forceinline__ void load_row4(uint32_t (&x)[2], At at) {
  const int l = lane_id();
  const uint2 v = *reinterpret_cast<const uint2 *>(at(l & 15, (l >> 4) << 2));
  x[0] = v.x;
  x[1] = v.y;
}
template <class At>
__device__ __forceinline__ void load_a(FragA &a, At at) { load_row4(a.x, at); } /* m-rows, k contiguous (Q) */
template <class At>
__device__ __forceinline__ void load_b_nk(FragB &b, At at) { load_row4(b.x, at); } /* n-rows, k contiguous (K) */
template <class At>
__device__ __forceinline__ void load_b_kn(FragB &b, At at) { /* stored k-rows, n contiguous (V) */
  /* Column L%16 at rows 4*(L/16) .. +3: four 2-byte reads (LDS has no
   * transposing load before gfx950); 16 lanes read 32 contiguous bytes per row. */
  const int l = lane_id(), r0 = (l >> 4) << 2, c = l & 15;
  const uint16_t *p0 = reinterpret_cast<const uint16_t *>(at(r0, c));
  const uint16_t *p1 = reinterpret_cast<const uint16_t *>(at(r0 + 1, c));
  const uint16_t *p2 = reinterpret_cast<const uint16_t *>(at(r0 + 2, c));
  const uint16_t *p3 = reinterpret_cast<const uint16_t *>(at(r0 + 3, c));
  b.x[0] = (uint32_t)*p0 | ((uint32_t)*p1 << 16);
  b.x[1] = (uint32_t)*p2 | ((uint32_t)*p3 << 16);
}

/* ---- matrix-core product: c += a * b, computed as c^T += b^T a^T ------------ */
template <typename T>
struct MmaOp;
template <>
struct MmaOp<aa_f16> {
  __device__ __forceinline__ static aa_f4 run(const FragB &b, const FragA &a, aa_f4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(aa_h4, b), __builtin_bit_cast(aa_h4, a), c, 0,
                                                 0, 0);
  }
};
template <>
struct MmaOp<aa_bf16> {
  __device__ __forceinline__ static aa_f4 run(const FragB &b, const FragA &a, aa_f4 c) {
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(aa_s4, b), __builtin_bit_cast(aa_s4, a), c,
                                                     0, 0, 0);
  }
};

template <typename T>
__device__ __forceinline__ void mma(FragC &c, const FragA &a, const FragB &b) {
  c = __builtin_bit_cast(FragC, MmaOp<T>::run(b, a, __builtin_bit_cast(aa_f4, c)));
}

/* An fp32 accumulator (softmax weights P, held as P^T in MFMA C layout) as the
 * A operand of the next product: the C layout is the MFMA B layout, which is
 * where mma() feeds its A fragment, so this only rounds to T. */
template <typename T>
__device__ __forceinline__ void acc_to_a(FragA &a, const FragC &c) {
  a.x[0] = pack2<T>(c.x[0], c.x[1]);
  a.x[1] = pack2<T>(c.x[2], c.x[3]);
}

/* ---- reductions --------------------------------------------------------------- */
/* A row lives in lanes L, L^16, L^32, L^48. */
/* The larger of a and b, NaN if either is (fmaxf returns the other), as tile_nv.cuh's. */
__device__ __forceinline__ float fmax_nan(float a, float b) { return (a > b || a != a) ? a : b; }
/* True on every lane when pred is true on any lane of the wavefront. */
__device__ __forceinline__ bool warp_any(bool pred) { return __any(pred) != 0; }
__device__ __forceinline__ float row_allreduce_max(float v) {
  v = fmax_nan(v, __shfl_xor(v, 16, AA_WARP_SIZE));
  v = fmax_nan(v, __shfl_xor(v, 32, AA_WARP_SIZE));
  return v;
}
__device__ __forceinline__ float row_allreduce_sum(float v) {
  v += __shfl_xor(v, 16, AA_WARP_SIZE);
  v += __shfl_xor(v, 32, AA_WARP_SIZE);
  return v;
}
__device__ __forceinline__ float warp_allreduce_max(float v) {
#pragma unroll
  for (int o = AA_WARP_SIZE / 2; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor(v, o, AA_WARP_SIZE));
  return v;
}
__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int o = AA_WARP_SIZE / 2; o > 0; o >>= 1) v += __shfl_xor(v, o, AA_WARP_SIZE);
  return v;
}
__device__ __forceinline__ float warp_broadcast(float v, int src) { return __shfl(v, src, AA_WARP_SIZE); }

/* ---- global -> shared copies ---------------------------------------------------- */
/* CDNA has no asynchronous global->LDS copy of 16 bytes (gfx90a/942 buffer
 * loads to LDS move 4 bytes per lane and bypass the offsets the body stores),
 * so this is a 16-byte global load and an LDS store; when !valid nothing is
 * read and zeros are stored. Latency is hidden by other waves on the CU. */
template <bool LINE = false> /* a hint for NVIDIA's L2 (tile_nv.cuh); none here */
__device__ __forceinline__ void async_copy16(void *smem, const void *gmem, bool valid) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (valid) v = *reinterpret_cast<const uint4 *>(gmem);
  *reinterpret_cast<uint4 *>(smem) = v;
}
/* 8 bytes (fp8 cache rows), likewise. */
template <bool LINE = false>
__device__ __forceinline__ void async_copy8(void *smem, const void *gmem, bool valid) {
  uint2 v = make_uint2(0u, 0u);
  if (valid) v = *reinterpret_cast<const uint2 *>(gmem);
  *reinterpret_cast<uint2 *>(smem) = v;
}
/* Copies complete before the next block_sync(), which the body always places
 * before it reads a stage: commit and wait have nothing to track. */
__device__ __forceinline__ void async_commit() {}
template <int N>
__device__ __forceinline__ void async_wait() {}

__device__ __forceinline__ void block_sync() { __syncthreads(); }
/* Orders shared-memory writes of a warp (wavefront) before its lanes read them. */
__device__ __forceinline__ void warp_sync() { __builtin_amdgcn_wave_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "wavefront"); }
/* A barrier that also returns how many threads of the block passed a true pred. */
__device__ __forceinline__ int block_sync_count(int pred) { return __syncthreads_count(pred); }

/* ---- fp8 cache codes ----------------------------------------------------------- */
/* Eight E4M3 codes (8 bytes, lowest first) -> eight values of the compute type
 * T, exactly: the portable bit path (fp8.cuh) on gfx90a (no fp8 hardware) and
 * gfx942 alike. */
template <typename T>
__device__ __forceinline__ uint4 fp8x8_to(uint2 v, bool fnuz) {
  uint32_t a, b, c, d;
  fp8x4_to_f16_portable(v.x, fnuz, a, b);
  fp8x4_to_f16_portable(v.y, fnuz, c, d);
  return f16x8_to<T>(a, b, c, d);
}

/* ---- split-KV arrivals (kernel/merge.cuh; tile_nv.cuh says what they do) ----------------
 * The builtin is the wrapping increment (LLVM's atomicrmw uinc_wrap,
 * global_atomic_inc); the HIP header's atomicInc names an intrinsic newer
 * device libraries no longer have. Acquire-release at agent scope: the
 * release writes back the block's stores, the acquire invalidates the CU's
 * vector L1, so plain loads after the block's next barrier see the other
 * blocks' partials. */
__device__ __forceinline__ unsigned arrive_counter(unsigned *counter, unsigned last) {
  return __builtin_amdgcn_atomic_inc32(counter, last, __ATOMIC_ACQ_REL, "agent");
}
template <typename V>
__device__ __forceinline__ V load_fresh(const V *p) {
  return *p;
}

/* ---- dependent launches ---------------------------------------------------------- */
/* HIP has no programmatic dependent launch: a kernel starts after the previous
 * one on its stream has finished, so there is nothing to signal or wait for. */
__device__ __forceinline__ void grid_dependents_launch() {}
__device__ __forceinline__ void grid_dependency_wait() {}

/* ---- thread-block clusters ------------------------------------------------------
 * CDNA has none: the split-KV segments always merge by the last arrival (merge.cuh). The
 * names exist so the one kernel source compiles; the launcher never enables
 * the path. */
constexpr bool kHasClusters = false;
/* No warpgroup MMA on CDNA: the body keeps its 16x16 tiles (tile_nv.cuh has wgmma). */
constexpr bool kTileWgmma = false;
/* No tensor copies either (tile_nv.cuh's TMA): K/V tiles take 16-byte copies. */
constexpr bool kTileTma = false;
/* fp8 codes are converted into 16-bit tiles in LDS (kernel/kv_load.cuh), not
 * straight into fragments (tile_nv.cuh's CodeFrags): declared, never defined
 * or reached here. */
constexpr bool kTileFp8Frags = false;
/* The 16-row decode tiles' register cap as warps per CU (tile_nv.cuh):
 * unchanged at every head dim here (not measured on CDNA). */
constexpr int kDecodeWarps = 12;
constexpr int kDecodeWarpsD64 = 12;
template <bool FNUZ>
struct CodeFrags;
__device__ __forceinline__ void cluster_sync() { __builtin_trap(); }
__device__ __forceinline__ void cluster_sync_relaxed() { __builtin_trap(); }
__device__ __forceinline__ uint32_t cluster_map(const void *, int) { return 0; }
__device__ __forceinline__ float4 cluster_ld4(uint32_t) { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
__device__ __forceinline__ float2 cluster_ld2(uint32_t) { return make_float2(0.0f, 0.0f); }

/* ---- Hopper-only primitives (tile_nv_sm90.cuh) -----------------------------------
 * Never reached on CDNA (kArchWgmma and kArchTma are false, kTileWgmma and
 * kTileTma too); declared so the one kernel source compiles for both vendors. */
constexpr bool kArchWgmma = false;
constexpr bool kArchTma = false;
/* Used for alignment arithmetic only: the low 32 bits of a generic LDS address
 * are its LDS offset (the aperture base is 4 GB aligned). */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)reinterpret_cast<uintptr_t>(p); }
__device__ __forceinline__ uint64_t wg_desc(uint32_t, uint32_t, uint32_t) { return 0; }
__device__ __forceinline__ uint64_t wg_desc_add(uint64_t, uint32_t) { return 0; }
__device__ __forceinline__ void wg_fence() { __builtin_trap(); }
__device__ __forceinline__ void wg_commit() { __builtin_trap(); }
__device__ __forceinline__ void wg_wait_all() { __builtin_trap(); }
__device__ __forceinline__ void wg_wait_but_newest() { __builtin_trap(); }
__device__ __forceinline__ void wg_keep(float &) {}
__device__ __forceinline__ void wg_keep(uint32_t &) {}
__device__ __forceinline__ void wg_keep(FragC &) {}
__device__ __forceinline__ void wg_keep(FragA &) {}
template <typename T, int N, int TRANS>
__device__ __forceinline__ void wg_mma(float *, const FragA &, uint64_t, int) { __builtin_trap(); }
template <typename T, int N>
__device__ __forceinline__ void wg_mma_ss(float *, uint64_t, uint64_t, int) { __builtin_trap(); }
__device__ __forceinline__ void fence_proxy_async_smem() {}
__device__ __forceinline__ void mbar_init(uint64_t *, unsigned) { __builtin_trap(); }
__device__ __forceinline__ void mbar_init_fence() { __builtin_trap(); }
__device__ __forceinline__ void mbar_arrive_copies(uint64_t *) { __builtin_trap(); }
__device__ __forceinline__ void mbar_arrive(uint64_t *) { __builtin_trap(); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *, uint32_t) { __builtin_trap(); }
__device__ __forceinline__ void mbar_wait(uint64_t *, uint32_t) { __builtin_trap(); }
__device__ __forceinline__ void tma_prefetch_map(const void *) {}
__device__ __forceinline__ void tma_load_4d(void *, const void *, int, int, int, int, uint64_t *) { __builtin_trap(); }
__device__ __forceinline__ uint64_t l2_policy(bool) { return 0; }
__device__ __forceinline__ void tma_load_4d_hint(void *, const void *, int, int, int, int, uint64_t *, uint64_t) {
  __builtin_trap();
}
__device__ __forceinline__ void tma_load_3d(void *, const void *, int, int, int, uint64_t *) { __builtin_trap(); }
__device__ __forceinline__ void tma_store_3d(const void *, const void *, int, int, int) { __builtin_trap(); }
__device__ __forceinline__ void bulk_commit() {}
__device__ __forceinline__ void bulk_wait_read() {}
__device__ __forceinline__ void bulk_wait() {}
__device__ __forceinline__ void named_sync(int, int) { __builtin_trap(); }
__device__ __forceinline__ void named_arrive(int, int) { __builtin_trap(); }
__device__ __forceinline__ int named_sync_count(int, int, int) { __builtin_trap(); return 0; }
__device__ __forceinline__ float col_allreduce_max(float) { __builtin_trap(); return 0.0f; }
__device__ __forceinline__ float col_allreduce_sum(float) { __builtin_trap(); return 0.0f; }
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t) { __builtin_trap(); return 0; }
__device__ __forceinline__ void pass_unsupported() { __builtin_trap(); }
template <int N>
__device__ __forceinline__ void regs_release() { __builtin_trap(); }
template <int N>
__device__ __forceinline__ void regs_claim() { __builtin_trap(); }

/* ---- math ------------------------------------------------------------------------ */
/* 1/x to about 1 ulp in one instruction (v_rcp_f32); x = 0 gives +inf, which
 * callers select away. tile_nv.cuh has the same name. */
__device__ __forceinline__ float fast_rcp(float x) {
#if __has_builtin(__builtin_amdgcn_rcpf)
  return __builtin_amdgcn_rcpf(x);
#else
  return 1.0f / x;
#endif
}
/* 2^x; exp2(-inf) = 0, which masking relies on. v_exp_f32 flushes denormal
 * results, as ex2.approx.ftz does on NVIDIA. */
__device__ __forceinline__ float fast_exp2(float x) {
#if __has_builtin(__builtin_amdgcn_exp2f)
  return __builtin_amdgcn_exp2f(x);
#else
  return exp2f(x); /* older clang: the device library's exp2 (v_exp_f32 plus denormal scaling) */
#endif
}

}  // namespace aa

#endif /* ANYATTN_GPU_TILE_AMD_CUH */
