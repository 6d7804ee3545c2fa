/* test_hip_nodevice.c: links libanyattn_hip (the HIP build of the library) on a
 * machine without an AMD GPU: the HIP backend must be compiled in, report
 * NO_DEVICE with a clean message, list its AMD config table, and leave the
 * CPU backend working (one small problem checked against a direct softmax).
 * With an AMD GPU present the no-device checks are skipped (exit 77). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "anyattn.h"

static int failures = 0;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                    \
      printf("\n");                           \
      failures++;                             \
    }                                         \
  } while (0)

/* One sequence, 2 query tokens over 5 keys, causal, f32, d = 8, 2 q heads on 1 kv head. */
static void check_cpu_backend(void) {
  enum { D = 8, HQ = 2, KV = 5, Q = 2, BS = 4 };
  anyattn_context *ctx = NULL;
  anyattn_status st = anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx);
  CHECK(st == ANYATTN_STATUS_OK, "CPU context: %s (%s)", anyattn_status_name(st), anyattn_last_error());
  if (st != ANYATTN_STATUS_OK) return;
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = HQ;
  pr.num_kv_heads = 1;
  pr.head_dim = D;
  pr.dtype = ANYATTN_DTYPE_F32;
  pr.block_size = BS;
  pr.causal = 1;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1;
  lim.max_tokens = Q;
  lim.max_context = KV;
  anyattn_plan *plan = NULL;
  st = anyattn_plan_create(ctx, &pr, &lim, &plan);
  CHECK(st == ANYATTN_STATUS_OK, "CPU plan: %s (%s)", anyattn_status_name(st), anyattn_last_error());
  if (st != ANYATTN_STATUS_OK) {
    anyattn_context_free(ctx);
    return;
  }
  static float q[Q * HQ * D], k[2 * BS * D], v[2 * BS * D], out[Q * HQ * D], lse[Q * HQ], ws[1 << 16];
  for (int i = 0; i < Q * HQ * D; i++) q[i] = sinf(0.37f * (float)i);
  for (int i = 0; i < 2 * BS * D; i++) {
    k[i] = cosf(0.21f * (float)i);
    v[i] = sinf(0.13f * (float)i + 1.0f);
  }
  const int32_t cu[2] = {0, Q}, lens[1] = {KV}, bt[2] = {1, 0}; /* pages swapped */
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = 1;
  b.num_tokens = Q;
  b.cu_seqlens_q = cu;
  b.seq_lens_k = lens;
  b.block_table = bt;
  b.block_table_stride = 2;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = 2;
  t.out = out;
  t.lse = lse;
  const size_t wsz = anyattn_plan_workspace_size(plan);
  CHECK(wsz <= sizeof ws, "workspace %zu", wsz);
  st = anyattn_run(plan, &b, &t, ws, sizeof ws, NULL);
  CHECK(st == ANYATTN_STATUS_OK, "CPU run: %s (%s)", anyattn_status_name(st), anyattn_last_error());
  double worst = 0.0;
  for (int i = 0; i < Q; i++)
    for (int h = 0; h < HQ; h++) {
      const int pos = KV - Q + i;
      double s[KV], m = -INFINITY, l = 0.0;
      for (int j = 0; j <= pos; j++) {
        const float *kr = k + ((bt[j / BS] * BS) + j % BS) * D;
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += (double)q[(i * HQ + h) * D + d] * kr[d];
        s[j] = dot / sqrt((double)D);
        if (s[j] > m) m = s[j];
      }
      for (int j = 0; j <= pos; j++) l += exp(s[j] - m);
      for (int d = 0; d < D; d++) {
        double o = 0.0;
        for (int j = 0; j <= pos; j++) o += exp(s[j] - m) / l * v[((bt[j / BS] * BS) + j % BS) * D + d];
        worst = fmax(worst, fabs(o - out[(i * HQ + h) * D + d]));
      }
      worst = fmax(worst, fabs(m + log(l) - lse[i * HQ + h]));
    }
  CHECK(worst < 1e-4, "CPU result off by %g", worst);
  printf("CPU backend in the HIP build: max error %.2e\n", worst);
  anyattn_plan_free(plan);
  anyattn_context_free(ctx);
}

int main(void) {
  CHECK(anyattn_backend_compiled(ANYATTN_BACKEND_HIP) == 1, "HIP backend not compiled in");
  CHECK(anyattn_backend_compiled(ANYATTN_BACKEND_CPU) == 1, "CPU backend not compiled in");
  CHECK(anyattn_backend_compiled(ANYATTN_BACKEND_CUDA) == 0, "the HIP library should not contain CUDA");

  /* The AMD rows of the config table (src/choose/configs.h) through the public API. */
  const int n = anyattn_config_count(ANYATTN_BACKEND_HIP);
  CHECK(n > 0, "no HIP configs");
  for (int i = 0; i < n; i++) {
    anyattn_config_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    anyattn_status st = anyattn_config_get(ANYATTN_BACKEND_HIP, i, &info);
    CHECK(st == ANYATTN_STATUS_OK, "config_get %d: %s", i, anyattn_last_error());
    printf("hip config %d: %-12s block_m %3d block_n %3d wavefronts %d stages %d\n", i, info.name, info.block_m,
           info.block_n, info.warps, info.stages);
  }

  int count = -1;
  anyattn_status st = anyattn_device_count(ANYATTN_BACKEND_HIP, &count);
  if (st == ANYATTN_STATUS_OK && count > 0) {
    printf("SKIP: %d AMD device(s) present; the no-device checks do not apply\n", count);
    check_cpu_backend();
    return failures ? 1 : 77;
  }
  CHECK(st == ANYATTN_STATUS_NO_DEVICE, "device_count: %s", anyattn_status_name(st));
  anyattn_context *ctx = NULL;
  st = anyattn_context_create(ANYATTN_BACKEND_HIP, 0, &ctx);
  const char *msg = anyattn_last_error();
  printf("context_create(HIP): %s: \"%s\"\n", anyattn_status_name(st), msg);
  CHECK(st == ANYATTN_STATUS_NO_DEVICE, "expected NO_DEVICE, got %s", anyattn_status_name(st));
  CHECK(ctx == NULL, "context set on failure");
  CHECK(strstr(msg, "HIP") != NULL, "message does not name HIP: '%s'", msg);
  CHECK(strstr(msg, "CUDA") == NULL, "message names CUDA: '%s'", msg);
  for (const char *c = msg; *c; c++) CHECK(*c >= 32 && *c < 127, "unprintable byte in the message");
  anyattn_context_free(ctx);

  /* AUTO falls back to the CPU and leaves no error behind. */
  st = anyattn_context_create(ANYATTN_BACKEND_AUTO, 0, &ctx);
  CHECK(st == ANYATTN_STATUS_OK, "AUTO: %s (%s)", anyattn_status_name(st), anyattn_last_error());
  if (st == ANYATTN_STATUS_OK) {
    CHECK(anyattn_context_backend(ctx) == ANYATTN_BACKEND_CPU, "AUTO chose %s",
          anyattn_backend_name(anyattn_context_backend(ctx)));
    anyattn_context_free(ctx);
  }

  check_cpu_backend();
  printf("%s: test_hip_nodevice\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
