/* products.cuh: the two products of a KV tile for the rows a warp (or a
 * warpgroup) owns: S = Q K^T and O += P V. On every vendor from 16x16 mma.sync
 * (MFMA) tiles loaded from padded shared-memory rows; on sm_90a, for shapes
 * with TileShape::WG, as warpgroup MMA (wgmma) over 128-byte-swizzled tiles
 * (shape.cuh, kv_smem_offset) that read Q, K and V from shared memory once per
 * warpgroup, not once per warp (P stays in registers). */
#ifndef ANYATTN_GPU_KERNEL_PRODUCTS_CUH
#define ANYATTN_GPU_KERNEL_PRODUCTS_CUH

#include "shape.cuh"

namespace aa {

/* ---- warpgroup MMA (sm_90a) --------------------------------------------------------- */
/* S = Q K^T of one tile for the warpgroup's 64 rows (warp w: rows 16w..,
 * the FragC layout): DK k16 steps along the head dim, Q (the program's
 * BLOCK_M rows, this warpgroup's 64 from q_rows) and K from swizzled tiles at
 * shared addresses q_tile and k_tile. Waits for the result. */
template <typename T, class S>
__device__ __forceinline__ void wg_issue_scores(FragC *s, uint32_t q_tile, int q_rows, uint32_t k_tile) {
  constexpr int QPANEL = S::WM * 16 * 128; /* BLOCK_M rows of 128 bytes */
  const uint64_t qd = wg_desc(q_tile + q_rows * 128, 16, 1024), kd = wg_desc(k_tile, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < S::DK; kk++) /* 64 head-dim elements per panel, 32 bytes per k16 step */
    wg_mma_ss<T, S::BN>(&s[0].x[0], wg_desc_add(qd, (kk >> 2) * QPANEL + (kk & 3) * 32),
                        wg_desc_add(kd, (kk >> 2) * (S::BN * 128) + (kk & 3) * 32), kk > 0);
}
template <typename T, class S>
__device__ __forceinline__ void wg_scores(FragC *s, uint32_t q_tile, int q_rows, uint32_t k_tile) {
  wg_fence();
  wg_issue_scores<T, S>(s, q_tile, q_rows, k_tile);
  wg_commit();
  wg_wait_all();
#pragma unroll
  for (int n = 0; n < S::NK; n++) wg_keep(s[n]); /* nothing reads the scores before the wait */
}
/* O += P V for the warpgroup's rows: NK k16 steps along the keys (16 rows =
 * two 1024-byte swizzle groups each), V from the swizzled tile at v_tile read
 * N-major (head-dim panels BN * 128 bytes apart). The head dim in products
 * of at most 128 columns (two panels): d192 as 128 + 64, d256 as 128 + 128,
 * each on its own accumulators (acc[8 j], 16 columns per FragC). */
template <typename T, class S>
__device__ __forceinline__ void wg_issue_pv(FragC *acc, FragA *pa, uint32_t v_tile) {
  constexpr int N0 = S::HD < 128 ? S::HD : 128, N1 = S::HD - N0;
  static_assert(N1 == 0 || N1 == 64 || N1 == 128, "head dim 64, 80, 96, 128, 192 or 256");
  const uint64_t vd = wg_desc(v_tile, S::BN * 128, 1024);
#pragma unroll
  for (int n = 0; n < S::NK; n++) {
    wg_mma<T, N0, 1>(&acc[0].x[0], pa[n], wg_desc_add(vd, n * 2048), 1);
    if constexpr (N1 > 0)
      wg_mma<T, N1, 1>(&acc[N0 / 16].x[0], pa[n], wg_desc_add(vd, 2 * (S::BN * 128) + n * 2048), 1);
  }
}
template <typename T, class S>
__device__ __forceinline__ void wg_pv(FragC *acc, FragA *pa, uint32_t v_tile) {
  /* The rescaled accumulators and P are written before the fence; P's
   * registers, read by the MMA until the wait, stay allocated until then. */
  auto keep = [&] {
#pragma unroll
    for (int d = 0; d < S::DK; d++) wg_keep(acc[d]);
#pragma unroll
    for (int n = 0; n < S::NK; n++) wg_keep(pa[n]);
  };
  keep();
  wg_fence();
  wg_issue_pv<T, S>(acc, pa, v_tile);
  wg_commit();
  wg_wait_all();
  keep();
}

/* ---- per tile, either way ------------------------------------------------------------ */
/* S = Q K^T for this warp's 16 rows x KW keys of the tile at tk (its key
 * slice), Q from qf (registers, QREG) or from sQw (the warp's rows of the
 * padded Q tile); with WG, the warpgroup's product from the swizzled tiles
 * (sq: the whole Q tile, q_rows: the warpgroup's first row). */
template <typename T, class S, bool WG, bool QREG>
__device__ __forceinline__ void tile_scores(FragC (&s)[S::NK], const FragA *qf, const T *sQw, uint32_t sq, int q_rows,
                                            const T *tk) {
  if constexpr (WG) {
    wg_scores<T, S>(s, sq, q_rows, smem_u32(tk));
  } else {
#pragma unroll
    for (int n = 0; n < S::NK; n++) zero(s[n]);
#pragma unroll
    for (int kk = 0; kk < S::DK; kk++) {
      FragA a;
      if constexpr (QREG) a = qf[kk];
      else load_a(a, [&](int r, int c) { return sQw + r * S::ROW + kk * 16 + c; });
#pragma unroll
      for (int n = 0; n < S::NK; n++) {
        FragB b;
        load_b_nk(b, [&](int r, int c) { return tk + (n * 16 + r) * S::ROW + kk * 16 + c; });
        mma<T>(s[n], a, b);
      }
    }
  }
}

/* O += P V for this warp's rows: P (softmax weights, the A fragments pa) over
 * the tile's KW keys at tv; with WG, the warpgroup's product. */
template <typename T, class S, bool WG>
__device__ __forceinline__ void tile_pv(FragC (&acc)[S::DK], FragA (&pa)[S::NK], const T *tv) {
  if constexpr (WG) {
    wg_pv<T, S>(acc, pa, smem_u32(tv));
  } else {
#pragma unroll
    for (int n = 0; n < S::NK; n++) {
#pragma unroll
      for (int d = 0; d < S::DK; d++) {
        FragB b;
        load_b_kn(b, [&](int r, int c) { return tv + (n * 16 + r) * S::ROW + d * 16 + c; });
        mma<T>(acc[d], pa[n], b);
      }
    }
  }
}

/* ---- fp8 caches: the products in f16 ------------------------------------------------ */
/* FP8 caches whose products run in f16 (the FRAG8 tiles; the PP tile): the
 * landed Q tile in shared memory -> f16, in place, scaled by 2^-e so that its
 * largest magnitude lies in [2^14, 2^15): exact for every bf16 element down
 * to 2^-28 of that largest (f16's normal range), the smaller ones as f16
 * subnormals, far below the fp32 rounding of the sums they join; NaN and
 * infinities as they are (e = 0). Returns 2^e, the factor the scores take
 * back. Every warp finds the maximum over the whole tile itself (identical in
 * all), so one barrier orders the reads before the writes. An f16 problem's
 * Q is left as it is. DENSE: the swizzled wgmma tile, BLOCK_M x HEAD_DIM
 * elements back to back (the conversion is elementwise, so the layout does
 * not matter), converted for wgmma to read (the async proxy); else the padded
 * rows. */
template <typename T>
struct QToF16 {
  template <class S, bool DENSE>
  __device__ __forceinline__ static float run(T *q, int tid) {
    constexpr int CH = S::CHUNKS, N = S::BM * CH;
    auto chunk = [&](int i) { return q + (DENSE ? i * 8 : (i / CH) * S::ROW + (i % CH) * 8); };
    float mx = 0.0f;
    for (int i = tid % AA_WARP_SIZE; i < N; i += AA_WARP_SIZE) {
      const uint4 u = *reinterpret_cast<const uint4 *>(chunk(i));
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int k = 0; k < 4; k++)
        mx = fmaxf(mx, fmaxf(fabsf(__uint_as_float(w[k] << 16)), fabsf(__uint_as_float(w[k] & 0xffff0000u))));
    }
    mx = warp_allreduce_max(mx);
    const int eb = (int)((__float_as_uint(mx) >> 23) & 0xffu);
    const int e = (mx == 0.0f || eb == 255) ? 0 : min(max(eb - 127 - 14, -100), 100);
    const float f = __uint_as_float((uint32_t)(127 - e) << 23);
    block_sync(); /* every warp has read Q */
    for (int i = tid; i < N; i += S::THREADS) {
      uint4 *c = reinterpret_cast<uint4 *>(chunk(i));
      const uint4 u = *c;
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
      uint32_t h[4];
#pragma unroll
      for (int k = 0; k < 4; k++) h[k] = pack2<aa_f16>(__uint_as_float(w[k] << 16) * f, __uint_as_float(w[k] & 0xffff0000u) * f);
      *c = make_uint4(h[0], h[1], h[2], h[3]);
    }
    if constexpr (DENSE) fence_proxy_async_smem();
    block_sync();
    return __uint_as_float((uint32_t)(127 + e) << 23);
  }
};
template <>
struct QToF16<aa_f16> {
  template <class S, bool DENSE>
  __device__ __forceinline__ static float run(aa_f16 *, int) {
    return 1.0f;
  }
};

/* P goes to the f16 products of FP8 caches times 2^15 (at most 32768, below f16's
 * 65504), so weights down to 2^-29 of the row's maximum stay normal f16
 * numbers, as precise as in bf16 or better (softmax.cuh, PSHIFT). */
constexpr int kCodePShift = 15;

/* ---- fp8 codes straight into fragments (S::FRAG8) ----------------------------------
 * The staged code tiles are read into B fragments and converted in registers
 * by the tile layer (CodeFrags: the head-dim order of Q K^T and of the P V
 * accumulators there). Both products run in f16: Q converted once per program
 * (QToF16, above), P packed as f16, every E4M3 value exact in f16. The head dim in
 * blocks of 4 k16 steps, the last of DK % 4 (1 or 2: head dims 80 and 96). */
template <class S>
struct CodeBlocks {
  static constexpr int FULL = S::DK / 4, TAIL = S::DK % 4;
  static_assert(TAIL != 3, "head dims in blocks of 64 columns and a last of 16 or 32");
};

/* Q (f16, the warp's rows of the padded tile at sQw) as DK A fragments in the code order. */
template <class S, bool FNUZ>
__device__ __forceinline__ void load_q_codes(FragA *qf, const aa_f16 *sQw) {
  using B = CodeBlocks<S>;
#pragma unroll
  for (int kb = 0; kb < B::FULL; kb++)
    CodeFrags<FNUZ>::template load_a<4>(*reinterpret_cast<FragA(*)[4]>(qf + 4 * kb),
                                        [&](int r, int c) { return sQw + r * S::ROW + kb * 64 + c; });
  if constexpr (B::TAIL > 0)
    CodeFrags<FNUZ>::template load_a<B::TAIL>(*reinterpret_cast<FragA(*)[B::TAIL]>(qf + 4 * B::FULL),
                                              [&](int r, int c) { return sQw + r * S::ROW + B::FULL * 64 + c; });
}

/* S += Q K^T over R k16 steps of the head dim from column 64 kb; K's codes
 * in the staged tile at tk, the warp's keys from row r0. */
template <class S, bool FNUZ, bool QREG, int R>
__device__ __forceinline__ void scores_codes_block(FragC (&s)[S::NK], const FragA *qf, const aa_f16 *sQw,
                                                   const unsigned char *tk, int r0, int kb) {
  FragA qa[R];
  if constexpr (QREG) {
#pragma unroll
    for (int st = 0; st < R; st++) qa[st] = qf[4 * kb + st];
  } else {
    CodeFrags<FNUZ>::template load_a<R>(qa, [&](int r, int c) { return sQw + r * S::ROW + kb * 64 + c; });
  }
#pragma unroll
  for (int n = 0; n < S::NK; n++) {
    FragB b[R];
    CodeFrags<FNUZ>::template load_b_nk<R>(
        b, [&](int r, int c) { return tk + code_offset<S::SW8>(r0 + n * 16 + r, kb * 64 + c, S::K8_ROW); });
#pragma unroll
    for (int st = 0; st < R; st++) mma<aa_f16>(s[n], qa[st], b[st]);
  }
}

/* S = Q K^T for this warp's 16 rows x KW keys (rows r0.. of the staged code
 * tile at tk), Q from qf (QREG) or the f16 tile at sQw. */
template <class S, bool FNUZ, bool QREG>
__device__ __forceinline__ void tile_scores_codes(FragC (&s)[S::NK], const FragA *qf, const aa_f16 *sQw,
                                                  const unsigned char *tk, int r0) {
  using B = CodeBlocks<S>;
#pragma unroll
  for (int n = 0; n < S::NK; n++) zero(s[n]);
#pragma unroll
  for (int kb = 0; kb < B::FULL; kb++) scores_codes_block<S, FNUZ, QREG, 4>(s, qf, sQw, tk, r0, kb);
  if constexpr (B::TAIL > 0) scores_codes_block<S, FNUZ, QREG, B::TAIL>(s, qf, sQw, tk, r0, B::FULL);
}

/* O += P V for this warp's rows, P in f16 (pa), V's codes in rows r0.. of
 * the staged tile at tv; acc in CodeFrags' column order (CodeFrags::code_row4). */
template <class S, bool FNUZ>
__device__ __forceinline__ void tile_pv_codes(FragC (&acc)[S::DK], FragA (&pa)[S::NK], const unsigned char *tv,
                                              int r0) {
#pragma unroll
  for (int n = 0; n < S::NK; n++) {
#pragma unroll
    for (int d = 0; d + 1 < S::DK; d += 2) {
      FragB b[2];
      CodeFrags<FNUZ>::template load_b_kn<2>(
          b, [&](int r, int c) { return tv + code_offset<S::SW8>(r0 + n * 16 + r, d * 16 + c, S::V8_ROW); });
      mma<aa_f16>(acc[d], pa[n], b[0]);
      mma<aa_f16>(acc[d + 1], pa[n], b[1]);
    }
    if constexpr (S::DK % 2 == 1) {
      FragB b[1];
      CodeFrags<FNUZ>::template load_b_kn<1>(
          b, [&](int r, int c) { return tv + code_offset<S::SW8>(r0 + n * 16 + r, (S::DK - 1) * 16 + c, S::V8_ROW); });
      mma<aa_f16>(acc[S::DK - 1], pa[n], b[0]);
    }
  }
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_PRODUCTS_CUH */
