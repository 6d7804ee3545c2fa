/* test_conformance.c: runs the conformance suite (testkit/conformance.c) for
 * ctest. Usage: test_conformance [cpu|cuda|hip|auto] [quick|full] [filter].
 * Exit code: 0 pass, 1 fail, 77 skipped (backend not compiled or no device). */
#include <stdio.h>
#include <string.h>

#include "conformance.h"

int main(int argc, char **argv) {
  anyattn_backend backend = ANYATTN_BACKEND_CPU;
  if (argc > 1 && anyattn_backend_from_name(argv[1], &backend) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "test_conformance: %s\n", anyattn_last_error());
    return 2;
  }
  tl_check_options opt = {1, NULL, 0, 1};
  if (argc > 2) opt.quick = strcmp(argv[2], "full") != 0;
  if (argc > 3) opt.filter = argv[3];
  int np = 0, nf = 0, ns = 0;
  const int rc = tl_check_run(backend, 0, &opt, stdout, &np, &nf, &ns);
  if (rc == 77) return 77;
  return rc == 0 ? 0 : 1;
}
