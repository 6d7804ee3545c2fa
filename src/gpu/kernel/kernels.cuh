/* kernels.cuh: instantiates the tensor-core kernel for every row of the config
 * table (src/choose/configs.h) for one dtype and compiled head dim. Each
 * inst_*.cu file instantiates one (dtype, head dim) pair so make compiles them
 * in parallel. */
#ifndef ANYATTN_GPU_KERNELS_CUH
#define ANYATTN_GPU_KERNELS_CUH

#include "attention.cuh"
#include "configs.h"

/* The head dims the tensor-core kernels are compiled for, ascending; any head
 * dim that is a multiple of 8 from 32 to 512 runs on the smallest that holds
 * it, its columns past the true head dim zero (AttnParams::head_dim), except
 * where a row runs wider (row_head_dim below). 80 and 192 have their own:
 * padded to 96 and 256 they would spend 20% and 33% more tensor-core work per
 * useful FLOP in prefill (decode reads only the true columns either way). One
 * inst_<dtype>_d<HD>.cu per entry and dtype. */
#define AA_GPU_HEAD_DIMS(X) X(64) X(80) X(96) X(128) X(192) X(256) X(512)

namespace aa {
/* Largest opt-in shared memory of any supported GPU (H100/H200: 227 KB). A
 * config that needs more at this head dim is not compiled; plan never picks it. */
constexpr size_t kMaxSmemAnyDevice = AA_MAX_SMEM_PER_BLOCK; /* vendor.h: 227 KB NVIDIA, 64 KB AMD */
/* Whether a row fits at compiled head dim HD: its shared memory, from the
 * row's smallest head dim on (configs.h, AA_CONFIG_MIN_HEAD_DIM), for the
 * cache kinds the build compiles it for (AA_CONFIG_FP8_ONLY, AA_CONFIG_16BIT_ONLY). */
template <int HD, int BM, int BN, int W, int S, int F8>
constexpr bool row_fits() {
  return TileShape<HD, BM, BN, W, S, F8>::SMEM_BYTES <= kMaxSmemAnyDevice &&
         HD >= AA_CONFIG_MIN_HEAD_DIM(BM, BN, W, S) && (F8 == 1 || !AA_CONFIG_FP8_ONLY(BM, BN, W, S)) &&
         (F8 != 1 || !AA_CONFIG_16BIT_ONLY(BM, BN, W, S));
}
/* The compiled head dim at which a row runs the problems of compiled head dim
 * HD: HD itself, or, for a tile that runs its products on warpgroup MMA
 * (TileShape::WG) at a wider compiled head dim that it fits but not at HD,
 * the smallest such up to 128. On NVIDIA that moves m64n64w4s2 and m128n128w8s2 at 80
 * and 96 over fp8 caches to 128 (their wgmma tiles at 80 and 96 take 16-bit
 * caches only, TileShape::WG): on one H200 causal prefill at d80 and d96 ran
 * 1.22-1.38x faster padded to 128 on wgmma than on its own mma.sync tile
 * (docs/design/layout.md#head-dims). Over 16-bit caches these rows run on
 * wgmma at 80 and 96 themselves. The decode tiles (16 rows) never run on
 * wgmma and keep their own head dims. */
template <int HD, int BM, int BN, int W, int S, int F8>
constexpr int row_head_dim() {
  if (TileShape<HD, BM, BN, W, S, F8>::WG) return HD;
  int r = HD;
#define AA_WIDER_(hd2)                                                                                                \
  if (r == HD && hd2 > HD && hd2 <= 128 && TileShape<hd2, BM, BN, W, S, F8>::WG && row_fits<hd2, BM, BN, W, S, F8>()) \
    r = hd2;
  AA_GPU_HEAD_DIMS(AA_WIDER_)
#undef AA_WIDER_
  return r;
}
/* Whether the build compiles a row at head dim HD: where it fits and runs
 * there (not wider). */
template <int HD, int BM, int BN, int W, int S, int F8>
constexpr bool row_built() {
  return row_fits<HD, BM, BN, W, S, F8>() && row_head_dim<HD, BM, BN, W, S, F8>() == HD;
}
template <typename T, int HD, int BM, int BN, int W, int S, int F8>
constexpr KernelFn kernel_or_null() {
  if constexpr (row_built<HD, BM, BN, W, S, F8>())
    return &attn_tc_kernel<T, HD, BM, BN, W, S, F8>;
  else return nullptr;
}
/* The kernel over 16-bit caches with fp8 descales (FP8 2) of a 128-row row
 * where it is built; nullptr for every other row (nothing instantiated). */
template <typename T, int HD, int BM, int BN, int W, int S>
constexpr KernelFn staged_or_null() {
  if constexpr (BM == 128) return kernel_or_null<T, HD, BM, BN, W, S, 2>();
  else return nullptr;
}
/* The kernel with a producer warpgroup (attn_ws_kernel) of a row whose
 * kernel over 16-bit caches (F8 0, or 2: with fp8 descales, staged_or_null)
 * is built as the pipelined tile (TileShape::PP); nullptr for every other
 * row. */
template <typename T, int HD, int BM, int BN, int W, int S, int F8, bool PERSIST = false>
constexpr KernelFn ws_or_null() {
  if constexpr (TileShape<HD, BM, BN, W, S, F8>::PP && row_built<HD, BM, BN, W, S, F8>() &&
                (!PERSIST || kWsPersist<TileShape<HD, BM, BN, W, S, F8>>))
    return &attn_ws_kernel<T, HD, BM, BN, W, S, F8, PERSIST>;
  else return nullptr;
}
/* The same for the rows of staged_or_null, with fp8 descales (FP8 2). */
template <typename T, int HD, int BM, int BN, int W, int S, bool PERSIST = false>
constexpr KernelFn staged_ws_or_null() {
  static_assert(TileShape<HD, BM, BN, W, S, 2>::PERSIST_SMEM_BYTES == TileShape<HD, BM, BN, W, S, 0>::PERSIST_SMEM_BYTES,
                "a stage plan launches its persistent kernel with the 16-bit row's shared memory (launch.cu)");
  if constexpr (BM == 128) return ws_or_null<T, HD, BM, BN, W, S, 2, PERSIST>();
  else return nullptr;
}
/* A role pair's kernel where its prefill tile is built and its decode tile
 * fits (configs.h, ANYATTN_GPU_ROLE_PAIRS): a pair runs at its prefill row's
 * head dim (row_head_dim). */
template <typename T, int HD, int PBM, int PBN, int PW, int PS, int DBM, int DBN, int DW, int DS, int F8>
constexpr RolesFn roles_kernel_or_null() {
  if constexpr (row_built<HD, PBM, PBN, PW, PS, F8>() && row_fits<HD, DBM, DBN, DW, DS, F8>())
    return &attn_roles_kernel<T, HD, PBM, PBN, PW, PS, DBM, DBN, DW, DS, F8>;
  else return nullptr;
}
}  // namespace aa

/* ANYATTN_NO_KERNELS (a build that compiles some kernel files only:
 * CMakeLists.txt, ANYATTN_CUDA_KERNELS): this file's tables list no kernel
 * and instantiate none. */
#ifdef ANYATTN_NO_KERNELS
#define AA_KERNEL_PTR_(name, bm, bn, w, s) static_cast<aa::KernelFn>(nullptr),
#define AA_ROLES_PTR_(pn, pbm, pbn, pw, ps, dn, dbm, dbn, dw, ds) static_cast<aa::RolesFn>(nullptr),
#else
#define AA_KERNEL_PTR_(name, bm, bn, w, s) aa::kernel_or_null<T, HD, bm, bn, w, s, F8>(),
#define AA_ROLES_PTR_(pn, pbm, pbn, pw, ps, dn, dbm, dbn, dw, ds) \
  aa::roles_kernel_or_null<T, HD, pbm, pbn, pw, ps, dbm, dbn, dw, ds, F8>(),
#endif

/* Defines aa_kernel_table_<TN>_d<HD_>(out, roles): out[i] = kernel of config
 * i, roles[i] = kernel of role pair i (a nullptr closes the list), for caches
 * of T (F8_ 0) or of fp8 codes (F8_ 1, the tables ..._fp8_d<HD_>). */
#define AA_DEFINE_KERNEL_TABLE_(NAME, TYPE, HD_, F8_)                                       \
  void NAME(aa::KernelFn *out, aa::RolesFn *roles) {                                        \
    using T = TYPE;                                                                         \
    constexpr int HD = HD_, F8 = F8_;                                                       \
    (void)HD, (void)F8; /* unread where ANYATTN_NO_KERNELS */                               \
    static const aa::KernelFn k[] = {ANYATTN_GPU_CONFIGS(AA_KERNEL_PTR_)};                  \
    static const aa::RolesFn r[] = {ANYATTN_GPU_ROLE_PAIRS(AA_ROLES_PTR_) nullptr};         \
    for (unsigned i = 0; i < sizeof k / sizeof k[0]; i++) out[i] = k[i];                    \
    for (unsigned i = 0; i < sizeof r / sizeof r[0]; i++) roles[i] = r[i];                  \
  }
#define AA_DEFINE_KERNEL_TABLE(TN, TYPE, HD_) AA_DEFINE_KERNEL_TABLE_(aa_kernel_table_##TN##_d##HD_, TYPE, HD_, 0)
#define AA_DEFINE_KERNEL_TABLE_FP8(TN, TYPE, HD_) \
  AA_DEFINE_KERNEL_TABLE_(aa_kernel_table_##TN##_fp8_d##HD_, TYPE, HD_, 1)

/* Defines NAME(out): out[i] = PTR's kernel for config i, or nullptr (a list
 * of one kernel variant per config; PTR(name, bm, bn, w, s) sees T and HD). */
#define AA_DEFINE_KERNEL_LIST_(NAME, PTR, TYPE, HD_)                 \
  void NAME(aa::KernelFn *out) {                                     \
    using T = TYPE;                                                  \
    constexpr int HD = HD_;                                          \
    (void)HD;                                                        \
    static const aa::KernelFn k[] = {ANYATTN_GPU_CONFIGS(PTR)};      \
    for (unsigned i = 0; i < sizeof k / sizeof k[0]; i++) out[i] = k[i]; \
  }

/* Defines aa_kernel_table_<TN>_staged_d<HD_>(out): out[i] = the kernel of
 * config i over 16-bit caches with fp8 descales (shape.cuh, FP8 2) for the
 * 128-row rows, which run fp8 batches staged to 16-bit
 * (docs/design/layout.md#staged-prefill); nullptr for every other row. */
#ifdef ANYATTN_NO_KERNELS
#define AA_STAGED_PTR_ AA_KERNEL_PTR_
#else
#define AA_STAGED_PTR_(name, bm, bn, w, s) aa::staged_or_null<T, HD, bm, bn, w, s>(),
#endif
#define AA_DEFINE_KERNEL_TABLE_STAGED(TN, TYPE, HD_) \
  AA_DEFINE_KERNEL_LIST_(aa_kernel_table_##TN##_staged_d##HD_, AA_STAGED_PTR_, TYPE, HD_)

/* Defines aa_kernel_table_<TN>_ws_d<HD_>(out): out[i] = the kernel of config
 * i with a producer warpgroup over 16-bit caches (ws_or_null), or nullptr;
 * aa_kernel_table_<TN>_staged_ws_d<HD_>(out), the same over a staged
 * batch's copy with fp8 descales (FP8 2, the rows of staged_or_null); and
 * the two ..._pws_... and ..._staged_pws_... of their persistent kernels
 * (nullptr where the shape has none: kWsPersist). */
#ifdef ANYATTN_NO_KERNELS
#define AA_WS_PTR_ AA_KERNEL_PTR_
#define AA_STAGED_WS_PTR_ AA_KERNEL_PTR_
#define AA_PWS_PTR_ AA_KERNEL_PTR_
#define AA_STAGED_PWS_PTR_ AA_KERNEL_PTR_
#else
#define AA_WS_PTR_(name, bm, bn, w, s) aa::ws_or_null<T, HD, bm, bn, w, s, 0>(),
#define AA_STAGED_WS_PTR_(name, bm, bn, w, s) aa::staged_ws_or_null<T, HD, bm, bn, w, s>(),
#define AA_PWS_PTR_(name, bm, bn, w, s) aa::ws_or_null<T, HD, bm, bn, w, s, 0, true>(),
#define AA_STAGED_PWS_PTR_(name, bm, bn, w, s) aa::staged_ws_or_null<T, HD, bm, bn, w, s, true>(),
#endif
#define AA_DEFINE_KERNEL_TABLE_WS(TN, TYPE, HD_)                                                  \
  AA_DEFINE_KERNEL_LIST_(aa_kernel_table_##TN##_ws_d##HD_, AA_WS_PTR_, TYPE, HD_)                 \
  AA_DEFINE_KERNEL_LIST_(aa_kernel_table_##TN##_staged_ws_d##HD_, AA_STAGED_WS_PTR_, TYPE, HD_)   \
  AA_DEFINE_KERNEL_LIST_(aa_kernel_table_##TN##_pws_d##HD_, AA_PWS_PTR_, TYPE, HD_)               \
  AA_DEFINE_KERNEL_LIST_(aa_kernel_table_##TN##_staged_pws_d##HD_, AA_STAGED_PWS_PTR_, TYPE, HD_)

#define AA_DECLARE_KERNEL_TABLE(TN, HD_)                                     \
  void aa_kernel_table_##TN##_d##HD_(aa::KernelFn *out, aa::RolesFn *roles); \
  void aa_kernel_table_##TN##_fp8_d##HD_(aa::KernelFn *out, aa::RolesFn *roles); \
  void aa_kernel_table_##TN##_staged_d##HD_(aa::KernelFn *out);                 \
  void aa_kernel_table_##TN##_ws_d##HD_(aa::KernelFn *out);                     \
  void aa_kernel_table_##TN##_staged_ws_d##HD_(aa::KernelFn *out);            \
  void aa_kernel_table_##TN##_pws_d##HD_(aa::KernelFn *out);                   \
  void aa_kernel_table_##TN##_staged_pws_d##HD_(aa::KernelFn *out);

#endif
