/* configs.h: the one table of GPU tile configurations. The kernels are
 * instantiated from it, plan chooses from it, and the CLI prints it through
 * anyattn_config_get(). Plain C preprocessor so host C and device code share it.
 *
 * X(name, block_m, block_n, warps, stages)
 *   block_m: query rows per program (BLOCK_Q tokens x the GQA group), 16 per row-warp
 *   block_n: keys per KV tile, independent of the KV page size
 *   warps:   warps (wavefronts) per program; warps beyond block_m/16 split each tile's keys
 *   stages:  K/V shared-memory pipeline depth
 * Order matters only for the CLI listing; the heuristic in src/gpu/cuda_backend.cu
 * names the configs it picks. Every entry is compiled for f16 and bf16 x head
 * dims 64, 96, 128, 256, so each new row costs 8 kernels of CI build time. */
#ifndef ANYATTN_CONFIGS_H
#define ANYATTN_CONFIGS_H

/* Tuning hook: -DANYATTN_GPU_CONFIGS_TUNING builds with the longer candidate
 * table in src/gpu/tuning_configs.h (bench/run_h200.sh's sweep step). */
#if defined(ANYATTN_GPU_CONFIGS_TUNING)
#include "tuning_configs.h"
#elif defined(ANYATTN_GPU_CONFIGS_AMD) /* the HIP build (cmake/hip.cmake): 64 KB LDS */
#include "configs_amd.h"
#else
#define ANYATTN_GPU_CONFIGS(X)     \
  X(m16n32w2s2, 16, 32, 2, 2)      \
  X(m16n64w4s2, 16, 64, 4, 2)      \
  X(m16n64w4s3, 16, 64, 4, 3)      \
  X(m16n128w8s2, 16, 128, 8, 2)    \
  X(m64n64w4s2, 64, 64, 4, 2)      \
  X(m128n128w8s2, 128, 128, 8, 2)
#endif

#endif
