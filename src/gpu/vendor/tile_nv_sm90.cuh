/* tile_nv_sm90.cuh: the Hopper (sm_90, sm_90a) tile primitives: thread-block
 * clusters and distributed shared memory, warpgroup MMA (wgmma) on swizzled
 * shared-memory tiles, mbarriers, named barriers and TMA tensor copies. Every
 * name is declared for every NVIDIA pass; kArchWgmma and kArchTma say whether
 * the device pass being compiled can issue them, so the kernel parts choose
 * with `if constexpr` and never with the preprocessor. */
#ifndef ANYATTN_GPU_TILE_NV_SM90_CUH
#define ANYATTN_GPU_TILE_NV_SM90_CUH

#include <stdint.h>

namespace aa {

/* What this compilation pass can issue: wgmma needs sm_90a, TMA and clusters
 * sm_90. False in the host pass and for sm_80; shared-memory layouts
 * (TileShape) never depend on these, so host and device agree on sizes. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kArchWgmma = true;
#else
constexpr bool kArchWgmma = false;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kArchTma = true;
#else
constexpr bool kArchTma = false;
#endif

/* ---- thread-block clusters (sm_90) ---------------------------------------------
 * The split-KV segments of one program can run as one cluster and merge
 * through distributed shared memory, with no partials or counters (the launcher
 * enables it only on sm_90+; elsewhere these are never reached). */
constexpr bool kHasClusters = true;
__device__ __forceinline__ void cluster_sync() { /* every thread of every block of the cluster */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#else
  __trap();
#endif
}
/* The same barrier without memory ordering (no fence before the arrive):
 * for "nobody leaves while others still read my shared memory", where each
 * reader has already consumed what it loaded. */
__device__ __forceinline__ void cluster_sync_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory");
#else
  __trap();
#endif
}
/* The address of this block's shared object `p` in block `rank` of the cluster. */
__device__ __forceinline__ uint32_t cluster_map(const void *p, int rank) {
  uint32_t r = smem_u32(p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %0, %1;\n" : "+r"(r) : "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ float4 cluster_ld4(uint32_t addr) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
#endif
  return v;
}
__device__ __forceinline__ float2 cluster_ld2(uint32_t addr) {
  float2 v = make_float2(0.0f, 0.0f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
#endif
  return v;
}

/* ---- warpgroup MMA (wgmma, sm_90a) ------------------------------------------------
 * D (m64 x N, fp32, registers) += A (m64 x k16, registers) * B (k16 x N, shared
 * memory through a matrix descriptor), issued by the 4 warps of a warpgroup.
 * Warp w of the group holds rows 16w..16w+15 of A and D in exactly the
 * mma.sync m16n8k16 layouts FragA and FragC use (D: N/8 m16n8 C fragments in
 * column order), so the attention body's softmax and masks read the result
 * unchanged. B is a 128-byte-swizzled tile (see wg_desc): K-major (keys x
 * head dim, for Q K^T) or, with TRANS, N-major (V for P V). Only built for
 * sm_90a (kArchWgmma); the kernel parts use it only there. */
constexpr bool kTileWgmma = true;

/* Matrix descriptor of a 128-byte-swizzled tile at shared address `saddr`
 * (its swizzle pattern 1024-byte aligned): lbo, sbo in bytes (PTX ISA,
 * "Matrix Descriptor Format"; swizzle mode 1 = 128 B in bits 62-63). */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo & 0x3FFFFu) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
/* The descriptor of the tile `bytes` (a multiple of 16) past d's: its start
 * address field (bits 0-13, the address / 16) moves, the rest stays. Exact
 * while the new address stays inside shared memory (below 2^18 bytes, so the
 * field does not carry), and one integer add on the low word where a fresh
 * wg_desc costs a mask, a shift and an or per product. */
__device__ __forceinline__ uint64_t wg_desc_add(uint64_t d, uint32_t bytes) {
  return ((d >> 32) << 32) | (uint32_t)((uint32_t)d + (bytes >> 4));
}
/* Orders earlier register accesses before the next wgmma reads or writes them. */
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits for every wgmma this warpgroup committed: results readable, shared memory free. */
__device__ __forceinline__ void wg_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/* Waits for all but the newest committed group (the one issued last may still run). */
__device__ __forceinline__ void wg_wait_but_newest() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
/* Pins a register operand of an in-flight wgmma at this point of the
 * program: the compiler sees it read and written here, so it neither
 * schedules other reads or writes of it across a wg_fence / wg_wait_all
 * placed next to this, nor reuses the register for other values before. */
__device__ __forceinline__ void wg_keep(float &x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void wg_keep(uint32_t &x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ void wg_keep(FragC &c) {
#pragma unroll
  for (int e = 0; e < kFragCElems; e++) wg_keep(c.x[e]);
}
__device__ __forceinline__ void wg_keep(FragA &f) {
#pragma unroll
  for (int i = 0; i < 4; i++) wg_keep(f.x[i]);
}

/* Shared memory written through the generic proxy (cp.async, stores) that a
 * wgmma reads next: each writing thread fences before the barrier. */
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- the two-warpgroup pipeline of the 128-row wgmma tile --------------------------
 * Shared-memory barriers (mbarrier) that count arrivals per phase, and named
 * barriers (ids 1..15) over a subset of the block's threads: they let the
 * two warpgroups of a program run half a KV tile apart (attention.cuh). */
__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
/* Makes barrier inits visible before other threads arrive (with a block barrier after). */
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* One arrival on `bar` once every cp.async this thread issued so far has
 * landed; noinc: the arrival is one of the count given at init. */
__device__ __forceinline__ void mbar_arrive_copies(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
/* One plain arrival on `bar` (no bytes announced). */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
/* Waits until the phase of `bar` with this parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  const uint32_t a = smem_u32(bar);
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(a), "r"(parity)
                 : "memory");
  } while (!done);
}
/* ---- tensor copies (TMA, sm_90+) -----------------------------------------------
 * cp.async.bulk.tensor moves one box of a 4-d tensor described by a tensor
 * map (CUtensorMap, encoded on the host, passed in the kernel's
 * __grid_constant__ parameters) into shared memory through the copy engine,
 * and counts its bytes off the transaction count of `bar`; a phase of `bar`
 * completes once its arrivals are in and every expected byte has landed.
 * Elements outside the tensor are written as zeros. The padded K/V tiles
 * take one box per cache page and head this way, issued by a few lanes of
 * one warp, instead of ~20 instructions per 16 bytes on every thread.
 * Only reached where kTileTma and kArchTma. */
constexpr bool kTileTma = true;
/* This thread's arrival on `bar`, announcing `bytes` more to land this phase. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#else
  (void)bar, (void)bytes;
  __trap();
#endif
}
/* Brings tensor map `map` (a generic address of a __grid_constant__
 * parameter) into the TMA unit's cache ahead of its first copy, which would
 * otherwise wait one more memory round trip for it. */
__device__ __forceinline__ void tma_prefetch_map(const void *map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#else
  (void)map;
#endif
}
/* Box at coordinates (c0, c1, c2, c3), innermost first, of tensor map `map`
 * (a generic address of a __grid_constant__ parameter) -> dst (128-byte aligned). */
__device__ __forceinline__ void tma_load_4d(void *dst, const void *map, int c0, int c1, int c2, int c3, uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)c3, (void)bar;
  __trap();
#endif
}

/* An L2 cache policy for tma_load_4d_hint over the whole access: evict_first, else evict_last. */
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  else asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
#else
  (void)evict_first;
#endif
  return pol;
}
/* tma_load_4d with an L2 cache policy (l2_policy) on the box's reads. */
__device__ __forceinline__ void tma_load_4d_hint(void *dst, const void *map, int c0, int c1, int c2, int c3,
                                                 uint64_t *bar, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)), "l"(pol)
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)c3, (void)bar, (void)pol;
  __trap();
#endif
}

/* A 3-d TMA box from shared memory out to global memory (the producer's
 * kernels' rows out, epilogue.cuh), as one bulk async-group of the issuing
 * thread: commit after the boxes, then wait until their shared memory is
 * read (before it is written again) or, before the thread exits, until the
 * writes are done. */
__device__ __forceinline__ void tma_store_3d(const void *map, const void *src, int c0, int c1, int c2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(src))
               : "memory");
#else
  (void)map, (void)src, (void)c0, (void)c1, (void)c2;
  __trap();
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}
/* Box at (c0, c1, c2) of a 3-d tensor map -> dst (1024-byte aligned under
 * the 128-byte swizzle); as tma_load_4d. */
__device__ __forceinline__ void tma_load_3d(void *dst, const void *map, int c0, int c1, int c2, uint64_t *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)bar;
  __trap();
#endif
}

/* Named barrier `id` over `count` threads: sync waits, arrive does not. */
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/* named_sync that also returns how many of the `count` threads passed a
 * true pred (the producer warpgroup's work search, scheduler.cuh). */
__device__ __forceinline__ int named_sync_count(int id, int count, int pred) {
  int n;
  asm volatile("{\n.reg .pred p;\nsetp.ne.s32 p, %3, 0;\nbar.red.popc.u32 %0, %1, %2, p;\n}\n"
               : "=r"(n)
               : "r"(id), "r"(count), "r"(pred)
               : "memory");
  return n;
}

/* ---- decode fragments with the keys as M (mainloop_ws.cuh, ws_decode_item) --
 * A warp's m16n8k16 products over 16 keys x 8 rows: the scores and the
 * output come transposed (keys, head dims as rows; the query rows as the
 * eight columns), so a lane holds two query rows, (lane & 3) * 2 and + 1,
 * and the lanes sharing them (lane & 3 equal) reduce over xor 4, 8, 16. */
__device__ __forceinline__ float col_allreduce_max(float v) {
  v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, 8));
  v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, 16));
  return v;
}
__device__ __forceinline__ float col_allreduce_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  return v;
}
/* An 8x8 matrix of 16-bit pairs in the m16n8 C layout (lane: row lane / 4,
 * columns (lane & 3) * 2 and + 1), transposed in place: the scores S^T of a
 * 16-key slice become the B operand P^T of O^T = V^T P^T. */
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

/* Stops a kernel whose code this pass cannot hold (a kernel launched only
 * where the device runs sm_90a code, reached anyway): a loud error, never
 * outputs left unwritten. */
__device__ __forceinline__ void pass_unsupported() { __trap(); }

/* Register reallocation between the warpgroups of a block (sm_90a): every
 * thread of a warpgroup gives its registers back down to N (regs_release)
 * or waits for the pool to grant N (regs_claim). N is a multiple of 8 in
 * [24, 256]; ptxas allocates the code after each at that count. */
template <int N>
__device__ __forceinline__ void regs_release() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}
template <int N>
__device__ __forceinline__ void regs_claim() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  __trap();
#endif
}

/* The m64nNk16 products, D in registers (N/2 fp32 per thread, "+f" operands
 * %0..), for N = 64 and 128, and 80 and 96 for P V at those head dims.
 * AA_WG_D<R>: D's operand list in the PTX text, AA_WG_O<R>(d): its
 * constraints; the operands after D are numbered from R. */
#define AA_WG_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define AA_WG_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define AA_WG_D40 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39}"
#define AA_WG_D48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define AA_WG_O32(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), \
  "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), \
  "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), \
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define AA_WG_O40(d) \
  AA_WG_O32(d), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define AA_WG_O48(d) \
  AA_WG_O40(d), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define AA_WG_O64(d) \
  AA_WG_O32(d), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), \
  "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
  "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/* A from registers (4 x 32-bit per thread, the FragA layout), B by descriptor,
 * B transposed when TRANS (N-major). R = N / 2; a0..desc..trans are the PTX
 * operand numbers after D's. */
template <typename T, int N, int TRANS>
struct WgOp;
#define AA_WG_RS(T, TN, N, R, A0, A1, A2, A3, DESC, SD, TR)                                                   \
  template <int TRANS>                                                                                        \
  struct WgOp<T, N, TRANS> {                                                                                  \
    __device__ __forceinline__ static void run(float *d, const uint32_t *a, uint64_t desc, int scale_d) {     \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                                           \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TN "." TN " " AA_WG_D##R ", "            \
                   "{" A0 ", " A1 ", " A2 ", " A3 "}, " DESC ", p, 1, 1, " TR ";\n"                            \
                   "}\n"                                                                                      \
                   : AA_WG_O##R(d)                                                                            \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d), "n"(TRANS));        \
    }                                                                                                         \
  };
AA_WG_RS(aa_f16, "f16", 64, 32, "%32", "%33", "%34", "%35", "%36", "%37", "%38")
AA_WG_RS(aa_f16, "f16", 80, 40, "%40", "%41", "%42", "%43", "%44", "%45", "%46")
AA_WG_RS(aa_f16, "f16", 96, 48, "%48", "%49", "%50", "%51", "%52", "%53", "%54")
AA_WG_RS(aa_f16, "f16", 128, 64, "%64", "%65", "%66", "%67", "%68", "%69", "%70")
AA_WG_RS(aa_bf16, "bf16", 64, 32, "%32", "%33", "%34", "%35", "%36", "%37", "%38")
AA_WG_RS(aa_bf16, "bf16", 80, 40, "%40", "%41", "%42", "%43", "%44", "%45", "%46")
AA_WG_RS(aa_bf16, "bf16", 96, 48, "%48", "%49", "%50", "%51", "%52", "%53", "%54")
AA_WG_RS(aa_bf16, "bf16", 128, 64, "%64", "%65", "%66", "%67", "%68", "%69", "%70")
#undef AA_WG_RS

/* d (the N/2 accumulators of an m64 x N tile) = a * B, plus d unless
 * scale_d is 0; the caller fences, commits and waits (wg_fence, wg_commit,
 * wg_wait_all). */
template <typename T, int N, int TRANS>
__device__ __forceinline__ void wg_mma(float *d, const FragA &a, uint64_t desc, int scale_d) {
  WgOp<T, N, TRANS>::run(d, a.x, desc, scale_d);
}

/* The same product with A also from shared memory (a K-major tile through
 * its own descriptor, like B's without transpose). Q K^T uses it: with Q as
 * a register A operand loaded once before the KV loop, ptxas 13.0 packed P
 * into Q's registers for the P V product and never reloaded Q, so every tile
 * after the first was wrong (docs/design/prefill.md#q-from-shared-memory). */
template <typename T, int N>
struct WgOpSS;
#define AA_WG_SS(T, TN, N, R, ADESC, BDESC, SD)                                                               \
  template <>                                                                                                 \
  struct WgOpSS<T, N> {                                                                                       \
    __device__ __forceinline__ static void run(float *d, uint64_t adesc, uint64_t bdesc, int scale_d) {       \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                                           \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TN "." TN " " AA_WG_D##R ", "            \
                   ADESC ", " BDESC ", p, 1, 1, 0, 0;\n"                                                       \
                   "}\n"                                                                                      \
                   : AA_WG_O##R(d)                                                                            \
                   : "l"(adesc), "l"(bdesc), "r"(scale_d));                                                   \
    }                                                                                                         \
  };
AA_WG_SS(aa_f16, "f16", 64, 32, "%32", "%33", "%34")
AA_WG_SS(aa_f16, "f16", 96, 48, "%48", "%49", "%50")
AA_WG_SS(aa_f16, "f16", 128, 64, "%64", "%65", "%66")
AA_WG_SS(aa_bf16, "bf16", 64, 32, "%32", "%33", "%34")
AA_WG_SS(aa_bf16, "bf16", 96, 48, "%48", "%49", "%50")
AA_WG_SS(aa_bf16, "bf16", 128, 64, "%64", "%65", "%66")
#undef AA_WG_SS
#undef AA_WG_D32
#undef AA_WG_D40
#undef AA_WG_D48
#undef AA_WG_D64
#undef AA_WG_O32
#undef AA_WG_O40
#undef AA_WG_O48
#undef AA_WG_O64

/* d (m64 x N) = A * B (+ d unless scale_d is 0), both K-major in shared memory. */
template <typename T, int N>
__device__ __forceinline__ void wg_mma_ss(float *d, uint64_t adesc, uint64_t bdesc, int scale_d) {
  WgOpSS<T, N>::run(d, adesc, bdesc, scale_d);
}

}  // namespace aa

#endif /* ANYATTN_GPU_TILE_NV_SM90_CUH */
