/* devmem.c: memory, copies and timing for tools and tests on any backend.
 * The CUDA path calls the CUDA runtime's C API directly. */
#define _POSIX_C_SOURCE 200809L
#include "devmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(ANYATTN_WITH_CUDA)
#include <cuda_runtime_api.h>
#define DM_CUDA(call)                                                                   \
  do {                                                                                  \
    cudaError_t dm_e_ = (call);                                                         \
    if (dm_e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(dm_e_)); \
      return -1;                                                                        \
    }                                                                                   \
  } while (0)
#endif

static int dm_is_gpu(anyattn_backend b) { return b == ANYATTN_BACKEND_CUDA || b == ANYATTN_BACKEND_HIP; }

static int dm_no_backend(anyattn_backend b) {
  fprintf(stderr, "devmem: backend '%s' is not available in this build\n", anyattn_backend_name(b));
  return -1;
}

int dm_set_device(anyattn_backend backend, int device) {
  if (!dm_is_gpu(backend)) return 0;
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaSetDevice(device));
    return 0;
  }
#endif
  (void)device;
  return dm_no_backend(backend);
}

int dm_gpu_test_context(anyattn_backend backend, anyattn_context **ctx) {
  *ctx = NULL;
  if (!anyattn_backend_compiled(backend)) {
    printf("SKIP all (the %s backend is not compiled into this library)\n", anyattn_backend_name(backend));
    return 77;
  }
  const anyattn_status s = anyattn_context_create(backend, 0, ctx);
  if (s == ANYATTN_STATUS_NO_DEVICE || s == ANYATTN_STATUS_BACKEND_UNAVAILABLE) {
    printf("SKIP all (%s)\n", anyattn_last_error());
    return 77;
  }
  if (s != ANYATTN_STATUS_OK || dm_set_device(backend, 0) != 0) {
    printf("FAIL context (%s)\n", anyattn_last_error());
    anyattn_context_free(*ctx);
    *ctx = NULL;
    return 1;
  }
  return 0;
}

void *dm_alloc(anyattn_backend backend, size_t bytes) {
  if (bytes == 0) bytes = 256;
  if (!dm_is_gpu(backend)) {
    size_t rounded = (bytes + 255) / 256 * 256;
    return aligned_alloc(256, rounded);
  }
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      fprintf(stderr, "cudaMalloc(%zu): %s\n", bytes, cudaGetErrorString(e));
      return NULL;
    }
    return p;
  }
#endif
  dm_no_backend(backend);
  return NULL;
}

void *dm_alloc_workspace(anyattn_backend backend, const anyattn_plan *plan) {
  const size_t bytes = anyattn_plan_workspace_size(plan);
  void *ws = dm_alloc(backend, bytes);
  if (!ws) return NULL;
  if ((bytes && dm_fill_bytes(backend, ws, 0xff, bytes)) ||
      anyattn_workspace_prepare(plan, ws, bytes, NULL) != ANYATTN_STATUS_OK || dm_sync(backend)) {
    fprintf(stderr, "workspace of %zu bytes: %s\n", bytes, anyattn_last_error());
    dm_free(backend, ws);
    return NULL;
  }
  return ws;
}

void dm_free(anyattn_backend backend, void *ptr) {
  if (!ptr) return;
  if (!dm_is_gpu(backend)) {
    free(ptr);
    return;
  }
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) cudaFree(ptr);
#endif
}

/* One copy; `dir` is where it goes: 0 to the host, 1 to the device, 2 within
 * the device. The CPU backend's memory is the host's: memcpy. */
static int dm_copy(anyattn_backend backend, void *dst, const void *src, size_t bytes, int dir) {
  if (bytes == 0) return 0;
  if (!dm_is_gpu(backend)) {
    memcpy(dst, src, bytes);
    return 0;
  }
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    static const enum cudaMemcpyKind kind[3] = {cudaMemcpyDeviceToHost, cudaMemcpyHostToDevice,
                                                cudaMemcpyDeviceToDevice};
    DM_CUDA(cudaMemcpy(dst, src, bytes, kind[dir]));
    return 0;
  }
#endif
  (void)dir;
  return dm_no_backend(backend);
}

int dm_to_device(anyattn_backend b, void *dst, const void *src, size_t n) { return dm_copy(b, dst, src, n, 1); }
int dm_to_host(anyattn_backend b, void *dst, const void *src, size_t n) { return dm_copy(b, dst, src, n, 0); }
int dm_copy_within(anyattn_backend b, void *dst, const void *src, size_t n) { return dm_copy(b, dst, src, n, 2); }

int dm_fill_bytes(anyattn_backend backend, void *dst, int byte, size_t bytes) {
  if (!dm_is_gpu(backend)) {
    memset(dst, byte, bytes);
    return 0;
  }
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaMemset(dst, byte, bytes));
    return 0;
  }
#endif
  return dm_no_backend(backend);
}

int dm_sync(anyattn_backend backend) {
  if (!dm_is_gpu(backend)) return 0;
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaDeviceSynchronize());
    DM_CUDA(cudaGetLastError());
    return 0;
  }
#endif
  return dm_no_backend(backend);
}

int dm_device_info(anyattn_backend backend, int device, char *family, size_t family_size, char *driver,
                   size_t driver_size) {
  if (!dm_is_gpu(backend)) {
    snprintf(family, family_size, "cpu");
    snprintf(driver, driver_size, "none");
    return 0;
  }
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    struct cudaDeviceProp prop;
    int v = 0;
    DM_CUDA(cudaGetDeviceProperties(&prop, device));
    DM_CUDA(cudaDriverGetVersion(&v));
    snprintf(family, family_size, "sm_%d", prop.major * 10 + prop.minor);
    snprintf(driver, driver_size, "CUDA driver %d.%d", v / 1000, (v % 1000) / 10);
    return 0;
  }
#endif
  (void)device;
  return dm_no_backend(backend);
}

/* ---- timers ---- */
struct dm_timer_s {
  anyattn_backend backend;
  struct timespec t0;
#if defined(ANYATTN_WITH_CUDA)
  cudaEvent_t e0, e1;
#endif
};

dm_timer *dm_timer_create(anyattn_backend backend) {
  dm_timer *t = (dm_timer *)calloc(1, sizeof *t);
  if (!t) return NULL;
  t->backend = backend;
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    if (cudaEventCreate(&t->e0) != cudaSuccess || cudaEventCreate(&t->e1) != cudaSuccess) {
      free(t);
      return NULL;
    }
  }
#endif
  return t;
}

void dm_timer_free(dm_timer *t) {
  if (!t) return;
#if defined(ANYATTN_WITH_CUDA)
  if (t->backend == ANYATTN_BACKEND_CUDA) {
    cudaEventDestroy(t->e0);
    cudaEventDestroy(t->e1);
  }
#endif
  free(t);
}

int dm_timer_start(dm_timer *t) {
#if defined(ANYATTN_WITH_CUDA)
  if (t->backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaEventRecord(t->e0, 0));
    return 0;
  }
#endif
  clock_gettime(CLOCK_MONOTONIC, &t->t0);
  return 0;
}

double dm_timer_stop(dm_timer *t) {
#if defined(ANYATTN_WITH_CUDA)
  if (t->backend == ANYATTN_BACKEND_CUDA) {
    float ms = 0;
    if (cudaEventRecord(t->e1, 0) != cudaSuccess || cudaEventSynchronize(t->e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, t->e0, t->e1) != cudaSuccess || cudaGetLastError() != cudaSuccess)
      return -1.0;
    return ms;
  }
#endif
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t->t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t->t0.tv_nsec) * 1e-6;
}

/* ---- graphs ---- */
struct dm_graph_s {
  anyattn_backend backend;
#if defined(ANYATTN_WITH_CUDA)
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
#endif
};

dm_graph *dm_graph_begin(anyattn_backend backend, void **stream) {
#if defined(ANYATTN_WITH_CUDA)
  if (backend == ANYATTN_BACKEND_CUDA) {
    dm_graph *g = (dm_graph *)calloc(1, sizeof *g);
    if (!g) return NULL;
    g->backend = backend;
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      fprintf(stderr, "dm_graph_begin: capture failed\n");
      free(g);
      return NULL;
    }
    *stream = g->stream;
    return g;
  }
#endif
  (void)stream;
  dm_no_backend(backend);
  return NULL;
}

int dm_graph_end(dm_graph *g) {
#if defined(ANYATTN_WITH_CUDA)
  if (g->backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaStreamEndCapture(g->stream, &g->graph));
    DM_CUDA(cudaGraphInstantiateWithFlags(&g->exec, g->graph, 0));
    return 0;
  }
#endif
  return dm_no_backend(g->backend);
}

int dm_graph_launch(dm_graph *g) {
#if defined(ANYATTN_WITH_CUDA)
  if (g->backend == ANYATTN_BACKEND_CUDA) {
    DM_CUDA(cudaGraphLaunch(g->exec, 0));
    return 0;
  }
#endif
  return dm_no_backend(g->backend);
}

void dm_graph_free(dm_graph *g) {
  if (!g) return;
#if defined(ANYATTN_WITH_CUDA)
  if (g->backend == ANYATTN_BACKEND_CUDA) {
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    if (g->stream) cudaStreamDestroy(g->stream);
  }
#endif
  free(g);
}
