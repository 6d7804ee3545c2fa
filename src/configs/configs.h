/* configs.h: the one table of GPU tile configurations. The kernels are
 * instantiated from it, plan chooses from it, and the CLI prints it through
 * anyattn_config_get(). Plain C preprocessor so host C and device code share it.
 *
 * X(name, block_m, block_n, warps, stages)
 *   block_m: query rows per program (BLOCK_Q tokens x the GQA group)
 *   block_n: keys per KV tile, independent of the KV page size
 *   warps:   warps (wavefronts) per program
 *   stages:  K/V shared-memory pipeline depth
 * The CUDA backend fills this table (see src/gpu/). */
#ifndef ANYATTN_CONFIGS_H
#define ANYATTN_CONFIGS_H

#define ANYATTN_GPU_CONFIGS(X) \
  X(m64n64w4s2, 64, 64, 4, 2)

#endif
