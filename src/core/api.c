/* api.c: the public entry points. Everything the host can check is checked
 * here, once, for every backend; backends receive normalised arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define AA_STR2(x) #x
#define AA_STR(x) AA_STR2(x)

unsigned anyattn_version_number(void) { return ANYATTN_VERSION_NUMBER; }

const char *anyattn_version_string(void) {
  return AA_STR(ANYATTN_VERSION_MAJOR) "." AA_STR(ANYATTN_VERSION_MINOR) "." AA_STR(
      ANYATTN_VERSION_PATCH);
}

size_t anyattn_dtype_size(anyattn_dtype dtype) { return aa_dtype_size(dtype); }

size_t anyattn_kv_dtype_size(anyattn_kv_dtype kv_dtype, anyattn_dtype dtype) {
  return aa_kv_dtype_size(kv_dtype, dtype);
}

const char *anyattn_kv_dtype_name(anyattn_kv_dtype kv_dtype) {
  switch (kv_dtype) {
    case ANYATTN_KV_AS_Q: return "as_q";
    case ANYATTN_KV_FP8_E4M3: return "fp8_e4m3";
    case ANYATTN_KV_FP8_E4M3FNUZ: return "fp8_e4m3fnuz";
  }
  return "unknown";
}

/* ---- backends and devices -------------------------------------------- */
const char *anyattn_backend_name(anyattn_backend backend) {
  switch (backend) {
    case ANYATTN_BACKEND_AUTO: return "auto";
    case ANYATTN_BACKEND_CPU: return "cpu";
    case ANYATTN_BACKEND_CUDA: return "cuda";
    case ANYATTN_BACKEND_HIP: return "hip";
  }
  return "unknown";
}

anyattn_status anyattn_backend_from_name(const char *name, anyattn_backend *backend) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(name, "name");
  AA_CHECK_NOT_NULL(backend, "backend");
  static const anyattn_backend all[] = {ANYATTN_BACKEND_AUTO, ANYATTN_BACKEND_CPU,
                                        ANYATTN_BACKEND_CUDA, ANYATTN_BACKEND_HIP};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (strcmp(name, anyattn_backend_name(all[i])) == 0) {
      *backend = all[i];
      return ANYATTN_STATUS_OK;
    }
  }
  return aa_error(ANYATTN_STATUS_BACKEND_UNAVAILABLE,
                  "backend name '%s' is not one of auto, cpu, cuda, hip", name);
}

int anyattn_backend_compiled(anyattn_backend backend) {
  return backend == ANYATTN_BACKEND_AUTO || aa_backend_ops_of(backend) != NULL;
}

/* The table of a named backend, or BACKEND_UNAVAILABLE naming it. */
static anyattn_status aa_ops_of(anyattn_backend backend, const aa_backend_ops **ops) {
  *ops = aa_backend_ops_of(backend);
  AA_CHECK(backend >= ANYATTN_BACKEND_AUTO && backend <= ANYATTN_BACKEND_HIP, ANYATTN_STATUS_BACKEND_UNAVAILABLE,
           "backend %d is not a known backend", (int)backend);
  AA_CHECK(*ops != NULL, ANYATTN_STATUS_BACKEND_UNAVAILABLE, "backend '%s' is not compiled into this library",
           anyattn_backend_name(backend));
  return ANYATTN_STATUS_OK;
}

/* AUTO: CUDA, then HIP, then the CPU. Leaves no error behind when it falls back. */
static anyattn_backend aa_resolve_auto(void) {
  static const anyattn_backend gpus[] = {ANYATTN_BACKEND_CUDA, ANYATTN_BACKEND_HIP};
  for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
    const aa_backend_ops *ops = aa_backend_ops_of(gpus[i]);
    int n = 0;
    if (ops && ops->device_count(&n) == ANYATTN_STATUS_OK && n > 0) return gpus[i];
  }
  aa_clear_error();
  return ANYATTN_BACKEND_CPU;
}

anyattn_status anyattn_device_count(anyattn_backend backend, int *count) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(count, "count");
  *count = 0;
  if (backend == ANYATTN_BACKEND_AUTO) backend = aa_resolve_auto();
  const aa_backend_ops *ops;
  AA_TRY(aa_ops_of(backend, &ops));
  return ops->device_count(count);
}

/* Fills a context for ctx->backend (resolved) and ctx->device. */
static anyattn_status aa_context_init(anyattn_context *ctx) {
  AA_TRY(aa_ops_of(ctx->backend, &ctx->ops));
  AA_TRY(ctx->ops->context_init(ctx));
  if (ctx->family[0] == '\0' && ctx->backend == ANYATTN_BACKEND_CUDA)
    snprintf(ctx->family, sizeof ctx->family, "sm_%d", ctx->arch);
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_device_name(anyattn_backend backend, int device, char *buf, size_t buf_size) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(buf, "buf");
  AA_CHECK(buf_size > 0, ANYATTN_STATUS_INVALID_SIZE, "buf_size is 0");
  anyattn_context tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.backend = backend == ANYATTN_BACKEND_AUTO ? aa_resolve_auto() : backend;
  tmp.device = device;
  AA_TRY(aa_context_init(&tmp));
  snprintf(buf, buf_size, "%s", tmp.device_name);
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_context_create(anyattn_backend backend, int device, anyattn_context **ctx) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(ctx, "ctx");
  *ctx = NULL;
  AA_CHECK(device >= 0, ANYATTN_STATUS_INVALID_SIZE, "device is %d, must be >= 0", device);
  anyattn_context *c = (anyattn_context *)calloc(1, sizeof *c);
  AA_CHECK(c != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "context allocation failed");
  c->backend = backend == ANYATTN_BACKEND_AUTO ? aa_resolve_auto() : backend;
  c->device = device;
  const anyattn_status s = aa_context_init(c);
  if (s != ANYATTN_STATUS_OK) {
    free(c);
    return s;
  }
  *ctx = c;
  return ANYATTN_STATUS_OK;
}

void anyattn_context_free(anyattn_context *ctx) { free(ctx); }

anyattn_backend anyattn_context_backend(const anyattn_context *ctx) {
  return ctx ? ctx->backend : ANYATTN_BACKEND_AUTO;
}

int anyattn_context_device(const anyattn_context *ctx) { return ctx ? ctx->device : -1; }

/* ---- struct initialisers ---------------------------------------------- */
void anyattn_problem_init(anyattn_problem *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->dtype = ANYATTN_DTYPE_BF16;
  p->block_size = 16;
  p->window_left = -1;
  p->window_right = -1;
  p->kv_dtype = ANYATTN_KV_AS_Q;
}

void anyattn_limits_init(anyattn_limits *l) {
  if (!l) return;
  memset(l, 0, sizeof *l);
  l->struct_size = sizeof *l;
}

void anyattn_batch_init(anyattn_batch *b) {
  if (!b) return;
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
}

void anyattn_tensors_init(anyattn_tensors *t) {
  if (!t) return;
  memset(t, 0, sizeof *t);
  t->struct_size = sizeof *t;
  t->k_descale = NULL;
  t->v_descale = NULL;
  t->descale_layout = ANYATTN_DESCALE_PER_TENSOR;
  t->alibi_slopes_dtype = ANYATTN_DTYPE_F32;
  t->sinks_dtype = ANYATTN_DTYPE_F32;
}

/* ---- sizes ------------------------------------------------------------------ */
/* Core's bounds (anyattn.h): heads and head_dim up to 65536, the limits up to
 * INT32_MAX (their type), and no tensor a plan or run admits larger than
 * PTRDIFF_MAX bytes, so that every element offset a backend forms from these
 * sizes fits an int64_t / ptrdiff_t. Backends check their narrower support. */
#define AA_MAX_HEADS 65536
#define AA_MAX_HEAD_DIM 65536
/* Contexts up to 2^29 keys: position + window + 1 and tile counts times
 * segments then stay within the 32-bit arithmetic of the kernels. */
#define AA_MAX_CONTEXT (1 << 29)
/* batch->q_pos: query positions within [-2^29, 2^29) (see anyattn_validate). */
#define AA_QPOS_MAX (1 << 29)

/* *out = a * b * c * d with no overflow and *out <= PTRDIFF_MAX; 0 otherwise.
 * Every factor must be >= 0. */
static int aa_size_product(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *out) {
  int64_t ab, abc;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
      __builtin_mul_overflow(abc, d, out))
    return 0;
  return (uint64_t)*out <= (uint64_t)PTRDIFF_MAX;
}

/* ---- plan ---------------------------------------------------------------- */
static anyattn_status aa_check_problem(const anyattn_problem *p) {
  AA_CHECK(p->struct_size == sizeof *p, ANYATTN_STATUS_STRUCT_SIZE,
           "problem->struct_size is %zu, this library expects %zu (use anyattn_problem_init)",
           p->struct_size, sizeof *p);
  AA_CHECK(p->num_q_heads > 0 && p->num_q_heads <= AA_MAX_HEADS, ANYATTN_STATUS_INVALID_SIZE,
           "problem->num_q_heads is %d, must be in 1..%d", p->num_q_heads, AA_MAX_HEADS);
  AA_CHECK(p->num_kv_heads > 0 && p->num_kv_heads <= AA_MAX_HEADS, ANYATTN_STATUS_INVALID_SIZE,
           "problem->num_kv_heads is %d, must be in 1..%d", p->num_kv_heads, AA_MAX_HEADS);
  AA_CHECK(p->num_q_heads % p->num_kv_heads == 0, ANYATTN_STATUS_HEAD_RATIO,
           "problem->num_q_heads (%d) is not a multiple of problem->num_kv_heads (%d)",
           p->num_q_heads, p->num_kv_heads);
  AA_CHECK(p->head_dim > 0 && p->head_dim <= AA_MAX_HEAD_DIM, ANYATTN_STATUS_INVALID_SIZE,
           "problem->head_dim is %d, must be in 1..%d", p->head_dim, AA_MAX_HEAD_DIM);
  AA_CHECK(anyattn_dtype_size(p->dtype) != 0, ANYATTN_STATUS_UNSUPPORTED_DTYPE,
           "problem->dtype is %d, not one of F32 (0), F16 (1), BF16 (2)", (int)p->dtype);
  AA_CHECK(p->block_size > 0, ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE,
           "problem->block_size is %d, must be >= 1", p->block_size);
  AA_CHECK(p->causal == 0 || p->causal == 1, ANYATTN_STATUS_INVALID_OPTION,
           "problem->causal is %d, must be 0 or 1", p->causal);
  AA_CHECK(p->window_left >= -1, ANYATTN_STATUS_INVALID_OPTION,
           "problem->window_left is %d, must be -1 (unbounded) or >= 0", p->window_left);
  AA_CHECK(p->window_right >= -1, ANYATTN_STATUS_INVALID_OPTION,
           "problem->window_right is %d, must be -1 (unbounded) or >= 0", p->window_right);
  AA_CHECK(p->scale == 0.0f || (isfinite(p->scale) && p->scale > 0.0f), ANYATTN_STATUS_INVALID_OPTION,
           "problem->scale is %g, must be 0 (default) or finite and > 0", (double)p->scale);
  AA_CHECK(isfinite(p->softcap) && p->softcap >= 0.0f, ANYATTN_STATUS_INVALID_OPTION,
           "problem->softcap is %g, must be 0 (off) or finite and > 0", (double)p->softcap);
  AA_CHECK(p->kv_dtype >= ANYATTN_KV_AS_Q && p->kv_dtype <= ANYATTN_KV_FP8_E4M3FNUZ, ANYATTN_STATUS_INVALID_OPTION,
           "problem->kv_dtype is %d, not one of AS_Q (0), FP8_E4M3 (1), FP8_E4M3FNUZ (2)", (int)p->kv_dtype);
  AA_CHECK(p->kv_dtype == ANYATTN_KV_AS_Q || p->dtype == ANYATTN_DTYPE_BF16 || p->dtype == ANYATTN_DTYPE_F16,
           ANYATTN_STATUS_UNSUPPORTED_OPTION,
           "problem->kv_dtype %s needs problem->dtype BF16 or F16 (fp8 codes widen to the 16-bit compute type), "
           "dtype is %d", anyattn_kv_dtype_name(p->kv_dtype), (int)p->dtype);
  const size_t kes = anyattn_kv_dtype_size(p->kv_dtype, p->dtype);
  int64_t page;
  AA_CHECK(aa_size_product(p->block_size, p->num_kv_heads, p->head_dim, (int64_t)kes, &page),
           ANYATTN_STATUS_INVALID_SIZE,
           "problem->block_size %d x num_kv_heads %d x head_dim %d x %zu bytes: one cache page is over "
           "PTRDIFF_MAX bytes", p->block_size, p->num_kv_heads, p->head_dim, kes);
  return ANYATTN_STATUS_OK;
}

static anyattn_status aa_check_limits(const anyattn_limits *l) {
  AA_CHECK(l->struct_size == sizeof *l, ANYATTN_STATUS_STRUCT_SIZE,
           "limits->struct_size is %zu, this library expects %zu (use anyattn_limits_init)",
           l->struct_size, sizeof *l);
  AA_CHECK(l->max_seqs > 0, ANYATTN_STATUS_INVALID_SIZE, "limits->max_seqs is %d, must be > 0",
           l->max_seqs);
  AA_CHECK(l->max_tokens > 0, ANYATTN_STATUS_INVALID_SIZE, "limits->max_tokens is %d, must be > 0",
           l->max_tokens);
  AA_CHECK(l->max_context > 0 && l->max_context <= AA_MAX_CONTEXT, ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_context is %d, must be in 1..%d", l->max_context, AA_MAX_CONTEXT);
  AA_CHECK(l->stage_kv_tokens >= 0 && l->stage_kv_tokens <= AA_MAX_CONTEXT, ANYATTN_STATUS_INVALID_SIZE,
           "limits->stage_kv_tokens is %d, must be in 0..%d", l->stage_kv_tokens, AA_MAX_CONTEXT);
  return ANYATTN_STATUS_OK;
}

/* q and out hold max_tokens x num_q_heads x head_dim elements: they must be
 * addressable. (lse, max_tokens x num_q_heads fp32, is under 2^49 bytes.) */
static anyattn_status aa_check_plan_sizes(const anyattn_problem *p, const anyattn_limits *l) {
  int64_t q_bytes;
  AA_CHECK(aa_size_product(l->max_tokens, p->num_q_heads, p->head_dim, (int64_t)anyattn_dtype_size(p->dtype), &q_bytes),
           ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_tokens %d x problem->num_q_heads %d x head_dim %d x %zu bytes: q and out would be over "
           "PTRDIFF_MAX bytes", l->max_tokens, p->num_q_heads, p->head_dim, anyattn_dtype_size(p->dtype));
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_plan_create(anyattn_context *ctx, const anyattn_problem *problem,
                                   const anyattn_limits *limits, anyattn_plan **plan) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(plan, "plan");
  *plan = NULL;
  AA_CHECK_NOT_NULL(ctx, "ctx");
  AA_CHECK_NOT_NULL(problem, "problem");
  AA_CHECK_NOT_NULL(limits, "limits");
  AA_TRY(aa_check_problem(problem));
  AA_TRY(aa_check_limits(limits));
  AA_TRY(aa_check_plan_sizes(problem, limits));

  anyattn_plan *p = (anyattn_plan *)calloc(1, sizeof *p);
  AA_CHECK(p != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  p->ctx = ctx;
  p->ops = ctx->ops;
  p->problem = *problem;
  p->limits = *limits;
  p->group = problem->num_q_heads / problem->num_kv_heads;
  /* A window at least as wide as any key-query distance bounds nothing: store
   * it as unbounded, so no backend adds it to a position. Keys lie in
   * [0, max_context) and queries (batch q_pos) in [-2^29, 2^29), so distances
   * stay under max_context + 2^29; a window kept is below 2^30 and position
   * +- window stays inside int32. */
  if (p->problem.window_left >= limits->max_context + AA_QPOS_MAX) p->problem.window_left = -1;
  if (p->problem.window_right >= limits->max_context + AA_QPOS_MAX) p->problem.window_right = -1;
  p->scale = problem->scale != 0.0f ? problem->scale : (float)(1.0 / sqrt((double)problem->head_dim));
  anyattn_status s = p->ops->plan(p); /* may read p->problem.config */
  p->problem.config = NULL;
  if (s != ANYATTN_STATUS_OK) {
    p->ops->plan_free(p);
    free(p);
    return s;
  }
  *plan = p;
  return ANYATTN_STATUS_OK;
}

void anyattn_plan_free(anyattn_plan *plan) {
  if (!plan) return;
  plan->ops->plan_free(plan);
  free(plan);
}

size_t anyattn_plan_workspace_size(const anyattn_plan *plan) { return plan ? plan->workspace_size : 0; }

const char *anyattn_plan_describe(const anyattn_plan *plan) { return plan ? plan->describe : ""; }

/* ---- run ------------------------------------------------------------------ */
/* Fills zero strides with the dense NHD layout, then checks that the
 * (block, token, head) -> offset map, with head_dim contiguous, has no
 * two rows overlapping, and that the cache spans at most PTRDIFF_MAX bytes
 * (plan bounded one page; num_blocks and the strides come with the call). */
static anyattn_status aa_resolve_strides(const anyattn_problem *pr, int64_t num_blocks, const char *which,
                                         int64_t in_b, int64_t in_t, int64_t in_h, int64_t *out) {
  const int64_t d = pr->head_dim, es = (int64_t)anyattn_kv_dtype_size(pr->kv_dtype, pr->dtype);
  if (in_b == 0 && in_t == 0 && in_h == 0) {
    out[0] = (int64_t)pr->block_size * pr->num_kv_heads * d; /* < PTRDIFF_MAX: aa_check_problem */
    out[1] = (int64_t)pr->num_kv_heads * d;
    out[2] = d;
    int64_t bytes;
    AA_CHECK(aa_size_product(num_blocks, out[0], es, 1, &bytes), ANYATTN_STATUS_INVALID_SIZE,
             "tensors->num_blocks is %lld: %lld pages of %lld elements are over PTRDIFF_MAX bytes",
             (long long)num_blocks, (long long)num_blocks, (long long)out[0]);
    return ANYATTN_STATUS_OK;
  }
  AA_CHECK(in_b > 0 && in_t > 0 && in_h > 0, ANYATTN_STATUS_BAD_STRIDE,
           "tensors->%s_stride_{block,token,head} are %lld, %lld, %lld: all must be > 0 (or all 0 for NHD)",
           which, (long long)in_b, (long long)in_t, (long long)in_h);
  int64_t stride[3] = {in_b, in_t, in_h};
  int64_t size[3] = {num_blocks, pr->block_size, pr->num_kv_heads};
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++) /* sort dims by stride, ascending */
    for (int j = i + 1; j < 3; j++)
      if (stride[order[j]] < stride[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  int64_t extent = d; /* elements spanned by the dims checked so far */
  for (int i = 0; i < 3; i++) {
    int k = order[i];
    if (size[k] <= 1) continue;
    AA_CHECK(stride[k] >= extent, ANYATTN_STATUS_BAD_STRIDE,
             "tensors->%s strides (%lld, %lld, %lld) make cache rows overlap", which, (long long)in_b,
             (long long)in_t, (long long)in_h);
    AA_CHECK(aa_size_product(stride[k], size[k], es, 1, &extent), ANYATTN_STATUS_BAD_STRIDE,
             "tensors->%s strides (%lld, %lld, %lld) over tensors->num_blocks %lld span more than PTRDIFF_MAX bytes",
             which, (long long)in_b, (long long)in_t, (long long)in_h, (long long)num_blocks);
    extent /= es;
  }
  out[0] = in_b;
  out[1] = in_t;
  out[2] = in_h;
  return ANYATTN_STATUS_OK;
}

static anyattn_status aa_check_batch_sizes(const anyattn_plan *plan, const anyattn_batch *b) {
  AA_CHECK(b->struct_size == sizeof *b, ANYATTN_STATUS_STRUCT_SIZE,
           "batch->struct_size is %zu, this library expects %zu (use anyattn_batch_init)",
           b->struct_size, sizeof *b);
  AA_CHECK(b->prior_writes == ANYATTN_PRIOR_WRITES_ANY || b->prior_writes == ANYATTN_PRIOR_WRITES_NEW_KEYS,
           ANYATTN_STATUS_INVALID_OPTION, "batch->prior_writes is %d, not one of ANY (0), NEW_KEYS (1)",
           (int)b->prior_writes);
  AA_CHECK(b->num_seqs >= 0, ANYATTN_STATUS_INVALID_SIZE, "batch->num_seqs is %d, must be >= 0",
           b->num_seqs);
  AA_CHECK(b->num_seqs <= plan->limits.max_seqs, ANYATTN_STATUS_LIMIT_EXCEEDED,
           "batch->num_seqs is %d, over the plan's limits.max_seqs %d", b->num_seqs,
           plan->limits.max_seqs);
  AA_CHECK(b->num_tokens >= 0, ANYATTN_STATUS_INVALID_SIZE, "batch->num_tokens is %d, must be >= 0",
           b->num_tokens);
  AA_CHECK(b->num_tokens <= plan->limits.max_tokens, ANYATTN_STATUS_LIMIT_EXCEEDED,
           "batch->num_tokens is %d, over the plan's limits.max_tokens %d", b->num_tokens,
           plan->limits.max_tokens);
  AA_CHECK(b->num_tokens == 0 || b->num_seqs > 0, ANYATTN_STATUS_INVALID_SIZE,
           "batch->num_tokens is %d with batch->num_seqs 0", b->num_tokens);
  if (b->num_seqs > 0) {
    AA_CHECK_NOT_NULL(b->cu_seqlens_q, "batch->cu_seqlens_q");
    AA_CHECK_NOT_NULL(b->seq_lens_k, "batch->seq_lens_k");
    AA_CHECK_NOT_NULL(b->block_table, "batch->block_table");
    AA_CHECK(b->block_table_stride > 0, ANYATTN_STATUS_INVALID_SIZE,
             "batch->block_table_stride is %d, must be > 0", b->block_table_stride);
  }
  AA_CHECK(b->max_q_len >= 0, ANYATTN_STATUS_INVALID_SIZE, "batch->max_q_len is %d, must be >= 0",
           b->max_q_len);
  AA_CHECK(b->max_kv_len >= 0 && b->max_kv_len <= plan->limits.max_context, ANYATTN_STATUS_INVALID_SIZE,
           "batch->max_kv_len is %d, must be in [0, limits.max_context=%d]", b->max_kv_len,
           plan->limits.max_context);
  /* A bound past every sequence at its longest says nothing and is a mistake. */
  const int64_t kv_bound = b->max_kv_len > 0 ? b->max_kv_len : plan->limits.max_context;
  AA_CHECK(b->sum_kv_len >= 0 && b->sum_kv_len <= (int64_t)b->num_seqs * kv_bound, ANYATTN_STATUS_INVALID_SIZE,
           "batch->sum_kv_len is %lld, must be in [0, num_seqs * %s = %lld]", (long long)b->sum_kv_len,
           b->max_kv_len > 0 ? "max_kv_len" : "limits.max_context", (long long)b->num_seqs * kv_bound);
  return ANYATTN_STATUS_OK;
}

/* The descales belong to fp8 caches: with 16-bit caches a non-NULL one is a
 * mistake (the caller would expect it applied). They are device memory on
 * GPUs, so only their presence, alignment and layout are checked here. */
static anyattn_status aa_check_descales(const anyattn_problem *pr, const anyattn_tensors *t) {
  AA_CHECK(t->descale_layout == ANYATTN_DESCALE_PER_TENSOR || t->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD,
           ANYATTN_STATUS_INVALID_OPTION,
           "tensors->descale_layout is %d, not one of PER_TENSOR (0), PER_SEQ_HEAD (1)", (int)t->descale_layout);
  AA_CHECK(t->k_descale == NULL || pr->kv_dtype != ANYATTN_KV_AS_Q, ANYATTN_STATUS_INVALID_OPTION,
           "tensors->k_descale is not NULL while problem->kv_dtype is AS_Q (descales apply to fp8 caches only)");
  AA_CHECK(t->v_descale == NULL || pr->kv_dtype != ANYATTN_KV_AS_Q, ANYATTN_STATUS_INVALID_OPTION,
           "tensors->v_descale is not NULL while problem->kv_dtype is AS_Q (descales apply to fp8 caches only)");
  AA_CHECK(((uintptr_t)t->k_descale % 4) == 0 && ((uintptr_t)t->v_descale % 4) == 0, ANYATTN_STATUS_BAD_STRIDE,
           "tensors->k_descale and v_descale must be 4-byte aligned");
  return ANYATTN_STATUS_OK;
}

static int aa_aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* alibi_slopes and sinks: fp32, bf16 or f16, aligned to their element. */
static anyattn_status aa_check_vector(const char *name, const void *v, anyattn_dtype dt) {
  AA_CHECK(dt == ANYATTN_DTYPE_F32 || dt == ANYATTN_DTYPE_BF16 || dt == ANYATTN_DTYPE_F16,
           ANYATTN_STATUS_INVALID_OPTION, "tensors->%s_dtype is %d, not one of F32 (0), F16 (1), BF16 (2)", name,
           (int)dt);
  AA_CHECK(aa_aligned(v, anyattn_dtype_size(dt)), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->%s is not aligned to its %zu-byte elements", name, anyattn_dtype_size(dt));
  return ANYATTN_STATUS_OK;
}

/* The batch's part of a backend's arguments (the rest zero). */
static void aa_batch_args(anyattn_args *a, const anyattn_batch *b) {
  memset(a, 0, sizeof *a);
  a->num_seqs = b->num_seqs;
  a->num_tokens = b->num_tokens;
  a->cu_seqlens_q = b->cu_seqlens_q;
  a->seq_lens_k = b->seq_lens_k;
  a->q_pos = b->q_pos;
  a->prior_writes = (int)b->prior_writes;
  a->block_table = b->block_table;
  a->block_table_stride = b->block_table_stride;
  a->max_q_len = b->max_q_len;
  a->max_kv_len = b->max_kv_len;
  a->sum_kv_len = b->sum_kv_len;
}

/* What run checks of a workspace, for run and prepare alike. */
static anyattn_status aa_check_workspace(const anyattn_plan *plan, const void *workspace, size_t workspace_size) {
  AA_CHECK(workspace_size >= plan->workspace_size, ANYATTN_STATUS_WORKSPACE_TOO_SMALL,
           "workspace_size is %zu bytes, the plan needs %zu", workspace_size, plan->workspace_size);
  AA_CHECK(plan->workspace_size == 0 || workspace != NULL, ANYATTN_STATUS_NULL_POINTER,
           "workspace is NULL, the plan needs %zu bytes", plan->workspace_size);
  AA_CHECK(aa_aligned(workspace, 256), ANYATTN_STATUS_BAD_STRIDE,
           "workspace %p is not 256-byte aligned", workspace);
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_workspace_prepare(const anyattn_plan *plan, void *workspace, size_t workspace_size,
                                         void *stream) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(plan, "plan");
  AA_TRY(aa_check_workspace(plan, workspace, workspace_size));
  if (plan->workspace_size == 0 || !plan->ops->workspace_prepare) return ANYATTN_STATUS_OK;
  return plan->ops->workspace_prepare(plan, workspace, stream);
}

anyattn_status anyattn_run(const anyattn_plan *plan, const anyattn_batch *batch,
                           const anyattn_tensors *t, void *workspace, size_t workspace_size, void *stream) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(plan, "plan");
  AA_CHECK_NOT_NULL(batch, "batch");
  AA_CHECK_NOT_NULL(t, "tensors");
  AA_TRY(aa_check_batch_sizes(plan, batch));
  AA_CHECK(t->struct_size == sizeof *t, ANYATTN_STATUS_STRUCT_SIZE,
           "tensors->struct_size is %zu, this library expects %zu (use anyattn_tensors_init)",
           t->struct_size, sizeof *t);
  AA_TRY(aa_check_workspace(plan, workspace, workspace_size));

  const anyattn_problem *pr = &plan->problem;
  const size_t es = anyattn_dtype_size(pr->dtype), kes = anyattn_kv_dtype_size(pr->kv_dtype, pr->dtype);
  AA_TRY(aa_check_descales(pr, t));
  AA_TRY(aa_check_vector("alibi_slopes", t->alibi_slopes, t->alibi_slopes_dtype));
  AA_TRY(aa_check_vector("sinks", t->sinks, t->sinks_dtype));
  anyattn_args a;
  aa_batch_args(&a, batch);
  a.q = t->q;
  a.k_cache = t->k_cache;
  a.v_cache = t->v_cache;
  a.num_blocks = t->num_blocks;
  a.alibi_slopes = t->alibi_slopes;
  a.sinks = t->sinks;
  a.alibi_slopes_dtype = t->alibi_slopes_dtype;
  a.sinks_dtype = t->sinks_dtype;
  a.out = t->out;
  a.lse = t->lse;
  a.workspace = workspace;
  a.workspace_size = workspace_size;
  a.stream = stream;
  a.k_descale = t->k_descale;
  a.v_descale = t->v_descale;
  a.descale_layout = t->descale_layout;

  if (batch->num_tokens == 0) return ANYATTN_STATUS_OK; /* nothing to compute or write */

  AA_CHECK_NOT_NULL(t->q, "tensors->q");
  AA_CHECK_NOT_NULL(t->k_cache, "tensors->k_cache");
  AA_CHECK_NOT_NULL(t->v_cache, "tensors->v_cache");
  AA_CHECK_NOT_NULL(t->out, "tensors->out");
  AA_CHECK(t->num_blocks > 0, ANYATTN_STATUS_INVALID_SIZE, "tensors->num_blocks is %lld, must be > 0",
           (long long)t->num_blocks);
  AA_CHECK(aa_aligned(t->q, es) && aa_aligned(t->out, es), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->q and out must be aligned to %zu bytes", es);
  AA_CHECK(aa_aligned(t->k_cache, kes) && aa_aligned(t->v_cache, kes), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->k_cache and v_cache must be aligned to %zu bytes", kes);
  AA_CHECK(t->lse == NULL || aa_aligned(t->lse, 4), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->lse is not 4-byte aligned");
  int64_t ks[3], vs[3];
  AA_TRY(aa_resolve_strides(pr, t->num_blocks, "k", t->k_stride_block, t->k_stride_token,
                            t->k_stride_head, ks));
  AA_TRY(aa_resolve_strides(pr, t->num_blocks, "v", t->v_stride_block, t->v_stride_token,
                            t->v_stride_head, vs));
  a.k_stride_block = ks[0];
  a.k_stride_token = ks[1];
  a.k_stride_head = ks[2];
  a.v_stride_block = vs[0];
  a.v_stride_token = vs[1];
  a.v_stride_head = vs[2];
  return plan->ops->run(plan, &a);
}

anyattn_status anyattn_run_describe(const anyattn_plan *plan, const anyattn_batch *batch, char *buf,
                                    size_t buf_size) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(plan, "plan");
  AA_CHECK_NOT_NULL(batch, "batch");
  AA_CHECK_NOT_NULL(buf, "buf");
  AA_CHECK(buf_size > 0, ANYATTN_STATUS_INVALID_SIZE, "buf_size is 0");
  buf[0] = '\0';
  AA_TRY(aa_check_batch_sizes(plan, batch));
  anyattn_args a;
  aa_batch_args(&a, batch);
  if (!plan->ops->describe_run) {
    snprintf(buf, buf_size, "%s", plan->describe);
    return ANYATTN_STATUS_OK;
  }
  return plan->ops->describe_run(plan, &a, buf, buf_size);
}

/* ---- validate -------------------------------------------------------------- */
anyattn_status anyattn_validate(const anyattn_plan *plan, const anyattn_batch *b, int64_t num_blocks) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(plan, "plan");
  AA_CHECK_NOT_NULL(b, "host_batch");
  AA_TRY(aa_check_batch_sizes(plan, b));
  AA_CHECK(num_blocks > 0 || b->num_tokens == 0, ANYATTN_STATUS_INVALID_SIZE,
           "num_blocks is %lld, must be > 0", (long long)num_blocks);
  if (b->num_seqs == 0) return ANYATTN_STATUS_OK;
  const int bs = plan->problem.block_size;
  const int32_t *cu = b->cu_seqlens_q;
  int64_t kv_sum = 0; /* num_seqs * max_context fits: both are int */
  AA_CHECK(cu[0] == 0, ANYATTN_STATUS_BAD_METADATA, "cu_seqlens_q[0] is %d, must be 0", cu[0]);
  for (int s = 0; s < b->num_seqs; s++) {
    AA_CHECK(cu[s + 1] >= cu[s], ANYATTN_STATUS_BAD_METADATA,
             "cu_seqlens_q decreases at index %d (%d after %d)", s + 1, cu[s + 1], cu[s]);
    const int q_len = cu[s + 1] - cu[s];
    const int kv_len = b->seq_lens_k[s];
    AA_CHECK(kv_len >= 0, ANYATTN_STATUS_BAD_METADATA, "seq_lens_k[%d] is %d, must be >= 0", s, kv_len);
    AA_CHECK(kv_len <= plan->limits.max_context, ANYATTN_STATUS_BAD_METADATA,
             "seq_lens_k[%d] is %d, over the plan's limits.max_context %d", s, kv_len,
             plan->limits.max_context);
    if (b->q_pos) {
      /* every position p = q_pos + i in [-2^29, 2^29): p, p +- a window (< 2^30,
       * see plan_create) and key - p stay inside int32 on every backend */
      const int64_t qp = b->q_pos[s];
      AA_CHECK(qp >= -AA_QPOS_MAX && qp + q_len <= AA_QPOS_MAX, ANYATTN_STATUS_BAD_METADATA,
               "q_pos[%d] is %lld with q_len %d: the positions q_pos .. q_pos + q_len must lie in "
               "[-2^29, 2^29]", s, (long long)qp, q_len);
    } else {
      AA_CHECK(q_len <= kv_len, ANYATTN_STATUS_BAD_METADATA,
               "sequence %d has q_len %d > seq_lens_k[%d] %d (allowed only with batch->q_pos)", s, q_len, s,
               kv_len);
    }
    AA_CHECK(b->max_q_len == 0 || q_len <= b->max_q_len, ANYATTN_STATUS_BAD_METADATA,
             "sequence %d has q_len %d > batch->max_q_len %d", s, q_len, b->max_q_len);
    AA_CHECK(b->max_kv_len == 0 || kv_len <= b->max_kv_len, ANYATTN_STATUS_BAD_METADATA,
             "seq_lens_k[%d] is %d > batch->max_kv_len %d", s, kv_len, b->max_kv_len);
    kv_sum += kv_len;
    const int64_t pages = ((int64_t)kv_len + bs - 1) / bs;
    AA_CHECK(pages <= b->block_table_stride, ANYATTN_STATUS_BAD_METADATA,
             "sequence %d needs %lld pages, block_table_stride is %d", s, (long long)pages,
             b->block_table_stride);
    if (q_len == 0) continue; /* run reads nothing for it */
    const int32_t *row = b->block_table + (int64_t)s * b->block_table_stride;
    for (int64_t j = 0; j < pages; j++)
      AA_CHECK(row[j] >= 0 && row[j] < num_blocks, ANYATTN_STATUS_BAD_METADATA,
               "block_table[%d][%lld] is %d, outside [0, num_blocks=%lld)", s, (long long)j, row[j],
               (long long)num_blocks);
  }
  AA_CHECK(cu[b->num_seqs] <= b->num_tokens, ANYATTN_STATUS_BAD_METADATA,
           "cu_seqlens_q[num_seqs] is %d, over batch->num_tokens %d", cu[b->num_seqs], b->num_tokens);
  AA_CHECK(b->sum_kv_len == 0 || kv_sum <= b->sum_kv_len, ANYATTN_STATUS_BAD_METADATA,
           "seq_lens_k sums to %lld > batch->sum_kv_len %lld", (long long)kv_sum, (long long)b->sum_kv_len);
  return ANYATTN_STATUS_OK;
}

/* ---- configs ------------------------------------------------------------------ */
int anyattn_config_count(anyattn_backend backend) {
  const aa_backend_ops *ops = aa_backend_ops_of(backend);
  return ops ? ops->config_count() : 0;
}

anyattn_status anyattn_config_get(anyattn_backend backend, int index, anyattn_config_info *info) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(info, "info");
  AA_CHECK(info->struct_size == sizeof *info, ANYATTN_STATUS_STRUCT_SIZE,
           "info->struct_size is %zu, this library expects %zu", info->struct_size, sizeof *info);
  const aa_backend_ops *ops;
  AA_TRY(aa_ops_of(backend, &ops));
  AA_CHECK(index >= 0 && index < ops->config_count(), ANYATTN_STATUS_INVALID_SIZE,
           "index %d: backend '%s' has %d configs", index, anyattn_backend_name(backend), ops->config_count());
  return ops->config_get(index, info);
}
