/* configs.h: the one table of GPU tile configurations, every vendor's rows in
 * one place. The kernels are instantiated from it, plan chooses from it, and
 * the CLI prints it through anyattn_config_get(). Plain C preprocessor so host
 * C, CUDA and HIP code share it.
 *
 * Columns of a row: R(X, purpose, name, block_m, block_n, warps, stages)
 *   purpose: ship  compiled into the vendor's library build
 *            tune  compiled only into the tuning build (-DANYATTN_GPU_CONFIGS_TUNING,
 *                  bench/run_h200.sh's 'sweep' and 'tunex' steps): candidates a
 *                  sweep times; a winner becomes a ship row
 *   name:    block_m, block_n, warps and stages spelled out; trees name rows by it
 *   block_m: query rows per program (BLOCK_Q tokens x the GQA group), 16 per row-warp
 *   block_n: keys per KV tile, independent of the KV page size
 *   warps:   warps (wavefronts) per program; warps beyond block_m/16 split each tile's keys
 *   stages:  K/V shared-memory pipeline depth
 *
 * What a build sees is ANYATTN_GPU_CONFIGS(X), X(name, block_m, block_n, warps,
 * stages) once per row, in table order:
 *   default (CUDA)                   the NVIDIA ship rows
 *   -DANYATTN_GPU_CONFIGS_TUNING     every NVIDIA row (ship and tune)
 *   -DANYATTN_GPU_CONFIGS_AMD        the AMD rows (the HIP build, cmake/hip.cmake)
 * Order matters only for the CLI listing; the heuristic in src/gpu names the
 * configs it picks. Every row is compiled for f16 and bf16, 16-bit and fp8
 * caches, x the compiled head dims (AA_GPU_HEAD_DIMS, src/gpu/kernel/kernels.cuh:
 * 64, 80, 96, 128, 192, 256, 512) where it fits the vendor's shared memory
 * (from AA_CONFIG_MIN_HEAD_DIM on, below) and runs there (the wgmma tiles run
 * 80 and 96 at 128: kernels.cuh, row_head_dim), so each new ship row costs up
 * to 28 kernels per architecture of CI build time. At d512 one NVIDIA row fits
 * (m16n32w2s2, 147 KB) and one AMD row (m16n16w1s1, 49 KB). */
#ifndef ANYATTN_CONFIGS_H
#define ANYATTN_CONFIGS_H

/* ---- NVIDIA (sm_80, sm_90) ---------------------------------------------------
 * Ship rows: the tiles the H200 tree (trees/tree_h200.h) and the fallback
 * heuristic pick; tune rows: the further candidates the tuning sweeps time
 * (bench/run_h200.sh tunex), which no committed tree picks. */
#define AA_CONFIG_ROWS_NVIDIA(R, X)      \
  R(X, ship, m16n32w2s2, 16, 32, 2, 2)   \
  R(X, ship, m16n64w4s2, 16, 64, 4, 2)   \
  R(X, ship, m16n64w4s3, 16, 64, 4, 3)   \
  R(X, ship, m16n128w8s2, 16, 128, 8, 2) \
  R(X, ship, m16n256w8s2, 16, 256, 8, 2) \
  R(X, tune, m16n256w8s3, 16, 256, 8, 3) \
  R(X, tune, m16n128w4s2, 16, 128, 4, 2) \
  R(X, tune, m16n128w8s3, 16, 128, 8, 3) \
  R(X, tune, m16n64w4s4, 16, 64, 4, 4)   \
  R(X, tune, m32n64w4s2, 32, 64, 4, 2)   \
  R(X, tune, m32n128w8s2, 32, 128, 8, 2) \
  R(X, ship, m64n64w4s2, 64, 64, 4, 2)   \
  R(X, tune, m64n128w8s2, 64, 128, 8, 2) \
  R(X, ship, m128n64w8s2, 128, 64, 8, 2) \
  R(X, ship, m128n96w8s2, 128, 96, 8, 2) \
  R(X, ship, m128n128w8s2, 128, 128, 8, 2)

/* ---- AMD CDNA (gfx90a, gfx942) ------------------------------------------------
 * Why rows of their own: a CDNA workgroup has 64 KB of LDS (H100: 227 KB), so
 * none of the NVIDIA rows fits at head dim 128; and copies are synchronous on
 * AMD (no cp.async), so a second stage costs LDS and hides nothing: latency is
 * hidden by more workgroups per CU instead, hence stages = 1. Untuned (no AMD
 * GPU was available): rows sized by LDS only, see docs/portability.md.
 * Plan takes the first row that fits the head dim unless the heuristic names
 * one: m64n64w4s1 at d <= 128, m16n64w4s1 at d192, m32n32w2s1 at d256,
 * m16n16w1s1 at d512. LDS at d64/96/128/192/256/512:
 *   m64n64w4s1   30 / 42 / 54 / - / - / -          prefill and mixed batches
 *   m16n64w4s1   23 / 32 / 41 / 59 / - / -         decode
 *   m32n32w2s1   17 / 23 / 29 / 39 / 51 / -        head dim 256
 *   m16n32w2s1   13 / 17 / 22 / 32 / 43 / -        decode at head dim 256
 *   m16n16w1s1    7 / 10 / 13 / 19 / 25 / 49 KB    head dim 512 (one wavefront)
 * All AMD rows are ship rows: there is no AMD tuning build, so a tune row here
 * would be compiled into no build. (tests/hip_disasm.sh reads these rows to
 * count the kernels it expects.) */
#define AA_CONFIG_ROWS_AMD(R, X)              \
  R(X, ship, m64n64w4s1, 64, 64, 4, 1)        \
  R(X, ship, m16n64w4s1, 16, 64, 4, 1)        \
  R(X, ship, m32n32w2s1, 32, 32, 2, 1)        \
  R(X, ship, m16n32w2s1, 16, 32, 2, 1)        \
  R(X, ship, m16n16w1s1, 16, 16, 1, 1)

/* The smallest head dim at which the library build compiles a row (0: at
 * every head dim where it fits); the tuning build compiles every other row
 * wherever it fits. m128n64w8s2 serves prefill at head dims 192 and 256,
 * where m128n128w8s2 does not fit the shared memory (on one H200, d256
 * prefill 1x8192 463 TFLOP/s against 265 for m64n64w4s2); at d128 it is the
 * slower tile (351 against 474 TFLOP/s for m128n128w8s2), and compiling it
 * there would cost build time for kernels no plan picks. m128n96w8s2 serves
 * prefill at d192 (wgmma takes its 96-key tiles there only, TileShape::WG;
 * at d256 it does not fit): 1x8192 527 against 455 TFLOP/s for m128n64w8s2
 * (docs/design/prefill.md#head-dims-192-and-256). */
#if defined(ANYATTN_GPU_CONFIGS_TUNING)
#define AA_CONFIG_MIN_HEAD_DIM(block_m, block_n, warps, stages) ((block_n) == 96 ? 192 : 0)
#else
#define AA_CONFIG_MIN_HEAD_DIM(block_m, block_n, warps, stages) \
  ((block_m) == 128 && ((block_n) == 64 || (block_n) == 96) ? 192 : 0)
#endif
/* Rows compiled for 16-bit caches only (and the staged fp8 kernels, which
 * read 16-bit copies), in every build: m128n96w8s2 runs its products on
 * wgmma at d192 (the one head dim where it does; d256 does not fit), which
 * over fp8 caches it would not (mma.sync, as m128n64w8s2 does there). */
#define AA_CONFIG_16BIT_ONLY(block_m, block_n, warps, stages) ((block_n) == 96)

/* Rows the library build compiles for fp8 caches only (the tuning build
 * compiles them for every cache kind): m16n256w8s2, the decode tile of 32
 * keys per warp per tile, whose two 16-key steps give each warp two
 * independent chains of products and softmax where the latency-bound fp8
 * decode loop of m16n128w8s2 has one (docs/design/layout.md#fp8-caches).
 * Over 16-bit caches it does not fit at d128 and was not measured at the
 * head dims where it would. A tree leaf naming it runs there as its half-keys
 * row (src/gpu/policy.c), and the fitter times such leaves so (tools/sweep_csv.c,
 * which reads the library build's rule whatever the build). */
#define AA_CONFIG_FP8_ONLY_LIBRARY(block_m, block_n, warps, stages) ((block_m) == 16 && (block_n) == 256)
#if defined(ANYATTN_GPU_CONFIGS_TUNING)
#define AA_CONFIG_FP8_ONLY(block_m, block_n, warps, stages) 0
#else
#define AA_CONFIG_FP8_ONLY(block_m, block_n, warps, stages) AA_CONFIG_FP8_ONLY_LIBRARY(block_m, block_n, warps, stages)
#endif

/* ---- row filters: purpose -> X(name, block_m, block_n, warps, stages) or nothing */
#define AA_CONFIG_SHIP_ship(X, ...) X(__VA_ARGS__)
#define AA_CONFIG_SHIP_tune(X, ...)
#define AA_CONFIG_IF_SHIP(X, purpose, ...) AA_CONFIG_SHIP_##purpose(X, __VA_ARGS__)
#define AA_CONFIG_ANY(X, purpose, ...) X(__VA_ARGS__)

/* Per vendor and purpose, whatever this build is (tests and tools read all). */
#define ANYATTN_GPU_CONFIGS_NVIDIA(X) AA_CONFIG_ROWS_NVIDIA(AA_CONFIG_IF_SHIP, X)
#define ANYATTN_GPU_CONFIGS_NVIDIA_TUNING(X) AA_CONFIG_ROWS_NVIDIA(AA_CONFIG_ANY, X)
#define ANYATTN_GPU_CONFIGS_CDNA(X) AA_CONFIG_ROWS_AMD(AA_CONFIG_IF_SHIP, X)

/* ---- role pairs: mixed batches in one launch ------------------------------------
 * X(prefill name, block_m, block_n, warps, stages, decode name, block_m,
 * block_n, warps, stages): a launch whose grid holds the decode rows of a
 * batch (sequences of at most one Q block of the decode row's tokens) on the
 * decode row's tile, with its own split-KV segments, and every longer
 * sequence on the prefill row's tile (docs/design/prefill.md#mixed-batches).
 * The two rows of a pair have equal warps: one block size serves the grid.
 * Run takes a pair when the tree (or the heuristic) picks its prefill row for
 * a mixed batch (several sequences, mean q_len 9 to 127: policy.c,
 * aa_gpu_roles_serve), or for every batch when problem->config names it as
 * "PREFILL+DECODE". Each pair costs one kernel per (dtype, compiled head dim,
 * cache kind) where both rows fit. The AMD table has none: untested there. */
#define ANYATTN_GPU_ROLE_PAIRS_NVIDIA(X) X(m128n128w8s2, 128, 128, 8, 2, m16n128w8s2, 16, 128, 8, 2)
#define ANYATTN_GPU_ROLE_PAIRS_CDNA(X)

/* This build's table. */
#if defined(ANYATTN_GPU_CONFIGS_TUNING)
#define ANYATTN_GPU_CONFIGS(X) ANYATTN_GPU_CONFIGS_NVIDIA_TUNING(X)
#define ANYATTN_GPU_ROLE_PAIRS(X) ANYATTN_GPU_ROLE_PAIRS_NVIDIA(X)
#elif defined(ANYATTN_GPU_CONFIGS_AMD) /* the HIP build (cmake/hip.cmake): 64 KB LDS */
#define ANYATTN_GPU_CONFIGS(X) ANYATTN_GPU_CONFIGS_CDNA(X)
#define ANYATTN_GPU_ROLE_PAIRS(X) ANYATTN_GPU_ROLE_PAIRS_CDNA(X)
#else
#define ANYATTN_GPU_CONFIGS(X) ANYATTN_GPU_CONFIGS_NVIDIA(X)
#define ANYATTN_GPU_ROLE_PAIRS(X) ANYATTN_GPU_ROLE_PAIRS_NVIDIA(X)
#endif

#endif
