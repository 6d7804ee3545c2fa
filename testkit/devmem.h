/* devmem.h: backend-neutral memory, copies, synchronisation and timing for
 * the tools and tests (not part of libanyattn). On the CPU backend "device"
 * memory is host memory; on CUDA it goes through the CUDA runtime. */
#ifndef ANYATTN_DEVMEM_H
#define ANYATTN_DEVMEM_H

#include <stddef.h>

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All return 0 on success, else -1 after printing the runtime's message to stderr. */
int dm_set_device(anyattn_backend backend, int device);
/* A GPU test's start: a context on device 0 of `backend` made current. 0 with
 * *ctx set; 77 (ctest's skip code) after printing "SKIP all (why)" when the
 * backend is not compiled in or finds no device; 1 after printing "FAIL
 * context (why)" on any other failure. */
int dm_gpu_test_context(anyattn_backend backend, anyattn_context **ctx);
void *dm_alloc(anyattn_backend backend, size_t bytes);          /* 256-byte aligned; NULL on failure */
void dm_free(anyattn_backend backend, void *ptr);               /* accepts NULL */
/* A workspace for runs of `plan` (anyattn_plan_workspace_size bytes, at least
 * 256): allocated, filled with 0xff as stale memory would be, then prepared
 * with anyattn_workspace_prepare on the default stream and synchronised (so
 * runs on any stream may use it). NULL on failure, after printing why. */
void *dm_alloc_workspace(anyattn_backend backend, const anyattn_plan *plan);
int dm_to_device(anyattn_backend backend, void *dst, const void *src, size_t bytes);
int dm_to_host(anyattn_backend backend, void *dst, const void *src, size_t bytes);
/* Within the backend's memory; the ranges must not overlap. */
int dm_copy_within(anyattn_backend backend, void *dst, const void *src, size_t bytes);
int dm_fill_bytes(anyattn_backend backend, void *dst, int byte, size_t bytes); /* memset */
int dm_sync(anyattn_backend backend);

/* Architecture family ("sm_90", "cpu") and driver ("CUDA driver 13.0") of a device. */
int dm_device_info(anyattn_backend backend, int device, char *family, size_t family_size, char *driver,
                   size_t driver_size);

/* Timing: an opaque timer around work queued on the default stream.
 * CPU: wall clock. GPU: events. Returns elapsed milliseconds, < 0 on error. */
typedef struct dm_timer_s dm_timer;
dm_timer *dm_timer_create(anyattn_backend backend);
void dm_timer_free(dm_timer *t);
int dm_timer_start(dm_timer *t);
double dm_timer_stop(dm_timer *t); /* synchronises */

/* Graph capture of work on a stream the helper owns (GPU only; returns -1 on CPU).
 * dm_graph_begin returns the stream to launch into; dm_graph_end instantiates. */
typedef struct dm_graph_s dm_graph;
dm_graph *dm_graph_begin(anyattn_backend backend, void **stream);
int dm_graph_end(dm_graph *g);
int dm_graph_launch(dm_graph *g); /* on the default stream, asynchronous */
void dm_graph_free(dm_graph *g);

#ifdef __cplusplus
}
#endif
#endif
