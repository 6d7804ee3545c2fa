/* configs_amd.h: the tile table of the HIP (AMD CDNA) build, selected by
 * -DANYATTN_GPU_CONFIGS_AMD in src/choose/configs.h. Same columns as there.
 * Why a table of its own: a CDNA workgroup has 64 KB of LDS (H100: 227 KB), so
 * none of the CUDA rows fits at head dim 128; and copies are synchronous on
 * AMD (no cp.async), so a second stage costs LDS and hides nothing: latency is
 * hidden by more workgroups per CU instead, hence stages = 1. Untuned (no AMD
 * GPU was available): rows sized by LDS only, see docs/portability.md.
 * Plan takes the first row that fits the head dim unless the heuristic names
 * one: m64n64w4s1 at d <= 128, m32n32w2s1 at d256. LDS at d64/96/128/256:
 *   m64n64w4s1   30 / 42 / 54 KB / -        prefill and mixed batches
 *   m16n64w4s1   23 / 32 / 41 KB / -        decode
 *   m32n32w2s1   17 / 23 / 29 / 51 KB       head dim 256
 *   m16n32w2s1   13 / 17 / 22 / 43 KB       decode at head dim 256 */
#define ANYATTN_GPU_CONFIGS(X)  \
  X(m64n64w4s1, 64, 64, 4, 1)   \
  X(m16n64w4s1, 16, 64, 4, 1)   \
  X(m32n32w2s1, 32, 32, 2, 1)   \
  X(m16n32w2s1, 16, 32, 2, 1)
