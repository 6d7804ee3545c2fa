// wgmma_probe.cu: the attention body's two warpgroup products on one tile,
// against a host reference, apart from everything else the kernel does:
// S = Q K^T (wg_scores, Q and K from 128-byte-swizzled tiles) and O = P V
// (wg_pv, V from the same layout read N-major), one warpgroup, 64 rows,
// bf16, for the kernel's (head dim, keys) shapes (128, 128), (128, 64) and
// (64, 64), the K/V tiles written with st.shared or cp.async at the second
// stage's offset. A failure in `anyattn check` for the wgmma tiles can be
// narrowed with it. sm_90a only:
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Isrc/gpu/kernel -Isrc/gpu/vendor \
//        dev/wgmma_probe.cu -o /tmp/wgmma_probe && /tmp/wgmma_probe
#include <cstdio>
#include <cstdlib>
#include <cmath>

#include "attention.cuh"

using namespace aa;
constexpr int M = 64;

#include "ck.h"

template <int D, int N, bool CPASYNC>
__global__ void probe(const aa_bf16 *q, const aa_bf16 *k, const aa_bf16 *v, const aa_bf16 *pm, float *s_out,
                      float *o_out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = TileShape<D, M, N, 4, 2>;
  constexpr int ROW = Shape::ROW, PROW = N + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char *base = smem + ((1024u - (smem_u32(smem) & 1023u)) & 1023u);
  // the second stage of each, as in the kernel: tiles of KV_TILE_BYTES (padded rows)
  unsigned char *sk = base + Shape::KV_TILE_BYTES, *sv = base + 3 * Shape::KV_TILE_BYTES;
  aa_bf16 *sq = reinterpret_cast<aa_bf16 *>(base + 4 * Shape::KV_TILE_BYTES), *sp = sq + M * ROW;
  const int tid = threadIdx.x;
  for (int i = tid; i < N * (D / 8); i += 128) { // 16-byte chunks, swizzled
    const int r = i / (D / 8), c = i % (D / 8);
    if (CPASYNC) {
      async_copy16(sk + kv_smem_offset<N>(r, c), reinterpret_cast<const uint4 *>(k) + i, true);
      async_copy16(sv + kv_smem_offset<N>(r, c), reinterpret_cast<const uint4 *>(v) + i, true);
    } else {
      *reinterpret_cast<uint4 *>(sk + kv_smem_offset<N>(r, c)) = reinterpret_cast<const uint4 *>(k)[i];
      *reinterpret_cast<uint4 *>(sv + kv_smem_offset<N>(r, c)) = reinterpret_cast<const uint4 *>(v)[i];
    }
  }
  async_commit();
  for (int i = tid; i < M * (D / 8); i += 128) // Q swizzled like K: the A operand in shared memory
    *reinterpret_cast<uint4 *>(reinterpret_cast<unsigned char *>(sq) + kv_smem_offset<M>(i / (D / 8), i % (D / 8))) =
        reinterpret_cast<const uint4 *>(q)[i];
  for (int i = tid; i < M * N; i += 128) sp[(i / N) * PROW + i % N] = pm[i];
  async_wait<0>();
  fence_proxy_async_smem();
  __syncthreads();
  const int warp = tid / 32;
  FragA pa[Shape::NK];
  for (int n = 0; n < Shape::NK; n++)
    load_a(pa[n], [&](int r, int c) { return sp + (warp * 16 + r) * PROW + n * 16 + c; });
  FragC s[Shape::NK], o[Shape::DK];
  wg_scores<aa_bf16, Shape>(s, smem_u32(sq), 0, smem_u32(sk));
  for (int d = 0; d < Shape::DK; d++) zero(o[d]);
  wg_pv<aa_bf16, Shape>(o, pa, smem_u32(sv));
  for (int n = 0; n < Shape::NK; n++)
    for (int e = 0; e < kFragCElems; e++) {
      const int r = warp * 16 + frag_c_row(frag_c_slot(e));
      s_out[r * N + n * 16 + frag_c_col(e)] = s[n].x[e];
    }
  for (int d = 0; d < Shape::DK; d++)
    for (int e = 0; e < kFragCElems; e++) {
      const int r = warp * 16 + frag_c_row(frag_c_slot(e));
      o_out[r * D + d * 16 + frag_c_col(e)] = o[d].x[e];
    }
#endif
}

static float bf(aa_bf16 x) { return __bfloat162float(x); }

template <int D, int N, bool CPASYNC>
static int run_probe() {
  const size_t nq = M * D, nk = N * D, np = M * N;
  aa_bf16 *hq = new aa_bf16[nq], *hk = new aa_bf16[nk], *hv = new aa_bf16[nk], *hp = new aa_bf16[np];
  unsigned seed = 12345u;
  auto rnd = [&]() { seed = seed * 1664525u + 1013904223u; return (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f; };
  for (size_t i = 0; i < nq; i++) hq[i] = __float2bfloat16(rnd());
  for (size_t i = 0; i < nk; i++) hk[i] = __float2bfloat16(rnd()), hv[i] = __float2bfloat16(rnd());
  for (size_t i = 0; i < np; i++) hp[i] = __float2bfloat16(rnd() + 0.5f);
  aa_bf16 *dq, *dk, *dv, *dp;
  float *ds, *dout;
  CK(cudaMalloc(&dq, nq * 2));
  CK(cudaMalloc(&dk, nk * 2));
  CK(cudaMalloc(&dv, nk * 2));
  CK(cudaMalloc(&dp, np * 2));
  CK(cudaMalloc(&ds, np * 4));
  CK(cudaMalloc(&dout, nq * 4));
  CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv, nk * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dp, hp, np * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(ds, 0xff, np * 4)); // poisoned: NaN where nothing is written
  CK(cudaMemset(dout, 0xff, nq * 4));
  using Shape = TileShape<D, M, N, 4, 2>;
  const size_t smem = 1024 + 4 * Shape::KV_TILE_BYTES + M * Shape::ROW * 2 + M * (N + 8) * 2;
  CK(cudaFuncSetAttribute(probe<D, N, CPASYNC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  probe<D, N, CPASYNC><<<1, 128, smem>>>(dq, dk, dv, dp, ds, dout);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float *hs = new float[np], *ho = new float[nq];
  CK(cudaMemcpy(hs, ds, np * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ho, dout, nq * 4, cudaMemcpyDeviceToHost));
  double es = 0, eo = 0;
  int bad_s = 0, bad_o = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double ref = 0;
      for (int d = 0; d < D; d++) ref += (double)bf(hq[i * D + d]) * bf(hk[j * D + d]);
      const double e = fabs(hs[i * N + j] - ref);
      if (!(e <= 1e-2)) bad_s++;
      es = fmax(es, std::isnan(e) ? INFINITY : e);
    }
  for (int i = 0; i < M; i++)
    for (int d = 0; d < D; d++) {
      double ref = 0;
      for (int j = 0; j < N; j++) ref += (double)bf(hp[i * N + j]) * bf(hv[j * D + d]);
      const double e = fabs(ho[i * D + d] - ref);
      if (!(e <= 1e-2)) bad_o++;
      eo = fmax(eo, std::isnan(e) ? INFINITY : e);
    }
  printf("wgmma_probe d%d n%d %s (seed 12345): S = Q K^T max err %.3g, %d of %d wrong; O = P V max err %.3g, %d of %d wrong\n",
         D, N, CPASYNC ? "cp.async" : "st.shared", es, bad_s, M * N, eo, bad_o, M * D);
  if (bad_s || bad_o) { // where the first wrong elements sit, for the layout
    for (int i = 0, shown = 0; i < M * N && shown < 4; i++) {
      double ref = 0;
      for (int d = 0; d < D; d++) ref += (double)bf(hq[(i / N) * D + d]) * bf(hk[(i % N) * D + d]);
      if (!(fabs(hs[i] - ref) <= 1e-2)) printf("  S[%d][%d] = %g, want %g\n", i / N, i % N, hs[i], ref), shown++;
    }
  }
  delete[] hq, delete[] hk, delete[] hv, delete[] hp, delete[] hs, delete[] ho;
  CK(cudaFree(dq));
  CK(cudaFree(dk));
  CK(cudaFree(dv));
  CK(cudaFree(dp));
  CK(cudaFree(ds));
  CK(cudaFree(dout));
  return bad_s || bad_o;
}

int main() {
  int bad = 0;
  bad += run_probe<128, 128, false>();
  bad += run_probe<128, 128, true>();
  bad += run_probe<128, 64, true>();
  bad += run_probe<64, 64, false>();
  bad += run_probe<64, 64, true>();
  return bad != 0;
}
