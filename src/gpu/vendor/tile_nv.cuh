/* tile_nv.cuh: NVIDIA tile primitives for the attention body (inline PTX):
 * 16x16x16 tensor-core tiles built from mma.sync m16n8k16 (fp32 accumulate),
 * ldmatrix loads from shared memory, cp.async 16-byte copies, warp reductions,
 * programmatic dependent launch. The Hopper additions (clusters, wgmma, mbarriers,
 * TMA) are in tile_nv_sm90.cuh. The AMD (MFMA) layer implements the same names;
 * the kernel parts (src/gpu/kernel/) see only these. */
#ifndef ANYATTN_GPU_TILE_NV_CUH
#define ANYATTN_GPU_TILE_NV_CUH

#include <stdint.h>

#include "fp8.cuh"
#include "vendor.h"

namespace aa {

/* ---- fragments: every tile the body touches is 16 x 16 ------------------ */
/* A operand, 16 (m) x 16 (k), row-major, in the input dtype. */
struct FragA {
  uint32_t x[4];
};
/* B operand, 16 (k) x 16 (n): two m16n8k16 B halves, x[0..1] for n 0-7, x[2..3] for n 8-15. */
struct FragB {
  uint32_t x[4];
};
/* fp32 accumulator 16 x 16: x[0..3] columns 0-7, x[4..7] columns 8-15 (m16n8 C layout each). */
struct FragC {
  float x[8];
};

/* Layout of a FragC as the body needs it: element e of this lane sits at
 * row frag_c_row(frag_c_slot(e)), column frag_c_col(e); a lane holds
 * kFragCSlots distinct rows, and the lanes sharing a row are reduced over by
 * row_allreduce_*. */
constexpr int kFragCElems = 8;
constexpr int kFragCSlots = 2;

__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x & (AA_WARP_SIZE - 1)); }
__device__ __forceinline__ int frag_c_slot(int e) { return (e >> 1) & 1; }
__device__ __forceinline__ int frag_c_row(int slot) { return (lane_id() >> 2) + 8 * slot; }
__device__ __forceinline__ int frag_c_col(int e) { return (e >> 2) * 8 + (lane_id() & 3) * 2 + (e & 1); }
/* One lane per row writes per-row values (m, l, lse) to memory. */
__device__ __forceinline__ bool frag_c_row_owner() { return (lane_id() & 3) == 0; }

__device__ __forceinline__ void zero(FragC &c) {
#pragma unroll
  for (int i = 0; i < kFragCElems; i++) c.x[i] = 0.0f;
}

/* ---- dtype helpers --------------------------------------------------------- */
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<aa_f16>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<aa_bf16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/* ---- shared-memory tile loads (ldmatrix) ------------------------------------ */
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *d, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(smem_u32(p)));
}

/* `at(r, c)` returns the shared-memory address of element (r, c) of the 16 x 16
 * tile as stored (rows contiguous); the primitive decides which lane reads what. */
template <class At>
__device__ __forceinline__ void load_a(FragA &a, At at) { /* stored m-rows, k contiguous */
  const int l = lane_id();
  ldmatrix_x4(a.x, at(l & 15, (l >> 4) * 8));
}
template <class At>
__device__ __forceinline__ void load_b_nk(FragB &b, At at) { /* stored n-rows, k contiguous (K) */
  const int l = lane_id();
  ldmatrix_x4(b.x, at(((l >> 4) << 3) + (l & 7), ((l >> 3) & 1) * 8));
}
template <class At>
__device__ __forceinline__ void load_b_kn(FragB &b, At at) { /* stored k-rows, n contiguous (V) */
  const int l = lane_id();
  ldmatrix_x4_trans(b.x, at(l & 15, (l >> 4) * 8));
}

/* ---- tensor-core product: c += a * b ---------------------------------------- */
template <typename T>
struct MmaOp;
template <>
struct MmaOp<aa_f16> {
  __device__ __forceinline__ static void run(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaOp<aa_bf16> {
  __device__ __forceinline__ static void run(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <typename T>
__device__ __forceinline__ void mma(FragC &c, const FragA &a, const FragB &b) {
  MmaOp<T>::run(c.x, a.x, b.x[0], b.x[1]);
  MmaOp<T>::run(c.x + 4, a.x, b.x[2], b.x[3]);
}

/* An fp32 accumulator (softmax weights P) as the A operand of the next
 * product, rounded to T: the m16n8 C layout of two column halves is exactly
 * the m16k16 A layout. */
template <typename T>
__device__ __forceinline__ void acc_to_a(FragA &a, const FragC &c) {
  a.x[0] = pack2<T>(c.x[0], c.x[1]);
  a.x[1] = pack2<T>(c.x[2], c.x[3]);
  a.x[2] = pack2<T>(c.x[4], c.x[5]);
  a.x[3] = pack2<T>(c.x[6], c.x[7]);
}

/* ---- reductions --------------------------------------------------------------- */
/* The larger of a and b, NaN if either is (fmaxf returns the other): the
 * softmax's maxima, so that a NaN score makes its row's out and lse NaN
 * (docs/semantics.md), however many keys the row sees. */
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;\n" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float row_allreduce_max(float v) {
  v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, 1));
  v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, 2));
  return v;
}
__device__ __forceinline__ float row_allreduce_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}
__device__ __forceinline__ float warp_allreduce_max(float v) {
#pragma unroll
  for (int o = AA_WARP_SIZE / 2; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_allreduce_sum(float v) {
#pragma unroll
  for (int o = AA_WARP_SIZE / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
/* True on every lane when pred is true on any lane of the warp. */
__device__ __forceinline__ bool warp_any(bool pred) { return __any_sync(0xffffffffu, pred) != 0; }
__device__ __forceinline__ float warp_broadcast(float v, int src) {
  return __shfl_sync(0xffffffffu, v, src);
}

/* ---- global -> shared copies ---------------------------------------------------- */
/* 16 bytes; when !valid nothing is read and the destination is zero-filled.
 * LINE: a miss fetches the whole 128-byte line into L2 (.L2::128B), for
 * cache rows that are no whole number of lines, whose line ends the
 * neighbouring kv head's program reads at about the same time
 * (docs/design/decode.md, "Rows and programs per SM"). */
template <bool LINE = false>
__device__ __forceinline__ void async_copy16(void *smem, const void *gmem, bool valid) {
  if constexpr (LINE)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(valid ? 16 : 0));
}
/* 8 bytes (fp8 cache rows, which are 8-byte aligned), through L1 (.cg takes
 * 16 bytes only); when !valid nothing is read and the destination is
 * zero-filled. LINE as above. */
template <bool LINE = false>
__device__ __forceinline__ void async_copy8(void *smem, const void *gmem, bool valid) {
  if constexpr (LINE)
    asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(valid ? 8 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void block_sync() { __syncthreads(); }
/* Orders shared-memory writes of a warp (wavefront) before its lanes read them. */
__device__ __forceinline__ void warp_sync() { __syncwarp(); }
/* A barrier that also returns how many threads of the block passed a true pred. */
__device__ __forceinline__ int block_sync_count(int pred) { return __syncthreads_count(pred); }

/* ---- programmatic dependent launch (sm_90+; elsewhere no-ops) ---------------------
 * The split-KV reduce is launched with the programmatic-serialization
 * attribute so its launch overlaps the tail of the kernel before it:
 * grid_dependents_launch() lets it launch, grid_dependency_wait() blocks until
 * the previous grid has finished and its writes are visible (a no-op when
 * launched without the attribute). tile_amd.cuh needs the same two names. */
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* ---- split-KV arrivals (kernel/merge.cuh) ---------------------------------------------
 * The segments of a program count their arrivals on a 32-bit counter in the
 * workspace; the last one merges the partials the others wrote.
 * arrive_counter: one thread of each segment calls it after a block barrier
 * that follows every thread's partial stores. atom.inc wraps at `last` (old >=
 * last gives 0), so the last arrival of a call sees `last` and leaves the
 * counter at 0 for the next call. acq_rel at gpu scope: the release publishes
 * the block's stores (cumulative through the barrier), the acquire makes the
 * other segments' partials visible to the block after its next barrier; no
 * separate fence. load_fresh: partials written by other blocks during this
 * grid, read through L2 (ld.global.cg): the merging block's L1 may hold an
 * older copy of the line (neighbouring rows of other programs). */
__device__ __forceinline__ unsigned arrive_counter(unsigned *counter, unsigned last) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(counter), "r"(last) : "memory");
  return old;
}
template <typename V>
__device__ __forceinline__ V load_fresh(const V *p) {
  return __ldcg(p);
}

/* ---- fp8 cache codes ----------------------------------------------------------- */
/* Eight E4M3 codes (8 bytes, lowest first) -> eight values of the compute type
 * T, exactly (fp8.cuh). sm_89+ converts e4m3fn pairs with cvt.rn.f16x2.e4m3x2
 * (NaN to NaN); e4m3fnuz, and sm_80, take the portable bit path. */
template <typename T>
__device__ __forceinline__ uint4 fp8x8_to(uint2 v, bool fnuz) {
  uint32_t a, b, c, d;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (!fnuz) {
    asm("{\n.reg .b16 l0, h0, l1, h1;\n"
        "mov.b32 {l0, h0}, %4;\n"
        "mov.b32 {l1, h1}, %5;\n"
        "cvt.rn.f16x2.e4m3x2 %0, l0;\n"
        "cvt.rn.f16x2.e4m3x2 %1, h0;\n"
        "cvt.rn.f16x2.e4m3x2 %2, l1;\n"
        "cvt.rn.f16x2.e4m3x2 %3, h1;\n}\n"
        : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
        : "r"(v.x), "r"(v.y));
    return f16x8_to<T>(a, b, c, d);
  }
#endif
  fp8x4_to_f16_portable(v.x, fnuz, a, b);
  fp8x4_to_f16_portable(v.y, fnuz, c, d);
  return f16x8_to<T>(a, b, c, d);
}

/* ---- fp8 codes straight into MMA fragments (kernel/products.cuh) ------------------
 * For the mma.sync tiles of fp8 caches the codes go from the staged tile in
 * shared memory into B fragments, converted in registers, and the products
 * run in f16 (every E4M3 value is exact in f16; the body gives Q and P in f16
 * too, docs/design/layout.md). Head-dim order: the dot products Q K^T are
 * taken in an order of the head dim chosen so that a lane's codes of a key
 * are contiguous: in a block of R k16 steps (16R columns from `base`), lane
 * (g, t) holds columns base + 4Rt .. base + 4Rt + 4R - 1 of its keys; step s
 * uses the four from 4Rt + 4s, as k slots 2t, 2t+1 (first two) and 2t+8,
 * 2t+9. Q's A fragments are loaded in the same order (load_a). P V takes V
 * through ldmatrix.trans of code pairs: the n slot g of a B fragment's first
 * half is head-dim column 2g of its 16, of the second half column 2g + 1, so
 * the accumulator comes out in that order, which the epilogue's store into
 * the warps' merge undoes (code_row4). */
constexpr bool kTileFp8Frags = true;
/* Warps per multiprocessor the 16-row decode tiles are register-capped for
 * (kernel/shape.cuh, MIN_BLOCKS): 12 (about 170 registers) in general, 16
 * (128) at head dims up to 64, where the tile needs about 126 and the merge
 * by the last arrival took it to 135 (3 programs of 4 warps a multiprocessor
 * instead of 4): decode 64x8192 at d64 on the H200 ran at 2.95 TB/s against
 * 3.84 before it (docs/design/decode.md). */
constexpr int kDecodeWarps = 12;
constexpr int kDecodeWarpsD64 = 16;

template <bool FNUZ>
struct CodeFrags {
  /* Four codes (lowest byte first) -> f16 pairs: codes 0, 1 in lo (code 0 low), 2, 3 in hi. */
  __device__ __forceinline__ static void cvt4(uint32_t x, uint32_t &lo, uint32_t &hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if constexpr (!FNUZ) {
      asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
          : "=r"(lo), "=r"(hi)
          : "r"(x));
      return;
    }
#endif
    fp8x4_to_f16_portable(x, FNUZ, lo, hi);
  }
  /* Q (f16) in the head-dim order above: R A fragments of the block at whose
   * element (r, c) `at` returns the address (8-byte aligned in steps of 4). */
  template <int R, class At>
  __device__ __forceinline__ static void load_a(FragA (&a)[R], At at) {
    const int l = lane_id(), g = l >> 2, t = l & 3;
#pragma unroll
    for (int s = 0; s < R; s++) {
      const uint2 u0 = *reinterpret_cast<const uint2 *>(at(g, 4 * R * t + 4 * s));
      const uint2 u1 = *reinterpret_cast<const uint2 *>(at(g + 8, 4 * R * t + 4 * s));
      a[s].x[0] = u0.x;
      a[s].x[2] = u0.y;
      a[s].x[1] = u1.x;
      a[s].x[3] = u1.y;
    }
  }
  /* K: R B fragments (16 keys x R k16 steps) of the codes at whose key r,
   * byte b of the block `at` returns the address (16 bytes from 4Rt
   * contiguous and aligned to 4R). */
  template <int R, class At>
  __device__ __forceinline__ static void load_b_nk(FragB (&b)[R], At at) {
    const int l = lane_id();
    const unsigned char *p0 = at(l >> 2, 4 * R * (l & 3)), *p1 = at((l >> 2) + 8, 4 * R * (l & 3));
    uint32_t w0[R], w1[R];
    if constexpr (R == 4) {
      const uint4 a = *reinterpret_cast<const uint4 *>(p0), c = *reinterpret_cast<const uint4 *>(p1);
      w0[0] = a.x, w0[1] = a.y, w0[2] = a.z, w0[3] = a.w;
      w1[0] = c.x, w1[1] = c.y, w1[2] = c.z, w1[3] = c.w;
    } else if constexpr (R == 2) {
      const uint2 a = *reinterpret_cast<const uint2 *>(p0), c = *reinterpret_cast<const uint2 *>(p1);
      w0[0] = a.x, w0[1] = a.y;
      w1[0] = c.x, w1[1] = c.y;
    } else {
      static_assert(R == 1, "blocks of 1, 2 or 4 k16 steps");
      w0[0] = *reinterpret_cast<const uint32_t *>(p0);
      w1[0] = *reinterpret_cast<const uint32_t *>(p1);
    }
#pragma unroll
    for (int s = 0; s < R; s++) {
      cvt4(w0[s], b[s].x[0], b[s].x[1]);
      cvt4(w1[s], b[s].x[2], b[s].x[3]);
    }
  }
  /* V: the B fragments of G (1 or 2) groups of 16 head-dim columns for 16
   * keys, of the codes at whose key r, byte b of the groups `at` returns the
   * address (16-byte chunks, aligned). */
  template <int G, class At>
  __device__ __forceinline__ static void load_b_kn(FragB (&b)[G], At at) {
    const int l = lane_id();
    const unsigned char *p = at((l & 7) + 8 * ((l >> 3) & 1), 16 * (l >> 4));
    uint32_t d[2 * G];
    if constexpr (G == 2) {
      ldmatrix_x4_trans(d, p);
    } else {
      static_assert(G == 1, "one or two groups of 16 columns");
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                   : "=r"(d[0]), "=r"(d[1])
                   : "r"(smem_u32(p)));
    }
    /* d[2i]: keys 0-7, d[2i+1]: keys 8-15 of group i; a word holds (key 2t,
     * column 2g), (2t, 2g+1), (2t+1, 2g), (2t+1, 2g+1): bytes 0, 2 make the
     * pair of column 2g, bytes 1, 3 that of 2g + 1. */
#pragma unroll
    for (int i = 0; i < G; i++) {
      cvt4(__byte_perm(d[2 * i], 0u, 0x3120), b[i].x[0], b[i].x[2]);
      cvt4(__byte_perm(d[2 * i + 1], 0u, 0x3120), b[i].x[1], b[i].x[3]);
    }
  }
  /* A P V accumulator in the order load_b_kn leaves holds element e at
   * column 4t + {0, 2, _, _, 1, 3}[e & 5] of its 16 (e & 2 is the row
   * slot): the four of row slot sl are columns code_col4() .. + 3, returned
   * in column order by code_row4 (the epilogue stores them so). */
  __device__ __forceinline__ static int code_col4() { return 4 * (lane_id() & 3); }
  __device__ __forceinline__ static float4 code_row4(const FragC &c, int sl) {
    return make_float4(c.x[2 * sl], c.x[2 * sl + 4], c.x[2 * sl + 1], c.x[2 * sl + 5]);
  }
};

/* ---- math ------------------------------------------------------------------------ */
/* 1/x to about 1 ulp in one instruction (MUFU.RCP), for the epilogue's
 * normalisations; x = 0 gives +inf, which callers select away. */
__device__ __forceinline__ float fast_rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
/* 2^x; exp2(-inf) = 0, which masking relies on. */
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace aa

#include "tile_nv_sm90.cuh"

#endif /* ANYATTN_GPU_TILE_NV_CUH */
