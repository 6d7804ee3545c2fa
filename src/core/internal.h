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

/* ---- element sizes --------------------------------------------------- */
/* Bytes per element of a dtype and of a K/V cache kind (0 for unknown): the
 * public anyattn_dtype_size and anyattn_kv_dtype_size return these; the
 * backends and the chooser, below the public entry points, call these. */
static inline size_t aa_dtype_size(anyattn_dtype dtype) {
  switch (dtype) {
    case ANYATTN_DTYPE_F32: return 4;
    case ANYATTN_DTYPE_F16: return 2;
    case ANYATTN_DTYPE_BF16: return 2;
  }
  return 0;
}

static inline size_t aa_kv_dtype_size(anyattn_kv_dtype kv_dtype, anyattn_dtype dtype) {
  switch (kv_dtype) {
    case ANYATTN_KV_AS_Q: return aa_dtype_size(dtype);
    case ANYATTN_KV_FP8_E4M3: return 1;
    case ANYATTN_KV_FP8_E4M3FNUZ: return 1;
  }
  return 0;
}

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
typedef struct aa_backend_ops aa_backend_ops; /* backend.h */

struct anyattn_context_s {
  anyattn_backend backend;
  const aa_backend_ops *ops;
  int device;
  char device_name[128];
  int num_sms;            /* multiprocessors (GPU) or threads (CPU) */
  size_t smem_per_block;  /* opt-in shared memory per block, bytes (GPU) */
  int arch;               /* e.g. 90 for sm_90 (CUDA); gfx number (HIP) */
  char family[32];        /* architecture family for tree lookup: "sm_90", "gfx942" */
};

/* What core checked and resolved, for every backend; the backend keeps its
 * own choices behind `state` (its plan function allocates it, its plan_free
 * releases it). */
struct anyattn_plan_s {
  anyattn_context *ctx;     /* must outlive the plan */
  const aa_backend_ops *ops;
  anyattn_problem problem;  /* copy; problem.config is not kept (NULL) */
  anyattn_limits limits;
  int group;                /* num_q_heads / num_kv_heads */
  float scale;              /* resolved softmax scale */
  void *state;              /* the backend's plan state */
  size_t workspace_size;
  char describe[256];
};

/* Everything run() needs, with defaults resolved (cache strides filled in). */
typedef struct {
  int num_seqs;
  int num_tokens;
  const int32_t *cu_seqlens_q;
  const int32_t *seq_lens_k;
  const int32_t *q_pos; /* [num_seqs] first query's position, or NULL: kv_len - q_len */
  int prior_writes;     /* anyattn_prior_writes, checked */
  const int32_t *block_table;
  int block_table_stride;
  const void *q;
  const void *k_cache;
  const void *v_cache;
  int64_t num_blocks;
  int64_t k_stride_block, k_stride_token, k_stride_head;
  int64_t v_stride_block, v_stride_token, v_stride_head;
  const void *alibi_slopes; /* of alibi_slopes_dtype (checked: F32, BF16 or F16) */
  const void *sinks;        /* of sinks_dtype; the CPU backend's run widens both to fp32 first */
  anyattn_dtype alibi_slopes_dtype, sinks_dtype;
  void *out;
  float *lse;
  void *workspace;
  size_t workspace_size;
  void *stream;
  int max_q_len;   /* host hints from the batch; 0 = unknown */
  int max_kv_len;
  int64_t sum_kv_len;
  const float *k_descale; /* NULL: 1.0 (fp8 caches only; core refuses them otherwise) */
  const float *v_descale;
  anyattn_descale_layout descale_layout;
} anyattn_args;

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_INTERNAL_H */
