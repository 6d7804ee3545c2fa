/* tuning_configs.h: candidate tile configs for sweeps on a GPU, built only with
 * -DANYATTN_GPU_CONFIGS_TUNING (bench/run_h200.sh, steps 'sweep' and
 * 'tunex'); winners move into src/choose/configs.h. Same columns as there.
 * Decode rows (block_m 16) are also swept with fixed KV split counts. */
#define ANYATTN_GPU_CONFIGS(X)    \
  X(m16n32w2s2, 16, 32, 2, 2)     \
  X(m16n64w4s2, 16, 64, 4, 2)     \
  X(m16n64w4s3, 16, 64, 4, 3)     \
  X(m16n128w8s2, 16, 128, 8, 2)   \
  X(m16n128w8s3, 16, 128, 8, 3)   \
  X(m16n64w4s4, 16, 64, 4, 4)     \
  X(m32n64w4s2, 32, 64, 4, 2)     \
  X(m32n128w8s2, 32, 128, 8, 2)   \
  X(m64n64w4s2, 64, 64, 4, 2)     \
  X(m64n128w8s2, 64, 128, 8, 2)   \
  X(m128n64w8s2, 128, 64, 8, 2)   \
  X(m128n128w8s2, 128, 128, 8, 2)
