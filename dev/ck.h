/* ck.h: the standalone experiments' check of a CUDA runtime call: on an
 * error, print file:line, the call and the runtime's message, and exit 1. */
#ifndef ANYATTN_DEV_CK_H
#define ANYATTN_DEV_CK_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#endif
