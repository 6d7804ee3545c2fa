/* backend.cu: the GPU backend's entry points (the table of src/core/backend.h),
 * written once for CUDA and HIP: device discovery, plan (support checks, the
 * config table at the head dim, the policy's plan-time choices, shared-memory
 * and cluster set-up) and run (argument checks, then launch.cu). Compiled as
 * HIP it is the HIP backend (vendor/vendor.h names the table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "host.cuh"
#include "launch.h"
#include "select.h"

namespace {

/* Every runtime call goes through this: DEVICE_ERROR with file:line and the runtime's message. */
#define AA_CUDA_TRY(call)                                                                                    \
  do {                                                                                                       \
    cudaError_t aa_e_ = (call);                                                                              \
    if (aa_e_ != cudaSuccess)                                                                                \
      return aa_error(ANYATTN_STATUS_DEVICE_ERROR, "%s:%d: %s: %s", __FILE__, __LINE__, #call,               \
                      cudaGetErrorString(aa_e_));                                                            \
  } while (0)

aa_gpu_plan_state *state_of(const anyattn_plan *plan) { return static_cast<aa_gpu_plan_state *>(plan->state); }

anyattn_status select_device(int device) {
  int cur = -1;
  AA_CUDA_TRY(cudaGetDevice(&cur));
  if (cur != device) AA_CUDA_TRY(cudaSetDevice(device));
  return ANYATTN_STATUS_OK;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

anyattn_status device_count(int *count) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *count = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: leave no error behind for the caller */
    return aa_error(ANYATTN_STATUS_NO_DEVICE, "no " AA_GPU_NAME " device: %s", cudaGetErrorString(e));
  }
  if (n <= 0) return aa_error(ANYATTN_STATUS_NO_DEVICE, "no " AA_GPU_NAME " device: the runtime reports 0 devices");
  *count = n;
  return ANYATTN_STATUS_OK;
}

anyattn_status context_init(anyattn_context *ctx) {
  int n = 0;
  AA_TRY(device_count(&n));
  AA_CHECK(ctx->device < n, ANYATTN_STATUS_NO_DEVICE, "device %d: there are %d " AA_GPU_NAME " devices", ctx->device, n);
  cudaDeviceProp prop;
  AA_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx->device));
  snprintf(ctx->device_name, sizeof ctx->device_name, "%.127s", prop.name);
  ctx->num_sms = prop.multiProcessorCount;
  ctx->smem_per_block = prop.sharedMemPerBlockOptin;
  ctx->arch = prop.major * 10 + prop.minor;
  AA_DEVICE_FAMILY(prop, ctx->family, sizeof ctx->family);
  AA_CHECK(ctx->arch >= AA_MIN_ARCH, ANYATTN_STATUS_NO_DEVICE,
           "device %d (%s, %s) is older than this " AA_GPU_NAME " backend supports", ctx->device, prop.name,
           ctx->family);
  /* Fail here, not at the first run, when this build has no code for the device. */
  AA_TRY(select_device(ctx->device));
  cudaFuncAttributes fa;
  cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)aa::tc_kernel(ANYATTN_DTYPE_BF16, 128, 0, false));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return aa_error(ANYATTN_STATUS_NO_DEVICE, "device %d (%s, %s): no kernel image in this build: %s",
                    ctx->device, prop.name, ctx->family, cudaGetErrorString(e));
  }
  return ANYATTN_STATUS_OK;
}

int config_count(void) { return aa::config_count(); }

anyattn_status config_get(int index, anyattn_config_info *info) {
  AA_CHECK(index >= 0 && index < aa::config_count(), ANYATTN_STATUS_INVALID_SIZE, "index %d: %d " AA_GPU_NAME " configs",
           index, aa::config_count());
  aa::config_info(index, info);
  return ANYATTN_STATUS_OK;
}

/* Raise the shared-memory limit of every variant run may pick, and ask how
 * many split segments each can merge in a cluster (ANYATTN_CUDA_CLUSTERS=0:
 * none, for comparisons; clusters exist on sm_90+ only). */
anyattn_status prepare_kernels(anyattn_plan *plan, const aa_gpu_device *dev, int forced) {
  aa_gpu_plan_state *st = state_of(plan);
  const anyattn_problem *pr = &plan->problem;
  const char *env = getenv("ANYATTN_CUDA_CLUSTERS");
  const bool clusters = aa::kHasClusters && dev->arch >= 90 && !(env && strcmp(env, "0") == 0);
  for (int i = 0; i < st->num_configs; i++) {
    if (!aa_gpu_config_fits(st, dev, i) || (forced >= 0 && i != forced)) continue;
    /* a stage plan launches only the kernels that apply fp8 descales (launch.cu, staged_run) */
    const void *k = st->stage_descales ? (const void *)aa::staged_kernel(pr->dtype, pr->head_dim, i)
                                       : (const void *)aa::tc_kernel(pr->dtype, pr->head_dim, i, pr->kv_dtype != ANYATTN_KV_AS_Q);
    if (!k) continue;
    AA_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)aa_gpu_launch_smem(plan, dev, i, -1, 1)));
    /* its variant with a producer warpgroup (launch.cu, unsplit launches), same shared
     * memory, and that variant's persistent kernel where the device has its shared memory */
    if (const aa::KernelFn w = aa::ws_kernel(plan, *dev, i, 1, false))
      AA_CUDA_TRY(cudaFuncSetAttribute((const void *)w, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)aa_gpu_launch_smem(plan, dev, i, -1, 1)));
    const size_t ps = st->configs[i].persist_smem;
    const aa::KernelFn pw = ps > 0 && ps <= dev->smem_per_block ? aa::ws_kernel(plan, *dev, i, 1, true) : nullptr;
    if (pw) AA_CUDA_TRY(cudaFuncSetAttribute((const void *)pw, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ps));
    /* the row's role pair, unless a single row is forced */
    if (aa_gpu_roles_fit(st, dev, i) && (forced < 0 || st->forced_dec > 0)) {
      const void *r = (const void *)aa::roles_kernel(pr->dtype, pr->head_dim, i, pr->kv_dtype != ANYATTN_KV_AS_Q);
      if (r) AA_CUDA_TRY(cudaFuncSetAttribute(r, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)st->role_smem[i]));
    }
    if (!clusters || !st->configs[i].cluster) continue;
    int active[AA_GPU_CLUSTER_MERGE + 1];
    for (int c = 0; c <= AA_GPU_CLUSTER_MERGE; c++)
      active[c] = c >= 2 && (c & (c - 1)) == 0
                      ? aa::cluster_active(k, st->configs[i].warps * AA_WARP_SIZE, st->configs[i].smem, c)
                      : -1;
    st->cluster_max[i] = aa_gpu_cluster_limit(st, dev, i, active, &st->cluster_slots[i]);
  }
  return ANYATTN_STATUS_OK;
}

void describe(anyattn_plan *plan, const aa_gpu_device *dev, const char *dt, bool forced) {
  const aa_gpu_plan_state *st = state_of(plan);
  const aa_gpu_config &c = st->configs[st->config];
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, c.block_m);
  char split_txt[96] = "";
  const int scfg = aa_gpu_split_config(plan, dev);
  if (st->num_splits > 1 && scfg >= 0 && st->cluster_max[scfg] >= 2)
    snprintf(split_txt, sizeof split_txt, "; split-KV up to %d segments (up to %d merged in a cluster)", st->num_splits,
             st->cluster_max[scfg]);
  else if (st->num_splits > 1)
    snprintf(split_txt, sizeof split_txt, "; split-KV up to %d segments", st->num_splits);
  char pad_txt[32] = "";
  if (c.head_dim != plan->problem.head_dim) snprintf(pad_txt, sizeof pad_txt, " (padded to d%d)", c.head_dim);
  char name[64];
  if (st->forced_dec > 0)
    snprintf(name, sizeof name, "%s+%s", c.name, st->configs[st->forced_dec - 1].name);
  else if (!forced && aa_gpu_roles_serve(st, dev, st->config, plan->limits.max_seqs, plan->limits.max_tokens) &&
           !aa_gpu_mixed_on_producer(plan, dev, st->config))
    snprintf(name, sizeof name, "%s+%s", c.name, st->configs[st->role_dec[st->config] - 1].name); /* mixed limits */
  else
    snprintf(name, sizeof name, "%s", c.name);
  snprintf(plan->describe, sizeof plan->describe, "%s %s %s d%d%s group %d: %d tokens x %d heads per program, %s%s%s",
           anyattn_backend_name(plan->ctx->backend), name, dt, plan->problem.head_dim, pad_txt, plan->group, m.bq, m.gh,
           forced ? "forced" : "chosen from the limits", forced ? "" : " (run re-chooses from each batch)", split_txt);
}

anyattn_status plan(anyattn_plan *plan);
void plan_free(anyattn_plan *plan);

/* fp8 caches with limits.stage_kv_tokens (docs/design/layout.md#staged-prefill):
 * the plan of the same problem over 16-bit caches that runs staged batches
 * (its prefill tiles take the descales), and the stage area of the workspace. */
anyattn_status plan_stage(anyattn_plan *pl) {
  aa_gpu_plan_state *st = state_of(pl);
  anyattn_plan *sp = static_cast<anyattn_plan *>(calloc(1, sizeof(anyattn_plan)));
  AA_CHECK(sp != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan: " AA_GPU_NAME " stage plan allocation failed");
  sp->ctx = pl->ctx;
  sp->ops = pl->ops;
  sp->problem = pl->problem; /* problem.config as plan got it */
  sp->problem.kv_dtype = ANYATTN_KV_AS_Q;
  sp->limits = pl->limits;
  sp->limits.stage_kv_tokens = 0;
  sp->group = pl->group;
  sp->scale = pl->scale;
  st->stage_plan = sp; /* plan_free releases it whatever happens below */
  AA_TRY(plan(sp));
  aa_gpu_plan_state *ss = state_of(sp);
  ss->stage_descales = 1;
  /* its runs get the scheduler words of this plan's workspace as theirs (launch.cu, staged_run) */
  ss->has_sched = st->has_sched;
  ss->sched_offset = 0;
  const aa_gpu_device dev = aa::device_of(pl->ctx);
  AA_TRY(prepare_kernels(sp, &dev, ss->config_forced ? ss->config : -1)); /* now the kernels with descales */
  return aa_gpu_plan_stage(pl);
}

/* st->config_forced records whether problem->config forced the config (1)
 * or run may re-choose it from the batch's sizes (0). */
anyattn_status plan(anyattn_plan *plan) {
  const anyattn_problem *pr = &plan->problem;
  const anyattn_context *ctx = plan->ctx;
  AA_CHECK(pr->dtype == ANYATTN_DTYPE_F16 || pr->dtype == ANYATTN_DTYPE_BF16 || pr->dtype == ANYATTN_DTYPE_F32,
           ANYATTN_STATUS_UNSUPPORTED_DTYPE, "problem->dtype %d is not supported by the " AA_GPU_NAME " backend",
           (int)pr->dtype);
  const bool fp8 = pr->kv_dtype != ANYATTN_KV_AS_Q;
  AA_CHECK(!fp8 || ((pr->kv_dtype == ANYATTN_KV_FP8_E4M3 || pr->kv_dtype == ANYATTN_KV_FP8_E4M3FNUZ) &&
                    (pr->dtype == ANYATTN_DTYPE_F16 || pr->dtype == ANYATTN_DTYPE_BF16)),
           ANYATTN_STATUS_UNSUPPORTED_DTYPE,
           "problem->kv_dtype %d with dtype %d: the " AA_GPU_NAME " backend takes fp8 (E4M3, E4M3FNUZ) caches "
           "with f16 or bf16 q and out",
           (int)pr->kv_dtype, (int)pr->dtype);
  aa_gpu_plan_state *st = static_cast<aa_gpu_plan_state *>(calloc(1, sizeof(aa_gpu_plan_state)));
  AA_CHECK(st != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan: " AA_GPU_NAME " state allocation failed");
  plan->state = st;
  AA_CHECK(aa::config_table(pr->head_dim, fp8, st), ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim is %d; the " AA_GPU_NAME " backend supports the multiples of 8 from 32 to 512 "
           "(compiled at 64, 80, 96, 128, 192, 256 and 512, the others padded to the next of those)",
           pr->head_dim);
  aa_gpu_policy_init(st);
  const aa_gpu_device dev = aa::device_of(ctx);
  /* Any block_size >= 1 works: K/V rows are gathered one by one (page = j / block_size). */
  AA_TRY(select_device(ctx->device));

  int forced = -1;
  if (pr->config) {
    forced = aa_gpu_config_parse_any(st, pr->config, &st->forced_splits, &st->forced_dec);
    AA_CHECK(forced >= 0, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s' is not a " AA_GPU_NAME " config or role pair (see anyattn_config_get; "
             "PREFILL+DECODE names a pair of src/choose/configs.h; an optional suffix -kS, 1 <= S <= %d, "
             "forces S KV segments)",
             pr->config, AA_GPU_MAX_SPLITS);
    AA_CHECK(aa_gpu_config_fits(st, &dev, forced), ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s' needs %zu bytes of shared memory at head_dim %d; the device allows %zu", pr->config,
             st->configs[forced].smem, pr->head_dim, ctx->smem_per_block);
    AA_CHECK(st->forced_dec == 0 || aa_gpu_roles_fit(st, &dev, forced), ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s': the pair is not compiled at head_dim %d or needs %zu bytes of shared memory; "
             "the device allows %zu",
             pr->config, pr->head_dim, st->role_smem[forced], ctx->smem_per_block);
    AA_CHECK(st->forced_dec == 0 || pr->dtype != ANYATTN_DTYPE_F32, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s': fp32 runs on the CUDA-core kernel, which has no role pairs", pr->config);
  }
  plan->workspace_size = 0;
  st->num_splits = 1;
  st->config = forced;
  st->config_forced = forced >= 0;
  if (pr->dtype == ANYATTN_DTYPE_F32) { /* the CUDA-core kernel: a forced tile config has no meaning there */
    snprintf(plan->describe, sizeof plan->describe, "%s f32 d%d group %d: CUDA-core kernel, one warp per (token, head)",
             anyattn_backend_name(ctx->backend), pr->head_dim, plan->group);
    return ANYATTN_STATUS_OK;
  }
  AA_TRY(prepare_kernels(plan, &dev, forced));
  st->tree = aa_tree_for(ctx->device_name, ctx->family);
  const int cfg =
      forced >= 0 ? forced : aa_gpu_choose_config(plan, &dev, plan->limits.max_seqs, plan->limits.max_tokens, 0, 0, 0, NULL);
  AA_CHECK(cfg >= 0, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim %d: no " AA_GPU_NAME " config fits the device's %zu bytes of shared memory", pr->head_dim,
           ctx->smem_per_block);
  /* The largest grid run can launch under these limits must fit one grid dimension. */
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, st->configs[cfg].block_m);
  const long long programs =
      ((long long)plan->limits.max_tokens / m.bq + plan->limits.max_seqs) * pr->num_kv_heads * m.n_hchunks;
  AA_CHECK(programs <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_tokens %d: %lld programs, over the grid limit", plan->limits.max_tokens, programs);
  st->config = cfg;
  AA_TRY(aa_gpu_plan_splits(plan, &dev));
  aa_gpu_plan_sched(plan, &dev);
  if (fp8 && plan->limits.stage_kv_tokens > 0) AA_TRY(plan_stage(plan));
  const char *dt = pr->dtype == ANYATTN_DTYPE_F16 ? (!fp8 ? "f16" : pr->kv_dtype == ANYATTN_KV_FP8_E4M3 ? "f16/e4m3" : "f16/e4m3fnuz")
                                                  : (!fp8 ? "bf16" : pr->kv_dtype == ANYATTN_KV_FP8_E4M3 ? "bf16/e4m3" : "bf16/e4m3fnuz");
  describe(plan, &dev, dt, forced >= 0);
  if (st->stage_pages > 0) {
    const size_t n = strlen(plan->describe);
    snprintf(plan->describe + n, sizeof plan->describe - n, "; prefill batches of up to %lld pages staged to %s",
             st->stage_pages, pr->dtype == ANYATTN_DTYPE_F16 ? "f16" : "bf16");
  }
  return ANYATTN_STATUS_OK;
}

void plan_free(anyattn_plan *plan) {
  aa_gpu_plan_state *st = state_of(plan);
  if (st && st->stage_plan) {
    plan_free(st->stage_plan);
    free(st->stage_plan);
  }
  free(plan->state);
  plan->state = nullptr;
}

anyattn_status run(const anyattn_plan *plan, const anyattn_args *a) {
  const anyattn_problem *pr = &plan->problem;
  if (a->num_tokens == 0) return ANYATTN_STATUS_OK;
  const size_t es = aa_dtype_size(pr->dtype);
  const bool fp8 = pr->kv_dtype != ANYATTN_KV_AS_Q;
  AA_CHECK(aligned16(a->k_cache) && aligned16(a->v_cache), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->k_cache and v_cache must be 16-byte aligned for the " AA_GPU_NAME " backend");
  AA_CHECK(!fp8 || a->descale_layout == ANYATTN_DESCALE_PER_TENSOR || a->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD,
           ANYATTN_STATUS_INVALID_OPTION, "tensors->descale_layout is %d: 0 (per tensor) or 1 (per sequence and kv head)",
           (int)a->descale_layout);
  AA_CHECK(aligned16(a->q) && aligned16(a->out), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->q and out must be 16-byte aligned for the " AA_GPU_NAME " backend");
  const int64_t ks[3] = {a->k_stride_block, a->k_stride_token, a->k_stride_head};
  const int64_t vs[3] = {a->v_stride_block, a->v_stride_token, a->v_stride_head};
  /* elements per 16 bytes (es is 2 or 4); fp8 caches: rows 8-byte aligned (8-byte copies) */
  const int64_t per16 = fp8 ? 8 : 16 / (int64_t)es;
  for (int i = 0; i < 3; i++) {
    AA_CHECK(ks[i] % per16 == 0, ANYATTN_STATUS_BAD_STRIDE,
             "tensors->k_stride_%s is %lld elements: cache rows must be %s-byte aligned for the " AA_GPU_NAME " backend",
             i == 0 ? "block" : i == 1 ? "token" : "head", (long long)ks[i], fp8 ? "8" : "16");
    AA_CHECK(vs[i] % per16 == 0, ANYATTN_STATUS_BAD_STRIDE,
             "tensors->v_stride_%s is %lld elements: cache rows must be %s-byte aligned for the " AA_GPU_NAME " backend",
             i == 0 ? "block" : i == 1 ? "token" : "head", (long long)vs[i], fp8 ? "8" : "16");
  }
  AA_TRY(select_device(plan->ctx->device));
  AA_TRY(aa::launch_attention(plan, a));
  AA_CUDA_TRY(cudaGetLastError());
  return ANYATTN_STATUS_OK;
}

/* The split-KV arrival counters at the workspace's head and the persistent
 * launches' scheduler words start at zero (kernel/merge.cuh,
 * kernel/mainloop_ws.cuh; every run leaves them so). */
anyattn_status workspace_prepare(const anyattn_plan *plan, void *workspace, void *stream) {
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  if (st->num_splits < 2 && !st->has_sched) return ANYATTN_STATUS_OK; /* f32 too */
  AA_TRY(select_device(plan->ctx->device));
  if (st->num_splits >= 2)
    AA_CUDA_TRY(cudaMemsetAsync(workspace, 0, aa_gpu_split_counter_bytes(plan), (cudaStream_t)stream));
  if (st->has_sched)
    AA_CUDA_TRY(cudaMemsetAsync(static_cast<char *>(workspace) + st->sched_offset, 0, 256, (cudaStream_t)stream));
  return ANYATTN_STATUS_OK;
}

/* The line anyattn_run_describe gives: what launch_attention would launch
 * for these counts and hints (aa_gpu_choose, as it runs). */
anyattn_status describe_run(const anyattn_plan *plan, const anyattn_args *a, char *buf, size_t size) {
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  if (plan->problem.dtype == ANYATTN_DTYPE_F32) {
    snprintf(buf, size, "%s", plan->describe);
    return ANYATTN_STATUS_OK;
  }
  if (a->num_tokens == 0) {
    snprintf(buf, size, "nothing (num_tokens 0)");
    return ANYATTN_STATUS_OK;
  }
  anyattn_args sa;
  aa_gpu_choice sc;
  if (aa::staged_run(plan, a, &sa, &sc)) {
    const aa_gpu_plan_state *ss = state_of(st->stage_plan);
    snprintf(buf, size, "fp8 pages staged to 16-bit, then %s, unsplit", ss->configs[sc.config].name);
    return ANYATTN_STATUS_OK;
  }
  const aa_gpu_device dev = aa::device_of(plan->ctx);
  const aa_gpu_choice ch = aa_gpu_choose(plan, &dev, a);
  const char *name = st->configs[ch.config].name;
  if (ch.dec_config >= 0) {
    char segs[64] = "";
    if (ch.dec_splits > 1) snprintf(segs, sizeof segs, ", decode rows in %d segments", ch.dec_splits);
    snprintf(buf, size, "%s+%s (one launch, a tile per role)%s", name, st->configs[ch.dec_config].name, segs);
  } else if (ch.splits > 1) {
    snprintf(buf, size, "%s, %d segments merged %s", name, ch.splits,
             ch.cluster ? "in a cluster" : "by the last to arrive");
  } else {
    /* run_describe has no workspace: a run has the scheduler words where the plan does */
    snprintf(buf, size, "%s, unsplit%s%s%s", name, aa::ws_kernel(plan, dev, ch.config, 1) ? ", producer warpgroup" : "",
             aa::persistent_blocks(plan, dev, ch.config, a, st->has_sched) ? " in persistent blocks" : "",
             ch.qb_order ? ", Q blocks by halves (a mixed batch)" : "");
  }
  return ANYATTN_STATUS_OK;
}

}  // namespace

extern "C" const aa_backend_ops *AA_GPU_BACKEND_OPS(void) {
  static const aa_backend_ops ops = {AA_GPU_BACKEND_ID, device_count,      context_init, plan,       plan_free,
                                     run,               workspace_prepare, config_count, config_get, describe_run};
  return &ops;
}
