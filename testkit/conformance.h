/* conformance.h: the conformance suite, one entry point shared by ctest
 * (tests/test_conformance.c) and the CLI (`anyattn check`). Every case runs
 * through the public API with backend memory from testkit/devmem.h, so the same
 * cases run on the CPU and on GPUs, and are compared with testkit/reference.c. */
#ifndef ANYATTN_TL_CONFORMANCE_H
#define ANYATTN_TL_CONFORMANCE_H

#include <stdint.h>
#include <stdio.h>

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int quick;          /* 1: the small set ctest runs (about 65 cases) */
  const char *filter; /* NULL or "": all cases; else only names containing it */
  uint64_t seed;      /* 0: tl_seed_from_env_or_time() ($ANYATTN_SEED) */
  int verbose;        /* 1: also print the first mismatching elements of a failure */
} tl_check_options;

/* Runs the conformance suite on backend/device; one line per case to `out`:
 * "PASS name ...", "FAIL name ... (why)", "SKIP name (reason, e.g. unsupported by backend)".
 * Fills counts; returns 0 if all ran cases passed, 1 if any failed, 77 if the backend is not
 * compiled in or has no device (prints one SKIP line saying so), -1 on internal error. */
int tl_check_run(anyattn_backend backend, int device, const tl_check_options *opt, FILE *out,
                 int *num_pass, int *num_fail, int *num_skip);

#ifdef __cplusplus
}
#endif
#endif
