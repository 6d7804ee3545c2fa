/* backends.c: the backends compiled into this library. */
#include "backend.h"

const aa_backend_ops *aa_backend_ops_of(anyattn_backend backend) {
  switch (backend) {
    case ANYATTN_BACKEND_CPU: return aa_cpu_backend();
#if defined(ANYATTN_WITH_CUDA)
    case ANYATTN_BACKEND_CUDA: return aa_cuda_backend();
#endif
#if defined(ANYATTN_WITH_HIP)
    case ANYATTN_BACKEND_HIP: return aa_hip_backend();
#endif
    default: return NULL;
  }
}
