/* stage.cu: fp8 pages staged to 16-bit for prefill batches
 * (limits.stage_kv_tokens; docs/design/layout.md#staged-prefill). One kernel
 * converts the K and V pages of every sequence of the batch, exactly, into
 * the workspace's copy (dense pages, the sequences' pages back to back in
 * batch order) and writes the page table over it; the attention kernel of
 * 16-bit caches then reads the copy (launch.cu, staged_run). Written once for
 * CUDA and HIP. */
#include <stdint.h>

#include "host.cuh"
#include "launch.h"
#include "tile.cuh"

namespace aa {
namespace {

struct StageParams {
  const unsigned char *k8, *v8;                 /* the fp8 caches */
  int64_t k_sb, k_st, k_sh, v_sb, v_st, v_sh;   /* their strides, bytes */
  const int32_t *seq_lens_k, *block_table;
  int bt_stride;
  int bs, heads, hd;                            /* the copy's page: bs x heads x hd, dense */
  int fnuz;
  unsigned char *k16, *v16;                     /* cap + 1 pages each; page cap all NaN */
  int32_t *table;                               /* [num_seqs, stride] */
  int64_t stride;
  int64_t cap;
  int64_t page_bytes;
};

/* Page lp of the copy from cache page pg: chunk q of the page (CW codes, the
 * copy's order: q = (row x heads + head) x rowc + chunk) to element q x CW of
 * the copy's page. Each thread takes chunks tid, tid + nt, ... of the page,
 * kU of them loaded before any is converted and stored, so that every thread
 * has 2 kU loads in flight. */
constexpr int kStageU = 4;
template <int CW> struct StageChunk;
template <> struct StageChunk<8> {
  typedef uint2 codes;
  template <typename T> __device__ __forceinline__ static void put(uint4 *d, codes c, bool fnuz) {
    d[0] = fp8x8_to<T>(c, fnuz);
  }
};
template <> struct StageChunk<16> {
  typedef uint4 codes;
  template <typename T> __device__ __forceinline__ static void put(uint4 *d, codes c, bool fnuz) {
    d[0] = fp8x8_to<T>(make_uint2(c.x, c.y), fnuz);
    d[1] = fp8x8_to<T>(make_uint2(c.z, c.w), fnuz);
  }
};

template <typename T, int CW>
__device__ __forceinline__ void stage_page(const StageParams &sp, int64_t pg, unsigned char *kd, unsigned char *vd) {
  typedef typename StageChunk<CW>::codes C;
  const int tid = (int)threadIdx.x, nt = (int)blockDim.x;
  const int rowc = sp.hd / CW, page_chunks = sp.bs * sp.heads * rowc; /* < 2^31 (plan checks) */
  const bool fnuz = sp.fnuz != 0;
  const unsigned char *ks = sp.k8 + pg * sp.k_sb, *vs = sp.v8 + pg * sp.v_sb;
  for (int q0 = tid; q0 < page_chunks; q0 += kStageU * nt) {
    C kc[kStageU], vc[kStageU];
#pragma unroll
    for (int j = 0; j < kStageU; j++) {
      const int q = q0 + j * nt;
      if (q < page_chunks) {
        const int rh = q / rowc, c = q - rh * rowc, r = rh / sp.heads, h = rh - r * sp.heads;
        kc[j] = *reinterpret_cast<const C *>(ks + r * sp.k_st + h * sp.k_sh + c * CW);
        vc[j] = *reinterpret_cast<const C *>(vs + r * sp.v_st + h * sp.v_sh + c * CW);
      }
    }
#pragma unroll
    for (int j = 0; j < kStageU; j++) {
      const int q = q0 + j * nt;
      if (q < page_chunks) {
        const size_t o = (size_t)q * CW * sizeof(T);
        StageChunk<CW>::template put<T>(reinterpret_cast<uint4 *>(kd + o), kc[j], fnuz);
        StageChunk<CW>::template put<T>(reinterpret_cast<uint4 *>(vd + o), vc[j], fnuz);
      }
    }
  }
}

/* Blocks (., s): sequence s, a page of it per block at a time (all the
 * block's threads on one page: its id is one load, and a short sequence
 * still has every chunk's load in flight at once). Its first page in the
 * copy is the sum of the pages of the sequences before it; a sequence whose
 * pages pass the copy's end maps every page to the NaN page. CW: codes per
 * copy, 16 where the caches' rows and strides are 16-byte aligned, else 8. */
template <typename T, int CW>
__global__ void stage_kernel(StageParams sp) {
  grid_dependency_wait(); /* launched with programmatic dependent launch: the caches may still be being written */
  __shared__ unsigned long long before;
  const int s = (int)blockIdx.y, tid = (int)threadIdx.x, nt = (int)blockDim.x;
  if (tid == 0) before = 0;
  __syncthreads();
  unsigned long long part = 0;
  for (int i = tid; i < s; i += nt) {
    const int kv = sp.seq_lens_k[i];
    part += kv > 0 ? ((unsigned long long)kv + sp.bs - 1) / sp.bs : 0;
  }
  if (part) atomicAdd(&before, part);
  __syncthreads();
  grid_dependents_launch(); /* the attention kernel may launch; it waits for this grid's writes */
  const int64_t base = (int64_t)before;
  const int kv = sp.seq_lens_k[s];
  const int64_t np = kv > 0 ? ((int64_t)kv + sp.bs - 1) / sp.bs : 0;
  const bool over = base + np > sp.cap;
  const int64_t nrow = np < sp.stride ? np : sp.stride;
  for (int64_t lp = (int64_t)blockIdx.x * nt + tid; lp < nrow; lp += (int64_t)gridDim.x * nt)
    sp.table[(int64_t)s * sp.stride + lp] = (int32_t)(over ? sp.cap : base + lp);

  if (s == 0 && blockIdx.x == 0) { /* the NaN page: all ones is NaN in f16 and bf16 */
    const uint4 nan = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    const int64_t n16 = sp.page_bytes / 16;
    for (int64_t q = tid; q < n16; q += nt) {
      reinterpret_cast<uint4 *>(sp.k16 + sp.cap * sp.page_bytes)[q] = nan;
      reinterpret_cast<uint4 *>(sp.v16 + sp.cap * sp.page_bytes)[q] = nan;
    }
  }
  if (over) return;
  const int32_t *bt = sp.block_table + (int64_t)s * sp.bt_stride;
  for (int64_t lp = blockIdx.x; lp < np; lp += gridDim.x)
    stage_page<T, CW>(sp, bt[lp], sp.k16 + (base + lp) * sp.page_bytes, sp.v16 + (base + lp) * sp.page_bytes);
}

}  // namespace

anyattn_status launch_stage(const anyattn_plan *plan, const anyattn_args *a, const aa_gpu_device &dev) {
  const anyattn_problem *pr = &plan->problem;
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  StageParams sp;
  sp.k8 = static_cast<const unsigned char *>(a->k_cache);
  sp.v8 = static_cast<const unsigned char *>(a->v_cache);
  sp.k_sb = a->k_stride_block, sp.k_st = a->k_stride_token, sp.k_sh = a->k_stride_head;
  sp.v_sb = a->v_stride_block, sp.v_st = a->v_stride_token, sp.v_sh = a->v_stride_head;
  sp.seq_lens_k = a->seq_lens_k;
  sp.block_table = a->block_table;
  sp.bt_stride = a->block_table_stride;
  sp.bs = pr->block_size, sp.heads = pr->num_kv_heads, sp.hd = pr->head_dim;
  sp.fnuz = pr->kv_dtype == ANYATTN_KV_FP8_E4M3FNUZ;
  unsigned char *ws = static_cast<unsigned char *>(a->workspace) + st->stage_offset;
  sp.k16 = ws;
  sp.v16 = ws + st->stage_kv_bytes;
  sp.table = reinterpret_cast<int32_t *>(ws + 2 * st->stage_kv_bytes);
  sp.stride = st->stage_stride;
  sp.cap = st->stage_pages;
  sp.page_bytes = (int64_t)st->stage_page_bytes;
  /* eight blocks of 256 threads per SM in all, whatever the lengths
   * (graph-safe: host sizes only), a page per block at a time: up to 2
   * kStageU chunks of codes in flight per thread */
  const int per_seq = (8 * dev.num_sms + a->num_seqs - 1) / a->num_seqs;
  const dim3 grid((unsigned)(per_seq > 0 ? per_seq : 1), (unsigned)a->num_seqs);
  cudaStream_t stream = (cudaStream_t)a->stream;
  const bool pdl = dev.arch >= 90;
  /* 16-code copies where every code row starts 16-byte aligned */
  const bool w16 = pr->head_dim % 16 == 0 && (sp.k_sb | sp.k_st | sp.k_sh | sp.v_sb | sp.v_st | sp.v_sh) % 16 == 0 &&
                   ((uintptr_t)sp.k8 | (uintptr_t)sp.v8) % 16 == 0;
  if (pr->dtype == ANYATTN_DTYPE_F16)
    return w16 ? launch(stage_kernel<aa_f16, 16>, grid, dim3(256), 0, stream, pdl, 0, sp)
               : launch(stage_kernel<aa_f16, 8>, grid, dim3(256), 0, stream, pdl, 0, sp);
  return w16 ? launch(stage_kernel<aa_bf16, 16>, grid, dim3(256), 0, stream, pdl, 0, sp)
             : launch(stage_kernel<aa_bf16, 8>, grid, dim3(256), 0, stream, pdl, 0, sp);
}

}  // namespace aa
