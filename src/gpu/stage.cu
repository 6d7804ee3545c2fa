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

/* Blocks (., s): sequence s, its pages' 8-code chunks spread over all of
 * them (a thread a chunk at a time, so that a short sequence still has every
 * chunk's load in flight at once). Its first page in the copy is the sum of
 * the pages of the sequences before it; a sequence whose pages pass the
 * copy's end maps every page to the NaN page. */
template <typename T>
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

  const int rowc = sp.hd / 8;                        /* 8-code chunks per row */
  const int page_chunks = sp.bs * sp.heads * rowc;   /* < 2^31 (plan checks) */
  if (s == 0 && blockIdx.x == 0) { /* the NaN page: all ones is NaN in f16 and bf16 */
    const uint4 nan = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    for (int q = tid; q < page_chunks; q += nt) {
      reinterpret_cast<uint4 *>(sp.k16 + sp.cap * sp.page_bytes)[q] = nan;
      reinterpret_cast<uint4 *>(sp.v16 + sp.cap * sp.page_bytes)[q] = nan;
    }
  }
  if (over) return;
  const int32_t *bt = sp.block_table + (int64_t)s * sp.bt_stride;
  uint4 *kd = reinterpret_cast<uint4 *>(sp.k16 + base * sp.page_bytes);
  uint4 *vd = reinterpret_cast<uint4 *>(sp.v16 + base * sp.page_bytes);
  const int64_t units = np * page_chunks;
  for (int64_t u = (int64_t)blockIdx.x * nt + tid; u < units; u += (int64_t)gridDim.x * nt) {
    /* u = page x page_chunks + (row x heads + head) x rowc + chunk: the copy's order */
    const int64_t lp = u / page_chunks;
    const int q = (int)(u - lp * page_chunks);
    const int rh = q / rowc, c = q - rh * rowc, r = rh / sp.heads, h = rh - r * sp.heads;
    const int64_t pg = bt[lp];
    const uint2 kc = *reinterpret_cast<const uint2 *>(sp.k8 + pg * sp.k_sb + r * sp.k_st + h * sp.k_sh + c * 8);
    const uint2 vc = *reinterpret_cast<const uint2 *>(sp.v8 + pg * sp.v_sb + r * sp.v_st + h * sp.v_sh + c * 8);
    kd[u] = fp8x8_to<T>(kc, sp.fnuz != 0);
    vd[u] = fp8x8_to<T>(vc, sp.fnuz != 0);
  }
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
  /* eight blocks of 256 threads per SM in all (a full SM), whatever the
   * lengths (graph-safe: host sizes only): 16 bytes of codes in flight per
   * thread, about 4 MB on an H200 */
  const int per_seq = (8 * dev.num_sms + a->num_seqs - 1) / a->num_seqs;
  const dim3 grid((unsigned)(per_seq > 0 ? per_seq : 1), (unsigned)a->num_seqs);
  cudaStream_t stream = (cudaStream_t)a->stream;
  const bool pdl = dev.arch >= 90;
  if (pr->dtype == ANYATTN_DTYPE_F16) return launch(stage_kernel<aa_f16>, grid, dim3(256), 0, stream, pdl, 0, sp);
  return launch(stage_kernel<aa_bf16>, grid, dim3(256), 0, stream, pdl, 0, sp);
}

}  // namespace aa
