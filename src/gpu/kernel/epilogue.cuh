/* epilogue.cuh: how a program's results leave. The WN warps that split a
 * tile's keys merge their rows through shared memory (by their log-sum-exp
 * weights), then the program writes out and lse, or, as a split-KV segment,
 * its fp32 partial (merged by the program's last segment, merge.cuh) or its rows to the
 * cluster's merge (sm_90: the segments of a program merge through distributed
 * shared memory and write out themselves). Sinks enter once, in the last merge. */
#ifndef ANYATTN_GPU_KERNEL_EPILOGUE_CUH
#define ANYATTN_GPU_KERNEL_EPILOGUE_CUH

#include "products.cuh"
#include "softmax.cuh"

namespace aa {

/* Most segments one cluster can merge (the portable cluster size on sm_90);
 * the host uses fewer (src/gpu/policy.c, the cluster merge limit). */
constexpr int kClusterMax = 8;

/* ---- split-KV merge inside a cluster (sm_90) ---------------------------------------
 * Every segment of the program has left its merged rows (fp32, normalised by
 * its own sum) and their (max, sum) in its shared memory; after a cluster
 * barrier, segment `rank` merges every S-th (row, 8-column chunk) of the
 * program from all S segments' shared memory, with merge_row's
 * arithmetic (sinks, lse, rows with no key: 0 / -inf), and writes out and
 * lse. A second barrier (relaxed) keeps each block's shared memory alive
 * until the others have read it. Every thread of every segment must call it. */
template <typename T, class S>
__device__ __forceinline__ void cluster_merge(const AttnParams &p, const Program<S> &g, unsigned char *smem) {
  constexpr int CH = S::CHUNKS, BLOCK_M = S::WM * 16;
  const int rank = g.seg;
  const int NS = p.num_splits;
  const float *cO = reinterpret_cast<const float *>(smem + S::CL_OFF);
  const float2 *cML = reinterpret_cast<const float2 *>(smem + S::CL_ML_OFF);
  const float vd = S::DESCALE ? descale_of(p, p.v_descale, g.w.seq, g.kvh) : 1.0f; /* out only, not the lse */
  cluster_sync();
  for (int i = (int)threadIdx.x * NS + rank; i < BLOCK_M * CH; i += S::THREADS * NS) {
    const int r = i / CH, c = i % CH;
    if (!g.row_valid(r) || c * 8 >= p.head_dim) continue; /* c 0 (the lse) is always inside */
    float m_s[kClusterMax], w_s[kClusterMax];
    float M = -INFINITY;
#pragma unroll
    for (int u = 0; u < kClusterMax; u++) {
      const float2 ml = u < NS ? cluster_ld2(cluster_map(cML + r, u)) : make_float2(-INFINITY, 0.0f);
      m_s[u] = ml.x;
      w_s[u] = ml.y;
      M = fmax_nan(M, ml.x);
    }
    const bool any = M != -INFINITY; /* some segment saw a key (decided before the sink enters) */
    const float sink = p.sinks ? vec_at(p.sinks, p.sinks_type, g.row_head(r)) * kLog2e : -INFINITY;
    M = fmax_nan(M, sink);
    float L = 0.0f;
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    const float *src = cO + r * S::OROW + c * 8;
#pragma unroll
    for (int u = 0; u < kClusterMax; u++) {
      if (u >= NS) break;
      const float wt = m_s[u] == -INFINITY ? 0.0f : w_s[u] * fast_exp2(m_s[u] - M);
      L += wt;
      const uint32_t ad = cluster_map(src, u);
      const float4 x = cluster_ld4(ad), y = cluster_ld4(ad + 16); /* written by every segment: finite */
      a.x = fmaf(wt, x.x, a.x), a.y = fmaf(wt, x.y, a.y), a.z = fmaf(wt, x.z, a.z), a.w = fmaf(wt, x.w, a.w);
      b.x = fmaf(wt, y.x, b.x), b.y = fmaf(wt, y.y, b.y), b.z = fmaf(wt, y.z, b.z), b.w = fmaf(wt, y.w, b.w);
    }
    if (any && sink != -INFINITY) L += fast_exp2(sink - M);
    const float f = any ? fast_rcp(L) * vd : 0.0f; /* L >= 1 when any */
    uint4 o;
    o.x = pack2<T>(a.x * f, a.y * f);
    o.y = pack2<T>(a.z * f, a.w * f);
    o.z = pack2<T>(b.x * f, b.y * f);
    o.w = pack2<T>(b.z * f, b.w * f);
    const int64_t ro = g.row_offset(r);
    *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + ro * p.head_dim + c * 8) = o;
    if (p.lse && c == 0) p.lse[ro] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  }
  cluster_sync_relaxed(); /* the values loaded above are consumed: no ordering needed */
}

/* A split-KV segment with no tile of its program's keys: an empty partial,
 * which the merge skips. */
template <class S>
__device__ __forceinline__ void write_empty_partial(const AttnParams &p, const Program<S> &g) {
  for (int r = g.tid; r < S::BM; r += S::THREADS)
    if (g.row_valid(r)) p.part_ml[g.part_row(r)] = make_float2(-INFINITY, 0.0f);
}

/* Merge the WN warps of each row band through shared memory, then write. Two
 * orders, fixed by the tile shape:
 * - early scale (WN < kLateMergeWarps): a barrier publishes every warp's rows'
 *   (max, sum); each lane scales its own accumulators by 2^(m - M)/L and
 *   stores them; after a second barrier, threads sum the WN partials. Every
 *   lane works, which suits the 4-warp tiles run 2 per SM.
 * - late scale (WN >= kLateMergeWarps: the 8-warp decode tile): warps store
 *   raw accumulators with their (max, sum); after one barrier, only threads
 *   owning a valid (row, 8-column) chunk weigh the WN partials and normalise.
 *   A decode program has 4 valid rows of 16 at GQA 4, and one barrier fewer
 *   shortens the latency-bound batch-1 epilogue (docs/design/decode.md). */
constexpr int kLateMergeWarps = 8;

template <typename T, class S>
struct Epilogue {
  static constexpr int WN = S::WN, BLOCK_M = S::BM, CH = S::CHUNKS;
  static constexpr bool LATE = WN >= kLateMergeWarps;
  /* FRAG8 accumulators leave the mainloop 2^kCodePShift times their value
   * (products.cuh; the sums are back to theirs): taken out with the
   * normalisation, exactly (a power of two) */
  static constexpr float kAccScale = S::FRAG8 ? 1.0f / (float)(1 << kCodePShift) : 1.0f;
  const AttnParams &p;
  const Program<S> &g;
  unsigned char *smem;
  float *sM, *sL, *sO; /* [WN][BLOCK_M] maxima and sums, [WN][BLOCK_M][OROW] rows */
  bool sink;           /* sinks enter here (not in a later merge of segments) */

  __device__ __forceinline__ Epilogue(const AttnParams &p_, const Program<S> &g_, unsigned char *smem_)
      : p(p_), g(g_), smem(smem_) {
    sM = reinterpret_cast<float *>(smem);
    sL = sM + WN * BLOCK_M;
    sO = sL + WN * BLOCK_M;
    sink = p.sinks && !g.split; /* a split's sink enters once, in the merge of the segments */
  }

  /* A merged row's (max, sum): to the cluster's merge, the segment's partial or the lse. */
  __device__ __forceinline__ void store_row_ml(int r, bool any, float M, float L) const {
    if (g.cl) reinterpret_cast<float2 *>(smem + S::CL_ML_OFF)[r] = make_float2(any ? M : -INFINITY, any ? L : 0.0f);
    else if (g.split) p.part_ml[g.part_row(r)] = make_float2(any ? M : -INFINITY, any ? L : 0.0f);
    else if (p.lse) p.lse[g.row_offset(r)] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  }

  /* Each warp's (max, sum) of its rows. */
  __device__ __forceinline__ void publish_stats(const OnlineSoftmax<S> &sx) const {
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) {
      const float l_tot = row_allreduce_sum(sx.l_run[sl]);
      if (frag_c_row_owner()) {
        const int r = g.wm * 16 + frag_c_row(sl);
        sM[g.wn * BLOCK_M + r] = sx.m_run[sl];
        sL[g.wn * BLOCK_M + r] = l_tot;
      }
    }
  }

  /* Early scale: this lane's factor per row slot, 2^(m - M) / L over the WN warps. */
  __device__ __forceinline__ void early_factors(const OnlineSoftmax<S> &sx, float (&f)[kFragCSlots]) const {
    program_sync<S>();
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) {
      const int r = g.wm * 16 + frag_c_row(sl);
      float M = -INFINITY;
#pragma unroll
      for (int u = 0; u < WN; u++) M = fmax_nan(M, sM[u * BLOCK_M + r]);
      const bool any = M != -INFINITY;
      const int h = g.row_head(r);
      const float sk = sink ? vec_at(p.sinks, p.sinks_type, h) * kLog2e : -INFINITY;
      if (sink) M = fmax_nan(M, sk);
      float L = 0.0f;
#pragma unroll
      for (int u = 0; u < WN; u++) L += sL[u * BLOCK_M + r] * fast_exp2(sM[u * BLOCK_M + r] - M);
      if (sink) L += fast_exp2(sk - M);
      f[sl] = any ? fast_exp2(sx.m_run[sl] - M) * fast_rcp(L) : 0.0f; /* L >= 1 when any */
      if (g.wn == 0 && frag_c_row_owner() && (g.cl || g.row_valid(r))) store_row_ml(r, any, M, L);
    }
  }

  /* Late scale: chunk c of valid row r weighed over the WN warps and normalised. */
  __device__ __forceinline__ void merge_late(int r, int c, float (&v)[8]) const {
    float mu[WN], M = -INFINITY;
#pragma unroll
    for (int u = 0; u < WN; u++) {
      mu[u] = sM[u * BLOCK_M + r];
      M = fmax_nan(M, mu[u]);
    }
    const bool any = M != -INFINITY;
    const float sk = sink ? vec_at(p.sinks, p.sinks_type, g.head0 + (r - g.row_tok(r) * p.gh)) * kLog2e : -INFINITY; /* r is valid */
    M = fmax_nan(M, sk);
    float L = sink && any ? fast_exp2(sk - M) : 0.0f;
#pragma unroll
    for (int u = 0; u < WN; u++) {
      const float wt = mu[u] == -INFINITY ? 0.0f : fast_exp2(mu[u] - M); /* a warp that saw no key: 0 */
      L = fmaf(sL[u * BLOCK_M + r], wt, L);
      const float4 *src = reinterpret_cast<const float4 *>(sO + ((size_t)u * BLOCK_M + r) * S::OROW + c * 8);
      const float4 a = src[0], b = src[1];
      v[0] = fmaf(wt, a.x, v[0]), v[1] = fmaf(wt, a.y, v[1]), v[2] = fmaf(wt, a.z, v[2]), v[3] = fmaf(wt, a.w, v[3]);
      v[4] = fmaf(wt, b.x, v[4]), v[5] = fmaf(wt, b.y, v[5]), v[6] = fmaf(wt, b.z, v[6]), v[7] = fmaf(wt, b.w, v[7]);
    }
    const float fr = any ? fast_rcp(L) * kAccScale : 0.0f; /* L >= 1 when any */
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] *= fr;
    if (c == 0) store_row_ml(r, any, M, L); /* r is valid here */
  }

  /* Early scale: chunk c of row r summed over the WN warps (already scaled). */
  __device__ __forceinline__ void sum_early(int r, int c, float (&v)[8]) const {
#pragma unroll
    for (int u = 0; u < WN; u++) {
      const float4 *src = reinterpret_cast<const float4 *>(sO + ((size_t)u * BLOCK_M + r) * S::OROW + c * 8);
      const float4 a = src[0], b = src[1];
      v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w;
      v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
    }
  }

  /* Chunk c of merged row r to the cluster's merge, the segment's partial, or
   * out; the latter two are p.head_dim wide: chunks past it are never stored. */
  __device__ __forceinline__ void emit(int r, int c, const float (&v)[8]) const {
    if (g.cl) {
      float4 *dst = reinterpret_cast<float4 *>(smem + S::CL_OFF) + (r * S::OROW + c * 8) / 4;
      dst[0] = make_float4(v[0], v[1], v[2], v[3]);
      dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      return;
    }
    if (c * 8 >= p.head_dim) return;
    if (g.split) {
      float4 *dst = reinterpret_cast<float4 *>(p.part_o + g.part_row(r) * p.head_dim + c * 8);
      dst[0] = make_float4(v[0], v[1], v[2], v[3]);
      dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      return;
    }
    const float vd = S::DESCALE ? descale_of(p, p.v_descale, g.w.seq, g.kvh) : 1.0f; /* FP8: once, here */
    uint4 o;
    o.x = pack2<T>(v[0] * vd, v[1] * vd);
    o.y = pack2<T>(v[2] * vd, v[3] * vd);
    o.z = pack2<T>(v[4] * vd, v[5] * vd);
    o.w = pack2<T>(v[6] * vd, v[7] * vd);
    *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + g.row_offset(r) * p.head_dim + c * 8) = o;
  }

  __device__ __forceinline__ void run(const OnlineSoftmax<S> &sx, const FragC (&acc)[S::DK]) const {
    publish_stats(sx);
    float f[kFragCSlots];
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) f[sl] = 1.0f;
    if constexpr (!LATE) {
      early_factors(sx, f);
#pragma unroll
      for (int sl = 0; sl < kFragCSlots; sl++) f[sl] *= kAccScale;
    }
    float *sOw = sO + (size_t)g.wn * BLOCK_M * S::OROW;
    if constexpr (S::FRAG8) {
      /* acc in the code column order: four columns of a row slot at once
       * (CodeFrags<false>, spelled dependent on S: the AMD layer only declares it) */
      using CF = CodeFrags<!S::FRAG8>;
      const int c4 = CF::code_col4();
#pragma unroll
      for (int d = 0; d < S::DK; d++)
#pragma unroll
        for (int sl = 0; sl < kFragCSlots; sl++) {
          float4 v = CF::code_row4(acc[d], sl);
          if constexpr (!LATE) v.x *= f[sl], v.y *= f[sl], v.z *= f[sl], v.w *= f[sl];
          *reinterpret_cast<float4 *>(sOw + (g.wm * 16 + frag_c_row(sl)) * S::OROW + d * 16 + c4) = v;
        }
    } else {
#pragma unroll
      for (int d = 0; d < S::DK; d++)
#pragma unroll
        for (int e = 0; e < kFragCElems; e++) {
          const int sl = frag_c_slot(e);
          sOw[(g.wm * 16 + frag_c_row(sl)) * S::OROW + d * 16 + frag_c_col(e)] = LATE ? acc[d].x[e] : acc[d].x[e] * f[sl];
        }
    }
    program_sync<S>();
    constexpr int OL = (BLOCK_M * CH + S::THREADS - 1) / S::THREADS;
#pragma unroll
    for (int k = 0; k < OL; k++) {
      const int i = g.tid + k * S::THREADS, r = i / CH, c = i % CH;
      if (((BLOCK_M * CH) % S::THREADS != 0 && i >= BLOCK_M * CH) || !g.row_valid(r)) continue;
      float v[8];
#pragma unroll
      for (int k = 0; k < 8; k++) v[k] = 0.0f;
      if constexpr (LATE) merge_late(r, c, v);
      else sum_early(r, c, v);
      emit(r, c, v);
    }
    if constexpr (S::CLUSTER) {
      if (g.cl) cluster_merge<T, S>(p, g, smem);
    }
  }
};

/* Merged row r's factor from its max m and sum l (log2 domain; m -inf: no key seen), the sink
 * entering here: out is its accumulators times the factor, 0 for a row with no key. The row's
 * lse is written by its owner thread (owner), where p.lse is set and the row valid. */
template <class S>
__device__ __forceinline__ float row_out_factor(const AttnParams &p, const Program<S> &g, int r, float m, float l,
                                                float vd, bool owner) {
  const bool any = m != -INFINITY;
  const float sk = p.sinks ? vec_at(p.sinks, p.sinks_type, g.row_head(r)) * kLog2e : -INFINITY;
  const float M = fmax_nan(m, sk);
  const float L = (any ? l * fast_exp2(m - M) : 0.0f) + (p.sinks ? fast_exp2(sk - M) : 0.0f);
  const float f = any ? fast_exp2(m - M) * fast_rcp(L) * vd : 0.0f; /* L >= 1 when any */
  if (p.lse && owner && g.row_valid(r)) p.lse[g.row_offset(r)] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  return f;
}

/* Tiles that own their rows (wgmma, one warp a row band: WN = 1, 16-bit
 * accumulators) skip the merge in unsplit launches: a row's max and sum are
 * its warp's own. Each lane normalises its accumulators (sinks, the fp8 v
 * descale) and writes them as T into its warpgroup's rows of the Q tile, in
 * the 128-byte swizzled panels Q came in (only that warpgroup's products read
 * those rows, and they are done); the row owners write the lse; after one
 * barrier every thread stores 16 bytes at a time. Half the shared-memory
 * bytes of Epilogue's fp32 rows, one barrier instead of three
 * (docs/design/prefill.md#rows-out). */
template <class S>
constexpr bool kOwnRows = PassCaps<S>::WG && S::WN == 1 && !S::FRAG8;

template <typename T, class S>
__device__ __forceinline__ bool own_rows_epilogue(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                                  const OnlineSoftmax<S> &sx, const FragC (&acc)[S::DK]) {
  static_assert(kOwnRows<S>, "one warp per row band, 16-bit accumulators, the swizzled Q tile");
  const float vd = S::DESCALE ? descale_of(p, p.v_descale, g.w.seq, g.kvh) : 1.0f; /* out only, not the lse */
  float f[kFragCSlots];
#pragma unroll
  for (int sl = 0; sl < kFragCSlots; sl++) {
    const int r = g.wm * 16 + frag_c_row(sl);
    f[sl] = row_out_factor(p, g, r, sx.m_run[sl], row_allreduce_sum(sx.l_run[sl]), vd, frag_c_row_owner());
  }
  unsigned char *so = reinterpret_cast<unsigned char *>(sm.q);
#pragma unroll
  for (int d = 0; d < S::DK; d++)
#pragma unroll
    for (int e = 0; e < kFragCElems; e += 2) {
      const int sl = frag_c_slot(e), r = g.wm * 16 + frag_c_row(sl), col = d * 16 + frag_c_col(e);
      *reinterpret_cast<uint32_t *>(so + kv_smem_offset<S::BM>(r, col >> 3) + (col & 7) * 2) =
          pack2<T>(acc[d].x[e] * f[sl], acc[d].x[e + 1] * f[sl]);
    }
  /* The rows out, 16 bytes a thread at a time: the consumers' rows after
   * their barrier, or (kWgRows) each consumer warpgroup its own 64 behind
   * its own barrier (kBarWg0 + its index), so the first can go on to the
   * next item while the second still runs its last products (ws_consume).
   * There, where p.o_tma and the warpgroup's rows are all the block's
   * tokens, its first thread writes them as one TMA box per panel (o_map)
   * and the call returns true: that thread waits for the boxes' reads
   * before the tile is handed back (ws_consume). */
  static_assert(!kWgRows<S> || (S::BM == 128 && S::WM == 8), "two consumer warpgroups of 64 rows");
  constexpr int CH = S::CHUNKS, TH = kWgRows<S> ? 128 : S::THREADS, RW = kWgRows<S> ? S::BM / 2 : S::BM;
  constexpr int OL = (RW * CH + TH - 1) / TH;
  const int grp = g.tid >> 7;
  if constexpr (kWgRows<S>) {
    const bool boxes = p.o_tma && (grp + 1) * (p.bq >> 1) <= g.w.n_tok;
    if (boxes) fence_proxy_async_smem(); /* this thread's rows, before the boxes read them */
    named_sync(kBarWg0 + grp, 128);
    if (boxes) {
      if ((g.tid & 127) == 0) {
#pragma unroll
        for (int pn = 0; pn < S::PANELS; pn++)
          tma_store_3d(&p.o_map, so + (size_t)pn * (S::BM * 128) + grp * (RW * 128), pn * 64, g.head0,
                       g.w.tok0 + grp * (p.bq >> 1));
        bulk_commit();
      }
      return true;
    }
  } else {
    program_sync<S>();
  }
#pragma unroll
  for (int k = 0; k < OL; k++) {
    const int i = (kWgRows<S> ? (g.tid & 127) : g.tid) + k * TH;
    const int r = (kWgRows<S> ? grp * RW : 0) + i / CH, c = i % CH;
    if (((RW * CH) % TH != 0 && i >= RW * CH) || !g.row_valid(r) || c * 8 >= p.head_dim) continue;
    *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + g.row_offset(r) * p.head_dim + c * 8) =
        *reinterpret_cast<const uint4 *>(so + kv_smem_offset<S::BM>(r, c));
  }
  return false;
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_EPILOGUE_CUH */
