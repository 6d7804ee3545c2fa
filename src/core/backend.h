/* backend.h: the table of functions each backend fills, in the manner of
 * ggml's ggml-backend-impl.h. Core (api.c) checks and normalises every
 * argument the host can see, then calls through the table; a backend keeps
 * its per-plan choices behind plan->state. backends.c lists the tables this
 * build has, the one place that knows which backends are compiled in. */
#ifndef ANYATTN_BACKEND_H
#define ANYATTN_BACKEND_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

struct aa_backend_ops {
  anyattn_backend id;
  /* Devices the backend sees (NO_DEVICE with a message when none). */
  anyattn_status (*device_count)(int *count);
  /* Fills ctx's device facts (name, multiprocessors or threads, shared
   * memory, architecture, family) for ctx->device. */
  anyattn_status (*context_init)(anyattn_context *ctx);
  /* Core has validated and filled problem, limits, group and scale; the
   * backend checks what it supports (dtype, head dim, block size), makes its
   * choices into a state it allocates (plan->state), and fills
   * workspace_size and describe. On error it leaves plan->state NULL. */
  anyattn_status (*plan)(anyattn_plan *plan);
  void (*plan_free)(anyattn_plan *plan); /* releases plan->state */
  /* Arguments are checked; launches (GPU) or computes (CPU). */
  anyattn_status (*run)(const anyattn_plan *plan, const anyattn_args *args);
  /* anyattn_workspace_prepare once its arguments are checked (NULL: the
   * backend's workspaces need no preparation). */
  anyattn_status (*workspace_prepare)(const anyattn_plan *plan, void *workspace, void *stream);
  /* The tile-config table (0 rows and NULL: the backend has none). */
  int (*config_count)(void);
  anyattn_status (*config_get)(int index, anyattn_config_info *info);
  /* anyattn_run_describe once its arguments are checked: args holds the
   * batch's counts and hints only (no pointers). NULL: the plan's line. */
  anyattn_status (*describe_run)(const anyattn_plan *plan, const anyattn_args *args, char *buf, size_t buf_size);
};

/* The table of `backend` in this build, or NULL when it is not compiled in
 * (AUTO is not a backend: NULL). */
AA_HIDDEN const aa_backend_ops *aa_backend_ops_of(anyattn_backend backend);

/* Each backend's table. Functions, not variables: a GPU backend's file is also
 * compiled for the device, where a table of host functions cannot live. */
AA_HIDDEN const aa_backend_ops *aa_cpu_backend(void);
AA_HIDDEN const aa_backend_ops *aa_cuda_backend(void); /* ANYATTN_WITH_CUDA builds */
AA_HIDDEN const aa_backend_ops *aa_hip_backend(void);  /* ANYATTN_WITH_HIP builds */

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_BACKEND_H */
