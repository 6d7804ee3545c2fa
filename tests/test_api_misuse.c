/* test_api_misuse.c: provokes every status that can occur without a GPU and
 * checks the status, that anyattn_last_error() names the argument, that run
 * wrote nothing on error and that plan/context out-pointers were set to NULL. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "anyattn.h"
#include "tl_util.h"

static int failures = 0, checks = 0;

/* status must be `want`; on error the message must contain `needle`. */
static void expect(const char *what, anyattn_status got, anyattn_status want, const char *needle, int line) {
  checks++;
  const char *msg = anyattn_last_error();
  if (got != want) {
    printf("FAIL line %d: %s: got %s, want %s (\"%s\")\n", line, what, anyattn_status_name(got),
           anyattn_status_name(want), msg);
    failures++;
    return;
  }
  if (want == ANYATTN_STATUS_OK && msg[0] != '\0') {
    printf("FAIL line %d: %s: OK but last_error is \"%s\"\n", line, what, msg);
    failures++;
  }
  if (want != ANYATTN_STATUS_OK && needle && !strstr(msg, needle)) {
    printf("FAIL line %d: %s: message \"%s\" does not name \"%s\"\n", line, what, msg, needle);
    failures++;
  }
}
#define EXPECT(call, want, needle) expect(#call, (call), (want), (needle), __LINE__)

static void expect_true(const char *what, int cond, int line) {
  checks++;
  if (!cond) {
    printf("FAIL line %d: %s\n", line, what);
    failures++;
  }
}
#define EXPECT_TRUE(cond) expect_true(#cond, (cond), __LINE__)

static void *const GARBAGE = (void *)0x1234;

static void test_version_and_names(void) {
  EXPECT_TRUE(anyattn_version_number() == ANYATTN_VERSION_NUMBER);
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", ANYATTN_VERSION_MAJOR, ANYATTN_VERSION_MINOR, ANYATTN_VERSION_PATCH);
  EXPECT_TRUE(strcmp(anyattn_version_string(), v) == 0);
  for (int s = 0; s <= ANYATTN_STATUS_UNSUPPORTED_OPTION; s++) {
    const char *name = anyattn_status_name((anyattn_status)s);
    EXPECT_TRUE(strncmp(name, "ANYATTN_STATUS_", 15) == 0);
    for (int t = 0; t < s; t++) EXPECT_TRUE(strcmp(name, anyattn_status_name((anyattn_status)t)) != 0);
  }
  EXPECT_TRUE(strcmp(anyattn_status_name(ANYATTN_STATUS_HEAD_RATIO), "ANYATTN_STATUS_HEAD_RATIO") == 0);
  EXPECT_TRUE(strcmp(anyattn_status_name((anyattn_status)99), "unknown status") == 0);
  EXPECT_TRUE(anyattn_dtype_size(ANYATTN_DTYPE_F32) == 4 && anyattn_dtype_size(ANYATTN_DTYPE_F16) == 2 &&
              anyattn_dtype_size(ANYATTN_DTYPE_BF16) == 2 && anyattn_dtype_size((anyattn_dtype)9) == 0);
  anyattn_problem_init(NULL);
  anyattn_limits_init(NULL);
  anyattn_batch_init(NULL);
  anyattn_tensors_init(NULL);
}

static void test_backends_and_contexts(void) {
  anyattn_backend b = ANYATTN_BACKEND_AUTO;
  EXPECT(anyattn_backend_from_name(NULL, &b), ANYATTN_STATUS_NULL_POINTER, "name");
  EXPECT(anyattn_backend_from_name("cpu", NULL), ANYATTN_STATUS_NULL_POINTER, "backend");
  EXPECT(anyattn_backend_from_name("nosuch", &b), ANYATTN_STATUS_BACKEND_UNAVAILABLE, "nosuch");
  EXPECT(anyattn_backend_from_name("CPU ", &b), ANYATTN_STATUS_BACKEND_UNAVAILABLE, "CPU");
  static const char *const names[] = {"auto", "cpu", "cuda", "hip"};
  for (int i = 0; i < 4; i++) {
    EXPECT(anyattn_backend_from_name(names[i], &b), ANYATTN_STATUS_OK, NULL);
    EXPECT_TRUE((int)b == i && strcmp(anyattn_backend_name(b), names[i]) == 0);
  }
  EXPECT_TRUE(strcmp(anyattn_backend_name((anyattn_backend)42), "unknown") == 0);
  EXPECT_TRUE(anyattn_backend_compiled(ANYATTN_BACKEND_CPU) == 1);
  EXPECT_TRUE(anyattn_backend_compiled((anyattn_backend)42) == 0);

  int count = -1;
  EXPECT(anyattn_device_count(ANYATTN_BACKEND_CPU, NULL), ANYATTN_STATUS_NULL_POINTER, "count");
  EXPECT(anyattn_device_count(ANYATTN_BACKEND_CPU, &count), ANYATTN_STATUS_OK, NULL);
  EXPECT_TRUE(count == 1);
  EXPECT(anyattn_device_count((anyattn_backend)42, &count), ANYATTN_STATUS_BACKEND_UNAVAILABLE, "42");
  EXPECT_TRUE(count == 0);

  char buf[128];
  EXPECT(anyattn_device_name(ANYATTN_BACKEND_CPU, 0, NULL, 10), ANYATTN_STATUS_NULL_POINTER, "buf");
  EXPECT(anyattn_device_name(ANYATTN_BACKEND_CPU, 0, buf, 0), ANYATTN_STATUS_INVALID_SIZE, "buf_size");
  EXPECT(anyattn_device_name(ANYATTN_BACKEND_CPU, 1, buf, sizeof buf), ANYATTN_STATUS_NO_DEVICE, "device");
  EXPECT(anyattn_device_name(ANYATTN_BACKEND_CPU, 0, buf, sizeof buf), ANYATTN_STATUS_OK, NULL);
  EXPECT_TRUE(buf[0] != '\0');

  anyattn_context *ctx = (anyattn_context *)GARBAGE;
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_CPU, 0, NULL), ANYATTN_STATUS_NULL_POINTER, "ctx");
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_CPU, -1, &ctx), ANYATTN_STATUS_INVALID_SIZE, "device");
  EXPECT_TRUE(ctx == NULL);
  ctx = (anyattn_context *)GARBAGE;
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_CPU, 1, &ctx), ANYATTN_STATUS_NO_DEVICE, "device");
  EXPECT_TRUE(ctx == NULL);
  ctx = (anyattn_context *)GARBAGE;
  EXPECT(anyattn_context_create((anyattn_backend)42, 0, &ctx), ANYATTN_STATUS_BACKEND_UNAVAILABLE, "backend");
  EXPECT_TRUE(ctx == NULL);

  /* GPU backends on this machine: not compiled -> BACKEND_UNAVAILABLE; compiled
   * without a device -> NO_DEVICE. With a device there is nothing to provoke. */
  static const anyattn_backend gpus[] = {ANYATTN_BACKEND_CUDA, ANYATTN_BACKEND_HIP};
  for (int i = 0; i < 2; i++) {
    const anyattn_backend g = gpus[i];
    ctx = (anyattn_context *)GARBAGE;
    count = -1;
    if (!anyattn_backend_compiled(g)) {
      EXPECT(anyattn_device_count(g, &count), ANYATTN_STATUS_BACKEND_UNAVAILABLE, anyattn_backend_name(g));
      EXPECT(anyattn_context_create(g, 0, &ctx), ANYATTN_STATUS_BACKEND_UNAVAILABLE, anyattn_backend_name(g));
      EXPECT_TRUE(ctx == NULL);
    } else {
      anyattn_status s = anyattn_device_count(g, &count);
      if (s == ANYATTN_STATUS_NO_DEVICE) {
        EXPECT(anyattn_context_create(g, 0, &ctx), ANYATTN_STATUS_NO_DEVICE, NULL);
        EXPECT_TRUE(ctx == NULL);
      } else {
        EXPECT_TRUE(s == ANYATTN_STATUS_OK && count > 0);
        ctx = (anyattn_context *)GARBAGE;
        EXPECT(anyattn_context_create(g, count, &ctx), ANYATTN_STATUS_NO_DEVICE, "device");
        EXPECT_TRUE(ctx == NULL);
      }
    }
  }
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_AUTO, 0, &ctx), ANYATTN_STATUS_OK, NULL);
  EXPECT_TRUE(ctx != NULL && anyattn_context_backend(ctx) != ANYATTN_BACKEND_AUTO);
  EXPECT_TRUE(anyattn_context_device(ctx) == 0 && anyattn_context_device(NULL) == -1);
  anyattn_context_free(ctx);
  anyattn_context_free(NULL);
  EXPECT_TRUE(anyattn_context_backend(NULL) == ANYATTN_BACKEND_AUTO);

  anyattn_config_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_TRUE(anyattn_config_count(ANYATTN_BACKEND_CPU) == 0);
  EXPECT(anyattn_config_get(ANYATTN_BACKEND_CPU, 0, NULL), ANYATTN_STATUS_NULL_POINTER, "info");
  EXPECT(anyattn_config_get(ANYATTN_BACKEND_CPU, 0, &info), ANYATTN_STATUS_INVALID_SIZE, "index");
  EXPECT(anyattn_config_get(ANYATTN_BACKEND_CPU, -1, &info), ANYATTN_STATUS_INVALID_SIZE, "index");
  info.struct_size = 3;
  EXPECT(anyattn_config_get(ANYATTN_BACKEND_CPU, 0, &info), ANYATTN_STATUS_STRUCT_SIZE, "struct_size");
}

/* ---- plan ------------------------------------------------------------------ */
static void good_problem(anyattn_problem *p) {
  anyattn_problem_init(p);
  p->num_q_heads = 8, p->num_kv_heads = 2, p->head_dim = 64;
  p->dtype = ANYATTN_DTYPE_F16, p->block_size = 16, p->causal = 1;
}
static void good_limits(anyattn_limits *l) {
  anyattn_limits_init(l);
  l->max_seqs = 4, l->max_tokens = 16, l->max_context = 64;
}

/* Plan with one field broken: status, message, *plan == NULL. */
#define EXPECT_PLAN(mutate, want, needle)                            \
  do {                                                               \
    anyattn_problem p_;                                              \
    anyattn_limits l_;                                               \
    good_problem(&p_);                                               \
    good_limits(&l_);                                                \
    { mutate; }                                                      \
    anyattn_plan *pl_ = (anyattn_plan *)GARBAGE;                     \
    expect(#mutate, anyattn_plan_create(ctx, &p_, &l_, &pl_), (want), (needle), __LINE__); \
    if ((want) != ANYATTN_STATUS_OK) expect_true(#mutate ": plan set to NULL", pl_ == NULL, __LINE__); \
    else anyattn_plan_free(pl_);                                     \
  } while (0)

static void test_plan(anyattn_context *ctx) {
  anyattn_problem p;
  anyattn_limits l;
  good_problem(&p);
  good_limits(&l);
  anyattn_plan *plan = (anyattn_plan *)GARBAGE;
  EXPECT(anyattn_plan_create(ctx, &p, &l, NULL), ANYATTN_STATUS_NULL_POINTER, "plan");
  EXPECT(anyattn_plan_create(NULL, &p, &l, &plan), ANYATTN_STATUS_NULL_POINTER, "ctx");
  EXPECT_TRUE(plan == NULL);
  plan = (anyattn_plan *)GARBAGE;
  EXPECT(anyattn_plan_create(ctx, NULL, &l, &plan), ANYATTN_STATUS_NULL_POINTER, "problem");
  EXPECT_TRUE(plan == NULL);
  plan = (anyattn_plan *)GARBAGE;
  EXPECT(anyattn_plan_create(ctx, &p, NULL, &plan), ANYATTN_STATUS_NULL_POINTER, "limits");
  EXPECT_TRUE(plan == NULL);

  EXPECT_PLAN((void)0, ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.struct_size = sizeof p_ - 8, ANYATTN_STATUS_STRUCT_SIZE, "problem->struct_size");
  EXPECT_PLAN(p_.struct_size = 0, ANYATTN_STATUS_STRUCT_SIZE, "problem->struct_size");
  EXPECT_PLAN(l_.struct_size = sizeof l_ + 4, ANYATTN_STATUS_STRUCT_SIZE, "limits->struct_size");
  EXPECT_PLAN(p_.num_q_heads = 0, ANYATTN_STATUS_INVALID_SIZE, "num_q_heads");
  EXPECT_PLAN(p_.num_q_heads = -8, ANYATTN_STATUS_INVALID_SIZE, "num_q_heads");
  EXPECT_PLAN(p_.num_kv_heads = 0, ANYATTN_STATUS_INVALID_SIZE, "num_kv_heads");
  EXPECT_PLAN(p_.num_kv_heads = 3, ANYATTN_STATUS_HEAD_RATIO, "num_kv_heads");
  EXPECT_PLAN((p_.num_q_heads = 2, p_.num_kv_heads = 4), ANYATTN_STATUS_HEAD_RATIO, "num_q_heads");
  EXPECT_PLAN(p_.head_dim = 0, ANYATTN_STATUS_INVALID_SIZE, "head_dim");
  EXPECT_PLAN(p_.head_dim = -64, ANYATTN_STATUS_INVALID_SIZE, "head_dim");
  EXPECT_PLAN(p_.head_dim = 513, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM, "head_dim"); /* CPU: 1..512 */
  EXPECT_PLAN(p_.head_dim = 1, ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.head_dim = 512, ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.dtype = (anyattn_dtype)3, ANYATTN_STATUS_UNSUPPORTED_DTYPE, "dtype");
  EXPECT_PLAN(p_.dtype = (anyattn_dtype)-1, ANYATTN_STATUS_UNSUPPORTED_DTYPE, "dtype");
  EXPECT_PLAN(p_.block_size = 0, ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE, "block_size");
  EXPECT_PLAN(p_.block_size = -16, ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE, "block_size");
  EXPECT_PLAN(p_.block_size = 1, ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.causal = 2, ANYATTN_STATUS_INVALID_OPTION, "causal");
  EXPECT_PLAN(p_.causal = -1, ANYATTN_STATUS_INVALID_OPTION, "causal");
  EXPECT_PLAN(p_.window_left = -2, ANYATTN_STATUS_INVALID_OPTION, "window_left");
  EXPECT_PLAN(p_.window_right = -2, ANYATTN_STATUS_INVALID_OPTION, "window_right");
  EXPECT_PLAN(p_.scale = NAN, ANYATTN_STATUS_INVALID_OPTION, "scale");
  EXPECT_PLAN(p_.scale = -0.5f, ANYATTN_STATUS_INVALID_OPTION, "scale");
  EXPECT_PLAN(p_.scale = INFINITY, ANYATTN_STATUS_INVALID_OPTION, "scale");
  EXPECT_PLAN(p_.softcap = -1.0f, ANYATTN_STATUS_INVALID_OPTION, "softcap");
  EXPECT_PLAN(p_.softcap = NAN, ANYATTN_STATUS_INVALID_OPTION, "softcap");
  EXPECT_PLAN(p_.softcap = INFINITY, ANYATTN_STATUS_INVALID_OPTION, "softcap");
  EXPECT_PLAN(l_.max_seqs = 0, ANYATTN_STATUS_INVALID_SIZE, "max_seqs");
  EXPECT_PLAN(l_.max_tokens = 0, ANYATTN_STATUS_INVALID_SIZE, "max_tokens");
  EXPECT_PLAN(l_.max_context = 0, ANYATTN_STATUS_INVALID_SIZE, "max_context");
  EXPECT_PLAN(l_.max_context = -5, ANYATTN_STATUS_INVALID_SIZE, "max_context");
  EXPECT_PLAN(p_.config = "nosuch-config", ANYATTN_STATUS_UNSUPPORTED_CONFIG, "config");

  /* Sizes: core's bounds (anyattn.h), and products that fail instead of wrapping. */
  EXPECT_PLAN((p_.num_q_heads = INT_MAX, p_.num_kv_heads = 1), ANYATTN_STATUS_INVALID_SIZE, "num_q_heads");
  EXPECT_PLAN((p_.num_q_heads = 65537, p_.num_kv_heads = 1), ANYATTN_STATUS_INVALID_SIZE, "num_q_heads is 65537");
  EXPECT_PLAN((p_.num_q_heads = INT_MAX, p_.num_kv_heads = INT_MAX), ANYATTN_STATUS_INVALID_SIZE, "num_q_heads");
  EXPECT_PLAN((p_.num_q_heads = 65536, p_.num_kv_heads = 131072), ANYATTN_STATUS_INVALID_SIZE, "num_kv_heads");
  EXPECT_PLAN((p_.num_q_heads = 65536, p_.num_kv_heads = 1), ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.head_dim = INT_MAX, ANYATTN_STATUS_INVALID_SIZE, "head_dim");
  EXPECT_PLAN(p_.head_dim = 65537, ANYATTN_STATUS_INVALID_SIZE, "head_dim is 65537");
  EXPECT_PLAN((p_.block_size = INT_MAX, p_.num_q_heads = p_.num_kv_heads = 65536, p_.head_dim = 65536,
               p_.dtype = ANYATTN_DTYPE_F32),
              ANYATTN_STATUS_INVALID_SIZE, "block_size");
  EXPECT_PLAN(l_.max_context = (1 << 29) + 1, ANYATTN_STATUS_INVALID_SIZE, "max_context is 536870913");
  EXPECT_PLAN(l_.max_context = INT_MAX, ANYATTN_STATUS_INVALID_SIZE, "max_context");
  EXPECT_PLAN(l_.stage_kv_tokens = -1, ANYATTN_STATUS_INVALID_SIZE, "stage_kv_tokens is -1");
  EXPECT_PLAN(l_.stage_kv_tokens = (1 << 29) + 1, ANYATTN_STATUS_INVALID_SIZE, "stage_kv_tokens is 536870913");
  EXPECT_PLAN((l_.max_tokens = INT_MAX, p_.num_q_heads = 65536, p_.num_kv_heads = 1, p_.head_dim = 65536,
               p_.dtype = ANYATTN_DTYPE_F32),
              ANYATTN_STATUS_INVALID_SIZE, "max_tokens");
  {
    /* The largest limits are fine where the tensors fit: the workspace grows, it never wraps. */
    anyattn_problem p2;
    anyattn_limits l2;
    good_problem(&p2);
    good_limits(&l2);
    l2.max_seqs = l2.max_tokens = INT_MAX;
    l2.max_context = 1 << 29; /* the most a context may hold */
    anyattn_plan *pl = NULL;
    EXPECT(anyattn_plan_create(ctx, &p2, &l2, &pl), ANYATTN_STATUS_OK, NULL);
    const size_t ws = anyattn_plan_workspace_size(pl);
    EXPECT_TRUE(pl != NULL && ws >= (size_t)INT_MAX * 8 && ws < ((size_t)1 << 40));
    anyattn_plan_free(pl);
  }

  anyattn_plan_free(NULL);
  EXPECT_TRUE(anyattn_plan_workspace_size(NULL) == 0);
  EXPECT_TRUE(anyattn_plan_describe(NULL) != NULL);
  plan = NULL;
  EXPECT(anyattn_plan_create(ctx, &p, &l, &plan), ANYATTN_STATUS_OK, NULL);
  if (plan) {
    EXPECT_TRUE(anyattn_plan_describe(plan)[0] != '\0');
    anyattn_plan_free(plan);
  }
}

/* ---- run and validate ---------------------------------------------------------- */
enum { T_TOKENS = 4, T_HQ = 8, T_HKV = 2, T_D = 64, T_BS = 16, T_BLOCKS = 4 };
static uint16_t q_buf[T_TOKENS * T_HQ * T_D + 64];
static uint16_t k_buf[T_BLOCKS * T_BS * T_HKV * T_D + 64], v_buf[T_BLOCKS * T_BS * T_HKV * T_D + 64];
static uint16_t out_buf[T_TOKENS * T_HQ * T_D + 64];
static float lse_buf[T_TOKENS * T_HQ + 16];
static unsigned char ws_buf[1 << 22] __attribute__((aligned(256)));
#define SENTINEL 0xA5

/* Two sequences: a decode (q 1, kv 10) and a chunk (q 3, kv 20, two pages). */
static int32_t cu[3] = {0, 1, 4}, kvl[2] = {10, 20}, table[2 * 2] = {3, 0, 1, 2};

static void good_run_args(anyattn_batch *b, anyattn_tensors *t) {
  anyattn_batch_init(b);
  b->num_seqs = 2, b->num_tokens = 4, b->cu_seqlens_q = cu, b->seq_lens_k = kvl, b->block_table = table;
  b->block_table_stride = 2;
  anyattn_tensors_init(t);
  t->q = q_buf, t->k_cache = k_buf, t->v_cache = v_buf, t->num_blocks = T_BLOCKS;
  t->out = out_buf, t->lse = lse_buf;
}

static int outputs_untouched(void) {
  const unsigned char *o = (const unsigned char *)out_buf, *l = (const unsigned char *)lse_buf;
  for (size_t i = 0; i < sizeof out_buf; i++)
    if (o[i] != SENTINEL) return 0;
  for (size_t i = 0; i < sizeof lse_buf; i++)
    if (l[i] != SENTINEL) return 0;
  return 1;
}

static size_t g_ws;

/* run() with one argument broken: status, message, and out/lse not written. */
#define EXPECT_RUN(mutate, want, needle)                                               \
  do {                                                                                 \
    anyattn_batch b_;                                                                  \
    anyattn_tensors t_;                                                                \
    const anyattn_plan *pl_ = plan;                                                    \
    void *ws_ = ws_buf;                                                                \
    size_t wss_ = g_ws;                                                                \
    good_run_args(&b_, &t_);                                                           \
    { mutate; }                                                                        \
    memset(out_buf, SENTINEL, sizeof out_buf);                                         \
    memset(lse_buf, SENTINEL, sizeof lse_buf);                                         \
    expect(#mutate, anyattn_run(pl_, &b_, &t_, ws_, wss_, NULL), (want), (needle), __LINE__); \
    if ((want) != ANYATTN_STATUS_OK)                                                   \
      expect_true(#mutate ": out and lse untouched", outputs_untouched(), __LINE__);  \
    (void)pl_, (void)ws_, (void)wss_;                                                  \
  } while (0)

#define EXPECT_VALIDATE(mutate, nb, want, needle)                                       \
  do {                                                                                  \
    anyattn_batch b_;                                                                   \
    anyattn_tensors t_;                                                                 \
    int32_t cu_[3] = {0, 1, 4}, kvl_[2] = {10, 20}, table_[4] = {3, 0, 1, 2};           \
    good_run_args(&b_, &t_);                                                            \
    b_.cu_seqlens_q = cu_, b_.seq_lens_k = kvl_, b_.block_table = table_;               \
    { mutate; }                                                                         \
    expect(#mutate, anyattn_validate(plan, &b_, (nb)), (want), (needle), __LINE__);     \
    (void)t_;                                                                           \
  } while (0)

static void test_run_and_validate(anyattn_context *ctx) {
  anyattn_problem p;
  anyattn_limits l;
  good_problem(&p);
  good_limits(&l);
  anyattn_plan *plan = NULL;
  if (anyattn_plan_create(ctx, &p, &l, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL: plan for the run checks: %s (run and validate checks skipped)\n", anyattn_last_error());
    failures++;
    return;
  }
  g_ws = anyattn_plan_workspace_size(plan);
  if (g_ws > sizeof ws_buf) {
    printf("FAIL: plan wants %zu bytes of workspace, test has %zu\n", g_ws, sizeof ws_buf);
    failures++;
    anyattn_plan_free(plan);
    return;
  }
  uint64_t rng = 42;
  tl_fill_normal(ANYATTN_DTYPE_F16, q_buf, sizeof q_buf / 2, 1.0f, &rng);
  tl_fill_normal(ANYATTN_DTYPE_F16, k_buf, sizeof k_buf / 2, 1.0f, &rng);
  tl_fill_normal(ANYATTN_DTYPE_F16, v_buf, sizeof v_buf / 2, 1.0f, &rng);

  /* The good call works and writes out. */
  EXPECT_RUN((void)0, ANYATTN_STATUS_OK, NULL);
  EXPECT_TRUE(!outputs_untouched());
  /* No tokens: OK and nothing written, even with NULL tensors. */
  EXPECT_RUN((b_.num_tokens = 0, b_.num_seqs = 0, t_.q = NULL, t_.out = NULL), ANYATTN_STATUS_OK, NULL);
  EXPECT_TRUE(outputs_untouched());

  EXPECT_RUN(pl_ = NULL, ANYATTN_STATUS_NULL_POINTER, "plan");
  {
    anyattn_batch b;
    anyattn_tensors t;
    good_run_args(&b, &t);
    memset(out_buf, SENTINEL, sizeof out_buf);
    memset(lse_buf, SENTINEL, sizeof lse_buf);
    EXPECT(anyattn_run(plan, NULL, &t, ws_buf, g_ws, NULL), ANYATTN_STATUS_NULL_POINTER, "batch");
    EXPECT(anyattn_run(plan, &b, NULL, ws_buf, g_ws, NULL), ANYATTN_STATUS_NULL_POINTER, "tensors");
    EXPECT_TRUE(outputs_untouched());
    /* anyattn_workspace_prepare checks what run checks of the workspace */
    EXPECT(anyattn_workspace_prepare(NULL, ws_buf, g_ws, NULL), ANYATTN_STATUS_NULL_POINTER, "plan");
    EXPECT(anyattn_workspace_prepare(plan, ws_buf, g_ws + 256, NULL), ANYATTN_STATUS_OK, NULL);
    if (g_ws > 0) {
      EXPECT(anyattn_workspace_prepare(plan, ws_buf, g_ws - 1, NULL), ANYATTN_STATUS_WORKSPACE_TOO_SMALL,
             "workspace_size");
      EXPECT(anyattn_workspace_prepare(plan, NULL, g_ws, NULL), ANYATTN_STATUS_NULL_POINTER, "workspace");
    }
    EXPECT(anyattn_workspace_prepare(plan, (char *)ws_buf + 8, g_ws, NULL), ANYATTN_STATUS_BAD_STRIDE, "aligned");
  }
  EXPECT_RUN(b_.struct_size = 8, ANYATTN_STATUS_STRUCT_SIZE, "batch->struct_size");
  EXPECT_RUN(t_.struct_size = sizeof t_ * 2, ANYATTN_STATUS_STRUCT_SIZE, "tensors->struct_size");
  EXPECT_RUN(b_.num_seqs = -1, ANYATTN_STATUS_INVALID_SIZE, "num_seqs");
  EXPECT_RUN(b_.prior_writes = (anyattn_prior_writes)2, ANYATTN_STATUS_INVALID_OPTION, "prior_writes");
  EXPECT_RUN(b_.prior_writes = (anyattn_prior_writes)-1, ANYATTN_STATUS_INVALID_OPTION, "prior_writes");
  EXPECT_RUN(b_.num_seqs = 5, ANYATTN_STATUS_LIMIT_EXCEEDED, "max_seqs");
  EXPECT_RUN(b_.num_tokens = -1, ANYATTN_STATUS_INVALID_SIZE, "num_tokens");
  EXPECT_RUN(b_.num_tokens = 17, ANYATTN_STATUS_LIMIT_EXCEEDED, "max_tokens");
  EXPECT_RUN(b_.num_seqs = 0, ANYATTN_STATUS_INVALID_SIZE, "num_seqs");
  EXPECT_RUN(b_.cu_seqlens_q = NULL, ANYATTN_STATUS_NULL_POINTER, "cu_seqlens_q");
  EXPECT_RUN(b_.seq_lens_k = NULL, ANYATTN_STATUS_NULL_POINTER, "seq_lens_k");
  EXPECT_RUN(b_.block_table = NULL, ANYATTN_STATUS_NULL_POINTER, "block_table");
  EXPECT_RUN(b_.block_table_stride = 0, ANYATTN_STATUS_INVALID_SIZE, "block_table_stride");
  if (g_ws > 0) {
    EXPECT_RUN(wss_ = g_ws - 1, ANYATTN_STATUS_WORKSPACE_TOO_SMALL, "workspace_size");
    EXPECT_RUN(wss_ = 0, ANYATTN_STATUS_WORKSPACE_TOO_SMALL, "workspace_size");
    EXPECT_RUN(ws_ = NULL, ANYATTN_STATUS_NULL_POINTER, "workspace");
  } else {
    printf("note: the CPU plan needs no workspace; WORKSPACE_TOO_SMALL cannot be provoked\n");
  }
  EXPECT_RUN((ws_ = ws_buf + 16, wss_ = g_ws + 64), ANYATTN_STATUS_BAD_STRIDE, "workspace");
  EXPECT_RUN(t_.q = NULL, ANYATTN_STATUS_NULL_POINTER, "tensors->q");
  EXPECT_RUN(t_.k_cache = NULL, ANYATTN_STATUS_NULL_POINTER, "k_cache");
  EXPECT_RUN(t_.v_cache = NULL, ANYATTN_STATUS_NULL_POINTER, "v_cache");
  EXPECT_RUN(t_.out = NULL, ANYATTN_STATUS_NULL_POINTER, "tensors->out");
  EXPECT_RUN(t_.num_blocks = 0, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_RUN(t_.num_blocks = -3, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_RUN(t_.q = (const char *)q_buf + 1, ANYATTN_STATUS_BAD_STRIDE, "tensors->q");
  EXPECT_RUN(t_.k_cache = (const char *)k_buf + 1, ANYATTN_STATUS_BAD_STRIDE, "k_cache");
  EXPECT_RUN(t_.out = (char *)out_buf + 1, ANYATTN_STATUS_BAD_STRIDE, "out");
  EXPECT_RUN(t_.lse = (float *)((char *)lse_buf + 2), ANYATTN_STATUS_BAD_STRIDE, "tensors->lse");
  /* alibi_slopes and sinks: fp32, bf16 or f16, aligned to their elements (k_buf: never written) */
  EXPECT_RUN(t_.sinks_dtype = (anyattn_dtype)7, ANYATTN_STATUS_INVALID_OPTION, "tensors->sinks_dtype is 7");
  EXPECT_RUN(t_.alibi_slopes_dtype = (anyattn_dtype)-1, ANYATTN_STATUS_INVALID_OPTION, "tensors->alibi_slopes_dtype");
  EXPECT_RUN(t_.sinks = (const char *)k_buf + 2, ANYATTN_STATUS_BAD_STRIDE, "tensors->sinks");
  EXPECT_RUN((t_.alibi_slopes = (const char *)k_buf + 1, t_.alibi_slopes_dtype = ANYATTN_DTYPE_F16),
             ANYATTN_STATUS_BAD_STRIDE, "tensors->alibi_slopes");
  EXPECT_RUN((t_.sinks = (const char *)k_buf + 2, t_.sinks_dtype = ANYATTN_DTYPE_BF16), ANYATTN_STATUS_OK, NULL);
  /* Strides: negative, partly zero, overlapping rows, overlapping heads/blocks. */
  EXPECT_RUN((t_.k_stride_block = -2048, t_.k_stride_token = 128, t_.k_stride_head = 64), ANYATTN_STATUS_BAD_STRIDE,
             "k_stride");
  EXPECT_RUN((t_.v_stride_block = 2048, t_.v_stride_token = -128, t_.v_stride_head = 64), ANYATTN_STATUS_BAD_STRIDE,
             "v_stride");
  EXPECT_RUN((t_.k_stride_block = 0, t_.k_stride_token = 128, t_.k_stride_head = 64), ANYATTN_STATUS_BAD_STRIDE,
             "k_stride");
  EXPECT_RUN((t_.k_stride_block = 2048, t_.k_stride_token = 128, t_.k_stride_head = 32), ANYATTN_STATUS_BAD_STRIDE,
             "tensors->k");
  EXPECT_RUN((t_.v_stride_block = 2048, t_.v_stride_token = 64, t_.v_stride_head = 64), ANYATTN_STATUS_BAD_STRIDE,
             "tensors->v");
  EXPECT_RUN((t_.k_stride_block = 1024, t_.k_stride_token = 128, t_.k_stride_head = 64), ANYATTN_STATUS_BAD_STRIDE,
             "tensors->k");
  /* Caches over PTRDIFF_MAX bytes: refused, not wrapped. */
  const int64_t page_bytes = (int64_t)T_BS * T_HKV * T_D * 2;
  EXPECT_RUN(t_.num_blocks = INT64_MAX, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_RUN(t_.num_blocks = PTRDIFF_MAX / page_bytes + 1, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_RUN(t_.num_blocks = PTRDIFF_MAX / page_bytes, ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN((t_.k_stride_block = INT64_MAX / 2, t_.k_stride_token = 128, t_.k_stride_head = 64),
             ANYATTN_STATUS_BAD_STRIDE, "tensors->k strides");
  EXPECT_RUN((t_.v_stride_block = INT64_MAX / 4, t_.v_stride_token = 128, t_.v_stride_head = 64),
             ANYATTN_STATUS_BAD_STRIDE, "tensors->v strides");
  /* Valid non-default strides (HND) are accepted. */
  EXPECT_RUN((t_.k_stride_block = 2048, t_.k_stride_token = 64, t_.k_stride_head = 1024), ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN((t_.lse = NULL), ANYATTN_STATUS_OK, NULL);
  /* sum_kv_len: a hint in [0, num_seqs * (max_kv_len, else max_context)] (two sequences, max_context 64). */
  EXPECT_RUN(b_.sum_kv_len = 30, ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN(b_.sum_kv_len = 128, ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN(b_.sum_kv_len = -1, ANYATTN_STATUS_INVALID_SIZE, "batch->sum_kv_len is -1");
  EXPECT_RUN(b_.sum_kv_len = 129, ANYATTN_STATUS_INVALID_SIZE, "limits.max_context = 128");
  EXPECT_RUN((b_.max_kv_len = 20, b_.sum_kv_len = 41), ANYATTN_STATUS_INVALID_SIZE, "max_kv_len = 40");
  EXPECT_RUN(b_.sum_kv_len = INT64_MAX, ANYATTN_STATUS_INVALID_SIZE, "sum_kv_len");

  /* run_describe: the CPU's one tiling is the plan's line; the batch's sizes are checked as run checks them. */
  {
    anyattn_batch b;
    anyattn_tensors t;
    char line[512];
    good_run_args(&b, &t);
    EXPECT(anyattn_run_describe(plan, &b, line, sizeof line), ANYATTN_STATUS_OK, NULL);
    expect_true("run_describe on the CPU: the plan's line", !strcmp(line, anyattn_plan_describe(plan)), __LINE__);
    EXPECT(anyattn_run_describe(NULL, &b, line, sizeof line), ANYATTN_STATUS_NULL_POINTER, "plan");
    EXPECT(anyattn_run_describe(plan, NULL, line, sizeof line), ANYATTN_STATUS_NULL_POINTER, "batch");
    EXPECT(anyattn_run_describe(plan, &b, NULL, sizeof line), ANYATTN_STATUS_NULL_POINTER, "buf");
    EXPECT(anyattn_run_describe(plan, &b, line, 0), ANYATTN_STATUS_INVALID_SIZE, "buf_size");
    b.sum_kv_len = -2;
    EXPECT(anyattn_run_describe(plan, &b, line, sizeof line), ANYATTN_STATUS_INVALID_SIZE, "sum_kv_len");
    expect_true("run_describe refused: buf empty", line[0] == '\0', __LINE__);
    b.sum_kv_len = 0;
    EXPECT(anyattn_run_describe(plan, &b, line, 8), ANYATTN_STATUS_OK, NULL);
    expect_true("run_describe cuts to buf_size", strlen(line) == 7, __LINE__);
    (void)t;
  }

  /* validate: the good batch, then each rule broken. */
  EXPECT_VALIDATE((void)0, T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT(anyattn_validate(NULL, NULL, 4), ANYATTN_STATUS_NULL_POINTER, "plan");
  EXPECT(anyattn_validate(plan, NULL, 4), ANYATTN_STATUS_NULL_POINTER, "host_batch");
  EXPECT_VALIDATE(b_.struct_size = 0, T_BLOCKS, ANYATTN_STATUS_STRUCT_SIZE, "batch->struct_size");
  EXPECT_VALIDATE(b_.num_seqs = 5, T_BLOCKS, ANYATTN_STATUS_LIMIT_EXCEEDED, "max_seqs");
  EXPECT_VALIDATE(b_.num_tokens = 17, T_BLOCKS, ANYATTN_STATUS_LIMIT_EXCEEDED, "max_tokens");
  EXPECT_VALIDATE(b_.seq_lens_k = NULL, T_BLOCKS, ANYATTN_STATUS_NULL_POINTER, "seq_lens_k");
  EXPECT_VALIDATE((void)0, 0, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_VALIDATE(cu_[0] = 1, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "cu_seqlens_q[0]");
  EXPECT_VALIDATE((cu_[1] = 5, cu_[2] = 4), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "cu_seqlens_q");
  EXPECT_VALIDATE(kvl_[1] = 2, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_len");
  EXPECT_VALIDATE(kvl_[0] = -1, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "seq_lens_k[0]");
  EXPECT_VALIDATE(kvl_[1] = 65, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "max_context");
  EXPECT_VALIDATE(table_[3] = 4, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "block_table[1][1]");
  EXPECT_VALIDATE(table_[0] = -1, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "block_table[0][0]");
  EXPECT_VALIDATE((void)0, 3, ANYATTN_STATUS_BAD_METADATA, "block_table[0][0]"); /* page 3 of 3 */
  EXPECT_VALIDATE(b_.block_table_stride = 1, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "block_table_stride");
  EXPECT_VALIDATE(b_.num_tokens = 3, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "num_tokens");
  EXPECT_VALIDATE(b_.sum_kv_len = 29, T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "batch->sum_kv_len 29");
  EXPECT_VALIDATE(b_.sum_kv_len = 30, T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE(b_.sum_kv_len = 31, T_BLOCKS, ANYATTN_STATUS_OK, NULL); /* a bound */
  /* q_pos: any position with every query in [-2^29, 2^29]; q_len may then exceed kv_len. */
  static const int32_t qp0_[2] = {-5, 40};
  static const int32_t qp1_[2] = {0, 1};
  static const int32_t qp2_[2] = {0, 1};
  static const int32_t qp3_[2] = {-(1 << 29), (1 << 29) - 3};
  static const int32_t qp4_[2] = {-(1 << 29) - 1, 0};
  static const int32_t qp5_[2] = {0, (1 << 29) - 2};
  static const int32_t qp6_[2] = {INT32_MAX, 0};
  static const int32_t qp7_[2] = {0, INT32_MIN};
  EXPECT_VALIDATE((b_.q_pos = qp0_), T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE((b_.q_pos = qp1_, kvl_[1] = 2), T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE((b_.q_pos = qp2_, kvl_[1] = 0), T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE((b_.q_pos = qp3_), T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE((b_.q_pos = qp4_), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_pos[0]");
  EXPECT_VALIDATE((b_.q_pos = qp5_), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_pos[1]");
  EXPECT_VALIDATE((b_.q_pos = qp6_), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_pos[0]");
  EXPECT_VALIDATE((b_.q_pos = qp7_), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_pos[1]");
  /* without q_pos, q_len > kv_len stays an error */
  EXPECT_VALIDATE((b_.q_pos = NULL, kvl_[1] = 2), T_BLOCKS, ANYATTN_STATUS_BAD_METADATA, "q_pos");
  /* Unused entries: the second column of seq 0 (kv 10 < one page) and a q_len 0 sequence's pages. */
  EXPECT_VALIDATE(table_[1] = -7, T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  EXPECT_VALIDATE((cu_[1] = 0, cu_[2] = 3, b_.num_tokens = 3, table_[0] = 99), T_BLOCKS, ANYATTN_STATUS_OK, NULL);
  anyattn_plan_free(plan);
}

/* A window wider than any context bounds nothing: it gives the output of an
 * unbounded one, with no overflow in position + window (UBSan in the
 * sanitizer build). */
static void test_wide_windows(anyattn_context *ctx) {
  for (size_t i = 0; i < sizeof q_buf / 2; i++) q_buf[i] = (uint16_t)(0x3c00 + (i * 37) % 977); /* f16 in [1, 2) */
  for (size_t i = 0; i < sizeof k_buf / 2; i++) k_buf[i] = (uint16_t)(0x3f00 + (i * 53) % 911), v_buf[i] = k_buf[(i * 7) % (sizeof k_buf / 2)];
  static uint16_t ref[T_TOKENS * T_HQ * T_D + 64];
  for (int wide = 0; wide < 2; wide++) {
    anyattn_problem p;
    anyattn_limits l;
    good_problem(&p);
    good_limits(&l);
    p.causal = 0;
    p.window_left = p.window_right = wide ? INT_MAX : -1;
    anyattn_plan *plan = NULL;
    EXPECT(anyattn_plan_create(ctx, &p, &l, &plan), ANYATTN_STATUS_OK, NULL);
    if (!plan) return;
    anyattn_batch b;
    anyattn_tensors t;
    good_run_args(&b, &t);
    memset(out_buf, SENTINEL, sizeof out_buf);
    EXPECT(anyattn_run(plan, &b, &t, ws_buf, anyattn_plan_workspace_size(plan), NULL), ANYATTN_STATUS_OK, NULL);
    if (!wide) memcpy(ref, out_buf, sizeof ref);
    else EXPECT_TRUE(memcmp(ref, out_buf, sizeof ref) == 0);
    anyattn_plan_free(plan);
  }
}

/* fp8 caches: the kv_dtype rules in plan, the descale rules in run, and
 * sizes and alignment counted in cache elements of one byte. */
static void test_fp8(anyattn_context *ctx) {
  EXPECT_TRUE(anyattn_kv_dtype_size(ANYATTN_KV_AS_Q, ANYATTN_DTYPE_F32) == 4 &&
              anyattn_kv_dtype_size(ANYATTN_KV_FP8_E4M3, ANYATTN_DTYPE_BF16) == 1 &&
              anyattn_kv_dtype_size(ANYATTN_KV_FP8_E4M3FNUZ, ANYATTN_DTYPE_F16) == 1 &&
              anyattn_kv_dtype_size((anyattn_kv_dtype)3, ANYATTN_DTYPE_F16) == 0);
  EXPECT_TRUE(strcmp(anyattn_kv_dtype_name(ANYATTN_KV_FP8_E4M3), "fp8_e4m3") == 0 &&
              strcmp(anyattn_kv_dtype_name(ANYATTN_KV_FP8_E4M3FNUZ), "fp8_e4m3fnuz") == 0 &&
              strcmp(anyattn_kv_dtype_name(ANYATTN_KV_AS_Q), "as_q") == 0 &&
              strcmp(anyattn_kv_dtype_name((anyattn_kv_dtype)7), "unknown") == 0);
  {
    anyattn_problem p;
    anyattn_tensors t;
    anyattn_problem_init(&p);
    anyattn_tensors_init(&t);
    EXPECT_TRUE(p.kv_dtype == ANYATTN_KV_AS_Q && t.k_descale == NULL && t.v_descale == NULL &&
                t.descale_layout == ANYATTN_DESCALE_PER_TENSOR);
  }
  EXPECT_PLAN(p_.kv_dtype = ANYATTN_KV_FP8_E4M3, ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN((p_.kv_dtype = ANYATTN_KV_FP8_E4M3FNUZ, p_.dtype = ANYATTN_DTYPE_BF16), ANYATTN_STATUS_OK, NULL);
  EXPECT_PLAN(p_.kv_dtype = (anyattn_kv_dtype)3, ANYATTN_STATUS_INVALID_OPTION, "problem->kv_dtype");
  EXPECT_PLAN(p_.kv_dtype = (anyattn_kv_dtype)-1, ANYATTN_STATUS_INVALID_OPTION, "problem->kv_dtype");
  EXPECT_PLAN((p_.kv_dtype = ANYATTN_KV_FP8_E4M3, p_.dtype = ANYATTN_DTYPE_F32), ANYATTN_STATUS_UNSUPPORTED_OPTION,
              "problem->kv_dtype");
  /* A page of 2^62 elements: too many bytes at 2 per element, addressable at 1
   * (the CPU then refuses the head dim; core's bound was passed). */
  EXPECT_PLAN((p_.block_size = 1 << 30, p_.num_q_heads = p_.num_kv_heads = 65536, p_.head_dim = 65536),
              ANYATTN_STATUS_INVALID_SIZE, "block_size");
  EXPECT_PLAN((p_.block_size = 1 << 30, p_.num_q_heads = p_.num_kv_heads = 65536, p_.head_dim = 65536,
               p_.kv_dtype = ANYATTN_KV_FP8_E4M3),
              ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM, "head_dim");

  anyattn_problem p;
  anyattn_limits l;
  good_problem(&p);
  good_limits(&l);
  anyattn_plan *plan = NULL, *plan16 = NULL;
  EXPECT(anyattn_plan_create(ctx, &p, &l, &plan16), ANYATTN_STATUS_OK, NULL);
  p.kv_dtype = ANYATTN_KV_FP8_E4M3;
  EXPECT(anyattn_plan_create(ctx, &p, &l, &plan), ANYATTN_STATUS_OK, NULL);
  if (!plan || !plan16) {
    anyattn_plan_free(plan);
    anyattn_plan_free(plan16);
    return;
  }
  g_ws = anyattn_plan_workspace_size(plan) > anyattn_plan_workspace_size(plan16) ? anyattn_plan_workspace_size(plan)
                                                                                 : anyattn_plan_workspace_size(plan16);
  for (size_t i = 0; i < sizeof k_buf / 2; i++) k_buf[i] = v_buf[i] = 0x3838; /* fp8 codes 0x38: 1.0 */
  static float ds[8] __attribute__((aligned(16))) = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_RUN((void)0, ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN((t_.k_descale = ds, t_.v_descale = ds), ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN((t_.k_descale = ds, t_.v_descale = ds, t_.descale_layout = ANYATTN_DESCALE_PER_SEQ_HEAD),
             ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN(t_.descale_layout = (anyattn_descale_layout)2, ANYATTN_STATUS_INVALID_OPTION, "tensors->descale_layout");
  EXPECT_RUN(t_.descale_layout = (anyattn_descale_layout)-1, ANYATTN_STATUS_INVALID_OPTION, "tensors->descale_layout");
  EXPECT_RUN(t_.k_descale = (const float *)((const char *)ds + 2), ANYATTN_STATUS_BAD_STRIDE, "k_descale");
  EXPECT_RUN(t_.v_descale = (const float *)((const char *)ds + 1), ANYATTN_STATUS_BAD_STRIDE, "v_descale");
  /* One-byte elements: any cache address, strides and bounds in bytes. */
  EXPECT_RUN((t_.k_cache = (const char *)k_buf + 1, t_.v_cache = (const char *)v_buf + 3), ANYATTN_STATUS_OK, NULL);
  EXPECT_RUN(t_.q = (const char *)q_buf + 1, ANYATTN_STATUS_BAD_STRIDE, "tensors->q");
  const int64_t page8 = (int64_t)T_BS * T_HKV * T_D;
  EXPECT_RUN(t_.num_blocks = PTRDIFF_MAX / page8 + 1, ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  EXPECT_RUN(t_.num_blocks = PTRDIFF_MAX / page8, ANYATTN_STATUS_OK, NULL); /* twice the 16-bit bound */
  EXPECT_RUN((t_.k_stride_block = INT64_MAX / 3, t_.k_stride_token = 128, t_.k_stride_head = 64),
             ANYATTN_STATUS_BAD_STRIDE, "tensors->k strides");
  EXPECT_RUN((t_.k_stride_block = 2048, t_.k_stride_token = 128, t_.k_stride_head = 32), ANYATTN_STATUS_BAD_STRIDE,
             "tensors->k");
  EXPECT_RUN((t_.v_stride_block = 2048, t_.v_stride_token = 64, t_.v_stride_head = 1024), ANYATTN_STATUS_OK, NULL);
  /* Descales with 16-bit caches are refused, not ignored. */
  EXPECT_RUN((pl_ = plan16, t_.k_descale = ds), ANYATTN_STATUS_INVALID_OPTION, "tensors->k_descale");
  EXPECT_RUN((pl_ = plan16, t_.v_descale = ds), ANYATTN_STATUS_INVALID_OPTION, "tensors->v_descale");
  EXPECT_RUN((pl_ = plan16, t_.num_blocks = PTRDIFF_MAX / page8), ANYATTN_STATUS_INVALID_SIZE, "num_blocks");
  anyattn_plan_free(plan);
  anyattn_plan_free(plan16);
}

int main(void) {
  test_version_and_names();
  test_backends_and_contexts();
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) != ANYATTN_STATUS_OK) {
    printf("FAIL: CPU context: %s\n", anyattn_last_error());
    return 1;
  }
  test_plan(ctx);
  test_run_and_validate(ctx);
  test_wide_windows(ctx);
  test_fp8(ctx);
  anyattn_context_free(ctx);
  printf("test_api_misuse: %d checks, %d failures\n", checks, failures);
  printf("not provokable here: DEVICE_ERROR (needs a GPU fault), OUT_OF_MEMORY (host malloc failure), "
         "WRONG_CONTEXT (no API call can mix contexts yet)\n");
  return failures ? 1 : 0;
}
