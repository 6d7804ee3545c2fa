/* launch.h: the GPU backend's compiled kernels and one launch of them
 * (launch.cu), used by its entry points (backend.cu). */
#ifndef ANYATTN_GPU_LAUNCH_H
#define ANYATTN_GPU_LAUNCH_H

#include "attention.cuh"
#include "policy.h"

namespace aa {

/* Head dims the backend takes: multiples of 8 from 32 to 512, each run on the
 * smallest compiled head dim (AA_GPU_HEAD_DIMS) that holds it, or by some rows
 * on a wider one (kernels.cuh, row_head_dim). */
inline bool head_dim_supported(int hd) { return hd >= 32 && hd <= 512 && hd % 8 == 0; }
/* Rows of the config table (src/choose/configs.h), in table order. */
int config_count();
/* Row i (name, tile shape) as the API reports it. */
void config_info(int i, anyattn_config_info *info);
/* The table as head dim `head_dim` sees it (shared memory, TMA kind: those of
 * its compiled head dim, with 16-bit or fp8 caches) into st->configs and
 * st->num_configs; false if the head dim is not supported. */
bool config_table(int head_dim, bool fp8, aa_gpu_plan_state *st);
/* The tensor-core kernel of config cfg at head_dim's compiled head dim (nullptr where it is not compiled). */
KernelFn tc_kernel(anyattn_dtype dtype, int head_dim, int cfg, bool fp8);
/* The kernel of config cfg over 16-bit caches that applies fp8 descales (the
 * 128-row rows: staged fp8 batches; nullptr for the others). */
KernelFn staged_kernel(anyattn_dtype dtype, int head_dim, int cfg);
/* The kernel with a producer warpgroup (attn_ws_kernel) that run launches
 * for config cfg of `plan` in a launch of `splits` segments on `dev`, or
 * nullptr where it launches the row's own kernel: the pipelined rows, where
 * the policy says (aa_gpu_producer_launch; ANYATTN_CUDA_WS=0: never);
 * persist: its persistent kernel (nullptr where the shape has none). */
KernelFn ws_kernel(const anyattn_plan *plan, const aa_gpu_device &dev, int cfg, int splits, bool persist = false);
/* The blocks of a persistent launch of that kernel's persistent variant for
 * config cfg over a's batch (0: a block per program), and that kernel in
 * *kernel (when given); words: the run has the workspace's scheduler words
 * (aa_gpu_plan_sched). Unsplit launches. */
long long persistent_blocks(const anyattn_plan *plan, const aa_gpu_device &dev, int cfg, const anyattn_args *a,
                            bool words, KernelFn *kernel = nullptr);
/* The role pair kernel whose prefill row is config cfg (nullptr: none compiled there). */
RolesFn roles_kernel(anyattn_dtype dtype, int head_dim, int cfg, bool fp8);
/* The device facts the policy reads. */
aa_gpu_device device_of(const anyattn_context *ctx);
/* fp8 caches, limits.stage_kv_tokens (docs/design/layout.md#staged-prefill):
 * whether this batch runs staged (policy.h, aa_gpu_stage_fits, and the
 * 16-bit plan's choice one unsplit tile of 128 rows: *sc), with *sa
 * the arguments of that plan's launch over the workspace's copy. */
bool staged_run(const anyattn_plan *plan, const anyattn_args *a, anyattn_args *sa, aa_gpu_choice *sc);
/* The kernel that converts the batch's pages into the copy (stage.cu). */
anyattn_status launch_stage(const anyattn_plan *plan, const anyattn_args *a, const aa_gpu_device &dev);
/* One call: the choice (policy.h), the parameters, the launches. */
anyattn_status launch_attention(const anyattn_plan *plan, const anyattn_args *a);

}  // namespace aa

#endif /* ANYATTN_GPU_LAUNCH_H */
