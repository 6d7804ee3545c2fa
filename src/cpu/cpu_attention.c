/* cpu_attention.c: the CPU backend (placeholder until the OpenMP kernel lands). */
#include <stdio.h>
#include <omp.h>

#include "internal.h"

int aa_cpu_threads(void) { return omp_get_max_threads(); }

void aa_cpu_device_name(char *buf, size_t size) {
  snprintf(buf, size, "CPU, %d threads", aa_cpu_threads());
}

anyattn_status aa_cpu_plan(anyattn_plan *plan) {
  (void)plan;
  return aa_error(ANYATTN_STATUS_BACKEND_UNAVAILABLE, "cpu backend not implemented yet");
}

anyattn_status aa_cpu_run(const anyattn_plan *plan, const anyattn_args *args) {
  (void)plan;
  (void)args;
  return aa_error(ANYATTN_STATUS_BACKEND_UNAVAILABLE, "cpu backend not implemented yet");
}
