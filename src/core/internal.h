/* internal.h: the private layer between the public API (src/core/api.c) and
 * the backends. Core validates and normalises everything the host can see,
 * then hands each backend one anyattn_args with every default resolved. */
#ifndef ANYATTN_INTERNAL_H
#define ANYATTN_INTERNAL_H

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AA_HIDDEN __attribute__((visibility("hidden")))

/* ---- errors ---------------------------------------------------------- */
/* Records `status` and a printf-style message as the thread's last error and
 * returns `status`, so call sites read `return aa_error(...)`. */
AA_HIDDEN anyattn_status aa_error(anyattn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
AA_HIDDEN void aa_clear_error(void);

#define AA_CHECK(cond, status, ...)                                  \
  do {                                                               \
    if (!(cond)) return aa_error((status), __VA_ARGS__);             \
  } while (0)
#define AA_CHECK_NOT_NULL(ptr, what) \
  AA_CHECK((ptr) != NULL, ANYATTN_STATUS_NULL_POINTER, "%s is NULL", (what))
#define AA_TRY(expr)                                   \
  do {                                                 \
    anyattn_status aa_try_s_ = (expr);                 \
    if (aa_try_s_ != ANYATTN_STATUS_OK) return aa_try_s_; \
  } while (0)

/* ---- objects --------------------------------------------------------- */
struct anyattn_context_s {
  anyattn_backend backend;
  int device;
  char device_name[128];
  int num_sms;            /* multiprocessors (GPU) or threads (CPU) */
  size_t smem_per_block;  /* opt-in shared memory per block, bytes (GPU) */
  int arch;               /* e.g. 90 for sm_90 (CUDA); gfx number (HIP) */
  char family[32];        /* architecture family for tree lookup: "sm_90", "gfx942" */
};

struct anyattn_plan_s {
  anyattn_context *ctx;     /* must outlive the plan */
  anyattn_backend backend;
  anyattn_problem problem;  /* copy; problem.config is not kept (NULL) */
  anyattn_limits limits;
  int group;                /* num_q_heads / num_kv_heads */
  float scale;              /* resolved softmax scale */
  /* Backend choices made in plan. */
  int config;               /* index into the backend's config table, -1 for none */
  int config_forced;        /* 1: problem->config named it; run keeps it */
  const void *tree;         /* GPU: the aa_tree (src/choose/tree.h) serving the device when
                             * the plan was made, or NULL: the backend's fallback heuristic */
  int num_splits;           /* split-KV segments per sequence (1: no split); GPU: the most run may use */
  int split_rows;           /* GPU: token rows of split-KV partials the workspace holds (segments x tokens) */
  int forced_splits;        /* GPU: 0 the backend decides; 1 never split; S >= 2 exactly S segments for
                             * decode-like batches (problem->config "NAME-kS") */
  int cluster_max[16];      /* GPU, per config index: the most split-KV segments that merge inside one
                             * thread-block cluster (0: never; they merge in the reduce kernel) */
  int cluster_slots[16];    /* GPU, per config index: programs the device co-schedules in clusters of
                             * cluster_max[i] blocks (a cluster's blocks share a GPC: can be fewer
                             * than without clusters) */
  int cpu_threads;          /* CPU: threads run() uses */
  int cpu_block_q;          /* CPU: query tokens per work item */
  int cpu_block_n;          /* CPU: keys per KV tile */
  size_t cpu_thread_bytes;  /* CPU: scratch bytes per thread in the workspace */
  size_t workspace_size;
  char describe[192];
};

/* Everything run() needs, with defaults resolved (cache strides filled in). */
typedef struct {
  int num_seqs;
  int num_tokens;
  const int32_t *cu_seqlens_q;
  const int32_t *seq_lens_k;
  const int32_t *block_table;
  int block_table_stride;
  const void *q;
  const void *k_cache;
  const void *v_cache;
  int64_t num_blocks;
  int64_t k_stride_block, k_stride_token, k_stride_head;
  int64_t v_stride_block, v_stride_token, v_stride_head;
  const float *alibi_slopes;
  const float *sinks;
  void *out;
  float *lse;
  void *workspace;
  size_t workspace_size;
  void *stream;
  int max_q_len;   /* host hints from the batch; 0 = unknown */
  int max_kv_len;
} anyattn_args;

/* ---- backend interface ----------------------------------------------- */
/* plan: core has validated and filled problem, limits, group and scale; the
 * backend checks what it supports (dtype, head dim, block size), chooses its
 * config and fills workspace_size and describe. run: arguments are checked. */
AA_HIDDEN anyattn_status aa_cpu_plan(anyattn_plan *plan);
AA_HIDDEN anyattn_status aa_cpu_run(const anyattn_plan *plan, const anyattn_args *args);
AA_HIDDEN void aa_cpu_device_name(char *buf, size_t size);
AA_HIDDEN int aa_cpu_threads(void);

#if defined(ANYATTN_WITH_CUDA)
AA_HIDDEN anyattn_status aa_cuda_device_count(int *count);
AA_HIDDEN anyattn_status aa_cuda_context_init(anyattn_context *ctx);
AA_HIDDEN anyattn_status aa_cuda_plan(anyattn_plan *plan);
AA_HIDDEN anyattn_status aa_cuda_run(const anyattn_plan *plan, const anyattn_args *args);
AA_HIDDEN int aa_cuda_config_count(void);
AA_HIDDEN anyattn_status aa_cuda_config_get(int index, anyattn_config_info *info);
#endif
#if defined(ANYATTN_WITH_HIP)
AA_HIDDEN anyattn_status aa_hip_device_count(int *count);
AA_HIDDEN anyattn_status aa_hip_context_init(anyattn_context *ctx);
AA_HIDDEN anyattn_status aa_hip_plan(anyattn_plan *plan);
AA_HIDDEN anyattn_status aa_hip_run(const anyattn_plan *plan, const anyattn_args *args);
AA_HIDDEN int aa_hip_config_count(void);
AA_HIDDEN anyattn_status aa_hip_config_get(int index, anyattn_config_info *info);
#endif

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_INTERNAL_H */
