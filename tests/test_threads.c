/* test_threads.c: the thread-safety contract of include/anyattn.h, exercised.
 * Several threads share one context, one plan, the caches and the batch
 * metadata; each has its own workspace, outputs and (GPU) stream, and runs
 * three batches (decode with split-KV on GPUs, prefill, mixed) many times.
 * Every output must equal, bit for bit, what one thread computed alone with
 * the same plan; that single-threaded result is checked against the double
 * reference (testkit/reference.h). Threads also create and free plans of
 * their own on the shared context while the others run, and each thread's
 * anyattn_last_error() must name its own error, whatever the others did.
 *
 * usage: test_threads [cpu|cuda] [--share-workspace] [--omp]
 *   --share-workspace breaks the contract on purpose (one workspace for all
 *   threads), to show the check catches it: expect FAIL (or a crash).
 *   --omp starts the threads as an OpenMP parallel region instead: the CPU
 *   backend's own parallel region is then nested, and runs with a team of
 *   one thread where its plan asked for more.
 * Exit: 0 pass, 1 fail, 77 skip (backend not built or no device). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

#if defined(ANYATTN_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

enum { THREADS = 8, ITERS = 40, BATCHES = 3, PLAN_EVERY = 4 };
enum { HQ = 8, HKV = 2, D = 64, BS = 16, MAX_SEQS = 8, MAX_TOKENS = 64, MAX_CONTEXT = 2048 };
#define DTYPE ANYATTN_DTYPE_BF16

/* One batch: host metadata, its device copy, and the single-threaded result. */
typedef struct {
  const char *name;
  int num_seqs, num_tokens, max_q, max_kv;
  int32_t cu[MAX_SEQS + 1], kv[MAX_SEQS], table[MAX_SEQS * (MAX_CONTEXT / BS)];
  void *d_cu, *d_kv, *d_table, *d_q; /* backend memory, read by every thread */
  void *q_host;
  unsigned char *want_out;           /* bit pattern every thread must reproduce */
  float *want_lse;
} batch_case;

typedef struct {
  anyattn_backend be;
  anyattn_context *ctx;
  const anyattn_plan *plan; /* shared by every thread */
  anyattn_problem problem;
  anyattn_limits limits;
  void *k, *v;              /* backend memory */
  int64_t num_blocks;
  batch_case b[BATCHES];
  void *shared_ws;          /* --share-workspace only */
  pthread_barrier_t barrier;
} shared_state;

typedef struct {
  shared_state *S;
  int id;
  int mismatches, errors, runs;
} thread_state;

static const int kPages = MAX_CONTEXT / BS;

static size_t out_bytes(int num_tokens) { return (size_t)num_tokens * HQ * D * anyattn_dtype_size(DTYPE); }
static size_t lse_bytes(int num_tokens) { return (size_t)num_tokens * HQ * sizeof(float); }

/* ---- a stream per thread (GPU), with the copies and fills ordered on it ---------- */
static int stream_create(anyattn_backend be, void **stream) {
  *stream = NULL;
#if defined(ANYATTN_WITH_CUDA)
  if (be == ANYATTN_BACKEND_CUDA) {
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return -1;
    *stream = (void *)s;
  }
#endif
  (void)be;
  return 0;
}

static void stream_free(anyattn_backend be, void *stream) {
#if defined(ANYATTN_WITH_CUDA)
  if (be == ANYATTN_BACKEND_CUDA && stream) cudaStreamDestroy((cudaStream_t)stream);
#endif
  (void)be, (void)stream;
}

/* Bytes of 0xFF: NaN in bf16, f16 and f32 alike. */
static int stream_poison(anyattn_backend be, void *stream, void *dst, size_t n) {
#if defined(ANYATTN_WITH_CUDA)
  if (be == ANYATTN_BACKEND_CUDA)
    return cudaMemsetAsync(dst, 0xFF, n, (cudaStream_t)stream) == cudaSuccess ? 0 : -1;
#endif
  (void)be, (void)stream;
  memset(dst, 0xFF, n);
  return 0;
}

/* Waits for the stream, then copies device memory to the host. */
static int stream_to_host(anyattn_backend be, void *stream, void *dst, const void *src, size_t n) {
#if defined(ANYATTN_WITH_CUDA)
  if (be == ANYATTN_BACKEND_CUDA && cudaStreamSynchronize((cudaStream_t)stream) != cudaSuccess) return -1;
#endif
  (void)stream;
  return dm_to_host(be, dst, src, n);
}

/* ---- inputs ------------------------------------------------------------------------ */
static void fill_batch(batch_case *c, const char *name, int n, const int *ql, const int *kl, uint64_t *rng,
                       int64_t num_blocks) {
  c->name = name;
  c->num_seqs = n;
  c->cu[0] = 0;
  c->max_q = c->max_kv = 0;
  for (int s = 0; s < n; s++) {
    c->cu[s + 1] = c->cu[s] + ql[s];
    c->kv[s] = kl[s];
    c->max_q = ql[s] > c->max_q ? ql[s] : c->max_q;
    c->max_kv = kl[s] > c->max_kv ? kl[s] : c->max_kv;
    for (int p = 0; p < kPages; p++) c->table[s * kPages + p] = tl_rng_int(rng, 0, (int)num_blocks - 1);
  }
  c->num_tokens = c->cu[n];
}

static void batch_struct(const batch_case *c, int device_copy, anyattn_batch *b) {
  anyattn_batch_init(b);
  b->num_seqs = c->num_seqs;
  b->num_tokens = c->num_tokens;
  b->cu_seqlens_q = device_copy ? (const int32_t *)c->d_cu : c->cu;
  b->seq_lens_k = device_copy ? (const int32_t *)c->d_kv : c->kv;
  b->block_table = device_copy ? (const int32_t *)c->d_table : c->table;
  b->block_table_stride = kPages;
  b->max_q_len = c->max_q;
  b->max_kv_len = c->max_kv;
}

static void tensors_struct(const shared_state *S, const batch_case *c, int host, void *out, float *lse,
                           anyattn_tensors *t) {
  anyattn_tensors_init(t);
  t->q = host ? c->q_host : c->d_q;
  t->k_cache = S->k;
  t->v_cache = S->v;
  t->num_blocks = S->num_blocks;
  t->out = out;
  t->lse = lse;
}

/* ---- the single-threaded result, checked against the reference ------------------------ */
static int single_threaded(shared_state *S, batch_case *c, void *host_k, void *host_v) {
  const anyattn_backend be = S->be;
  const size_t ob = out_bytes(c->num_tokens), lb = lse_bytes(c->num_tokens);
  const size_t ws_bytes = anyattn_plan_workspace_size(S->plan);
  void *ws = dm_alloc_workspace(be, S->plan), *out = dm_alloc(be, ob), *lse = dm_alloc(be, lb);
  c->want_out = malloc(ob);
  c->want_lse = malloc(lb);
  int bad = !ws || !out || !lse || !c->want_out || !c->want_lse;
  anyattn_batch b;
  anyattn_tensors t;
  batch_struct(c, 1, &b);
  tensors_struct(S, c, 0, out, lse, &t);
  bad = bad || dm_fill_bytes(be, out, 0xFF, ob) || dm_fill_bytes(be, lse, 0xFF, lb);
  if (!bad && anyattn_run(S->plan, &b, &t, ws, ws_bytes, NULL) != ANYATTN_STATUS_OK) {
    printf("FAIL %s: single-threaded run: %s\n", c->name, anyattn_last_error());
    bad = 1;
  }
  bad = bad || dm_sync(be) || dm_to_host(be, c->want_out, out, ob) || dm_to_host(be, c->want_lse, lse, lb);
  dm_free(be, ws), dm_free(be, out), dm_free(be, lse);
  if (bad) return 1;

  /* The reference, with the conformance suite's bf16 bound: atol + rtol * sum_j P_j |v_j|. */
  const size_t n = (size_t)c->num_tokens * HQ * D, rows = (size_t)c->num_tokens * HQ;
  double *ro = malloc(n * sizeof *ro), *rl = malloc(rows * sizeof *rl), *ra = malloc(n * sizeof *ra);
  anyattn_batch hb;
  anyattn_tensors ht;
  batch_struct(c, 0, &hb);
  tensors_struct(S, c, 1, NULL, NULL, &ht);
  ht.k_cache = host_k, ht.v_cache = host_v;
  int fails = !ro || !rl || !ra || tl_reference(&S->problem, &hb, &ht, ro, rl, ra, NULL) != 0;
  for (size_t i = 0; !fails && i < n; i++) {
    const double got = tl_load(DTYPE, c->want_out, i);
    if (!(fabs(got - ro[i]) <= 1e-3 + 1.6e-2 * ra[i])) {
      printf("FAIL %s: out[%zu] = %.6g, reference %.6g\n", c->name, i, got, ro[i]);
      fails = 1;
    }
  }
  for (size_t i = 0; !fails && i < rows; i++)
    if (!(fabs(c->want_lse[i] - rl[i]) <= 1e-3 + 1e-5 * fabs(rl[i]))) {
      printf("FAIL %s: lse[%zu] = %.6g, reference %.6g\n", c->name, i, c->want_lse[i], rl[i]);
      fails = 1;
    }
  free(ro), free(rl), free(ra);
  if (!fails) printf("PASS %s: single-threaded run matches the reference (%d tokens)\n", c->name, c->num_tokens);
  return fails;
}

/* ---- the threads ------------------------------------------------------------------------- */
/* Each thread provokes an error of its own (num_seqs over the limit by its id),
 * waits until every thread has, then half the threads succeed at a call: each
 * thread's message must still be its own, or empty after its own success. */
static void check_last_error(thread_state *T) {
  shared_state *S = T->S;
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = MAX_SEQS + 1 + T->id;
  const anyattn_status s = anyattn_validate(S->plan, &b, S->num_blocks);
  char want[64];
  snprintf(want, sizeof want, "batch->num_seqs is %d,", b.num_seqs);
  pthread_barrier_wait(&S->barrier);
  if (T->id % 2 == 0) {
    batch_struct(&S->b[0], 0, &b);
    if (anyattn_validate(S->plan, &b, S->num_blocks) != ANYATTN_STATUS_OK) T->errors++;
  }
  pthread_barrier_wait(&S->barrier);
  const char *msg = anyattn_last_error();
  const int ok = s == ANYATTN_STATUS_LIMIT_EXCEEDED && (T->id % 2 == 0 ? msg[0] == '\0' : strstr(msg, want) != NULL);
  if (!ok) {
    printf("FAIL thread %d: last error \"%s\", expected %s\n", T->id, msg, T->id % 2 == 0 ? "none" : want);
    T->errors++;
  }
}

/* Runs batch c on plan p into out/lse on the thread's stream. */
static int run_one(thread_state *T, const anyattn_plan *p, const batch_case *c, void *ws, size_t ws_bytes,
                   void *stream, void *out, float *lse) {
  anyattn_batch b;
  anyattn_tensors t;
  batch_struct(c, 1, &b);
  tensors_struct(T->S, c, 0, out, lse, &t);
  if (stream_poison(T->S->be, stream, out, out_bytes(c->num_tokens)) ||
      stream_poison(T->S->be, stream, lse, lse_bytes(c->num_tokens)))
    return -1;
  const anyattn_status s = anyattn_run(p, &b, &t, ws, ws_bytes, stream);
  if (s != ANYATTN_STATUS_OK) {
    printf("FAIL thread %d, %s: run: %s\n", T->id, c->name, anyattn_last_error());
    return -1;
  }
  T->runs++;
  return 0;
}

static int same_bits(thread_state *T, const batch_case *c, const void *out, const float *lse, const char *plan_kind,
                     int iter) {
  if (memcmp(out, c->want_out, out_bytes(c->num_tokens)) == 0 && memcmp(lse, c->want_lse, lse_bytes(c->num_tokens)) == 0)
    return 1;
  if (T->mismatches++ == 0)
    printf("FAIL thread %d, %s, %s plan, iteration %d: output differs from the single-threaded run\n", T->id,
           c->name, plan_kind, iter);
  return 0;
}

static void *thread_main(void *arg) {
  thread_state *T = (thread_state *)arg;
  shared_state *S = T->S;
  const anyattn_backend be = S->be;
  int setup_bad = dm_set_device(be, 0) != 0; /* no early return: the others wait at the barriers */
  check_last_error(T);

  void *stream = NULL;
  const size_t ws_bytes = anyattn_plan_workspace_size(S->plan);
  void *ws = S->shared_ws ? S->shared_ws : dm_alloc_workspace(be, S->plan);
  void *out[BATCHES], *host_out[BATCHES];
  float *lse[BATCHES], *host_lse[BATCHES];
  setup_bad |= stream_create(be, &stream) || !ws;
  for (int i = 0; i < BATCHES; i++) {
    out[i] = dm_alloc(be, out_bytes(S->b[i].num_tokens));
    lse[i] = dm_alloc(be, lse_bytes(S->b[i].num_tokens));
    host_out[i] = malloc(out_bytes(S->b[i].num_tokens));
    host_lse[i] = malloc(lse_bytes(S->b[i].num_tokens));
    setup_bad |= !out[i] || !lse[i] || !host_out[i] || !host_lse[i];
  }
  pthread_barrier_wait(&S->barrier); /* start together */

  for (int it = 0; it < ITERS && !setup_bad && T->errors == 0; it++) {
    /* Every PLAN_EVERY iterations this thread plans on the shared context, as
     * the other threads run, and uses that plan: the same problem and limits
     * give the same choices, so the same bits. */
    anyattn_plan *own = NULL;
    if (it % PLAN_EVERY == T->id % PLAN_EVERY &&
        anyattn_plan_create(S->ctx, &S->problem, &S->limits, &own) != ANYATTN_STATUS_OK) {
      printf("FAIL thread %d: plan_create: %s\n", T->id, anyattn_last_error());
      T->errors++;
      break;
    }
    const anyattn_plan *p = own ? own : S->plan;
    /* All batches in a row on one stream and one workspace (stream order), then check. */
    for (int k = 0; k < BATCHES; k++) {
      const int i = (k + T->id + it) % BATCHES;
      if (run_one(T, p, &S->b[i], ws, ws_bytes, stream, out[i], lse[i])) T->errors++;
    }
    for (int i = 0; i < BATCHES && T->errors == 0; i++) {
      if (stream_to_host(be, stream, host_out[i], out[i], out_bytes(S->b[i].num_tokens)) ||
          stream_to_host(be, stream, host_lse[i], lse[i], lse_bytes(S->b[i].num_tokens))) {
        T->errors++;
        break;
      }
      same_bits(T, &S->b[i], host_out[i], host_lse[i], own ? "own" : "shared", it);
    }
    anyattn_plan_free(own);
  }

  for (int i = 0; i < BATCHES; i++) {
    dm_free(be, out[i]), dm_free(be, lse[i]);
    free(host_out[i]), free(host_lse[i]);
  }
  if (!S->shared_ws) dm_free(be, ws);
  stream_free(be, stream);
  T->errors += setup_bad;
  return NULL;
}

/* ---- setup ------------------------------------------------------------------------------ */
static int setup_inputs(shared_state *S, void **host_k, void **host_v, uint64_t *rng) {
  const anyattn_backend be = S->be;
  S->num_blocks = (int64_t)MAX_SEQS * kPages / 2 + 5;
  const size_t cache_elems = (size_t)S->num_blocks * BS * HKV * D, es = anyattn_dtype_size(DTYPE);
  *host_k = malloc(cache_elems * es);
  *host_v = malloc(cache_elems * es);
  S->k = dm_alloc(be, cache_elems * es);
  S->v = dm_alloc(be, cache_elems * es);
  if (!*host_k || !*host_v || !S->k || !S->v) return -1;
  tl_fill_normal(DTYPE, *host_k, cache_elems, 1.0f, rng);
  tl_fill_normal(DTYPE, *host_v, cache_elems, 1.0f, rng);
  if (dm_to_device(be, S->k, *host_k, cache_elems * es) || dm_to_device(be, S->v, *host_v, cache_elems * es))
    return -1;

  /* decode-like over long contexts (GPUs split it into KV segments, whose
   * partials live in the workspace), one prefill, and a mixed batch */
  static const int dq[] = {1, 1, 1, 1}, dk[] = {2000, 1500, 700, 2048};
  static const int pq[] = {48}, pk[] = {60};
  static const int mq[] = {1, 37, 0, 12, 1}, mk[] = {300, 37, 90, 1000, 5};
  fill_batch(&S->b[0], "decode", 4, dq, dk, rng, S->num_blocks);
  fill_batch(&S->b[1], "prefill", 1, pq, pk, rng, S->num_blocks);
  fill_batch(&S->b[2], "mixed", 5, mq, mk, rng, S->num_blocks);
  for (int i = 0; i < BATCHES; i++) {
    batch_case *c = &S->b[i];
    const size_t qb = out_bytes(c->num_tokens), tb = sizeof c->table;
    c->q_host = malloc(qb);
    c->d_q = dm_alloc(be, qb);
    c->d_cu = dm_alloc(be, sizeof c->cu);
    c->d_kv = dm_alloc(be, sizeof c->kv);
    c->d_table = dm_alloc(be, tb);
    if (!c->q_host || !c->d_q || !c->d_cu || !c->d_kv || !c->d_table) return -1;
    tl_fill_normal(DTYPE, c->q_host, (size_t)c->num_tokens * HQ * D, 1.0f, rng);
    if (dm_to_device(be, c->d_q, c->q_host, qb) || dm_to_device(be, c->d_cu, c->cu, sizeof c->cu) ||
        dm_to_device(be, c->d_kv, c->kv, sizeof c->kv) || dm_to_device(be, c->d_table, c->table, tb))
      return -1;
    anyattn_batch hb;
    batch_struct(c, 0, &hb);
    if (anyattn_validate(S->plan, &hb, S->num_blocks) != ANYATTN_STATUS_OK) {
      printf("FAIL %s: validate: %s\n", c->name, anyattn_last_error());
      return -1;
    }
  }
  return 0;
}

static void free_inputs(shared_state *S) {
  for (int i = 0; i < BATCHES; i++) {
    batch_case *c = &S->b[i];
    dm_free(S->be, c->d_q), dm_free(S->be, c->d_cu), dm_free(S->be, c->d_kv), dm_free(S->be, c->d_table);
    free(c->q_host), free(c->want_out), free(c->want_lse);
  }
  dm_free(S->be, S->k), dm_free(S->be, S->v), dm_free(S->be, S->shared_ws);
}

int main(int argc, char **argv) {
  static shared_state S; /* large: static storage, zeroed */
  S.be = ANYATTN_BACKEND_CPU;
  int share = 0, omp = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--share-workspace")) share = 1;
    else if (!strcmp(argv[i], "--omp"))
      omp = 1;
    else if (anyattn_backend_from_name(argv[i], &S.be) != ANYATTN_STATUS_OK || S.be == ANYATTN_BACKEND_AUTO) {
      fprintf(stderr, "usage: test_threads [cpu|cuda] [--share-workspace] [--omp]\n");
      return 2;
    }
  }
  if (!anyattn_backend_compiled(S.be)) {
    printf("SKIP: backend %s is not compiled in\n", anyattn_backend_name(S.be));
    return 77;
  }
  if (anyattn_context_create(S.be, 0, &S.ctx) != ANYATTN_STATUS_OK) {
    printf("SKIP: %s\n", anyattn_last_error());
    return 77;
  }
  const uint64_t seed = tl_seed_from_env_or_time();
  uint64_t rng = seed;
  printf("seed %llu (rerun with ANYATTN_SEED=%llu), backend %s, %d threads x %d iterations x %d batches\n",
         (unsigned long long)seed, (unsigned long long)seed, anyattn_backend_name(S.be), THREADS, ITERS, BATCHES);

  anyattn_problem_init(&S.problem);
  S.problem.num_q_heads = HQ, S.problem.num_kv_heads = HKV, S.problem.head_dim = D;
  S.problem.dtype = DTYPE, S.problem.block_size = BS, S.problem.causal = 1;
  anyattn_limits_init(&S.limits);
  S.limits.max_seqs = MAX_SEQS, S.limits.max_tokens = MAX_TOKENS, S.limits.max_context = MAX_CONTEXT;
  anyattn_plan *plan = NULL;
  if (anyattn_plan_create(S.ctx, &S.problem, &S.limits, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL plan_create: %s\n", anyattn_last_error());
    return 1;
  }
  S.plan = plan;
  printf("plan: %s, workspace %zu bytes\n", anyattn_plan_describe(plan), anyattn_plan_workspace_size(plan));

  void *host_k = NULL, *host_v = NULL;
  int fails = setup_inputs(&S, &host_k, &host_v, &rng) != 0;
  for (int i = 0; i < BATCHES && !fails; i++) fails += single_threaded(&S, &S.b[i], host_k, host_v);
  free(host_k), free(host_v);
  if (share && !fails) S.shared_ws = dm_alloc_workspace(S.be, plan);

  thread_state T[THREADS];
  pthread_t tid[THREADS];
  int started = 0;
  if (!fails && pthread_barrier_init(&S.barrier, NULL, THREADS) == 0) {
    if (omp) {
      int team = 0;
      omp_set_dynamic(0);
#pragma omp parallel num_threads(THREADS)
      {
#pragma omp single
        team = omp_get_num_threads();
        /* the implicit barrier of single: every thread sees team */
        if (team == THREADS) {
          const int i = omp_get_thread_num();
          T[i] = (thread_state){&S, i, 0, 0, 0};
          thread_main(&T[i]);
        }
      }
      if (team != THREADS) {
        printf("FAIL: the OpenMP team has %d threads, not %d\n", team, THREADS);
        exit(1);
      }
    } else {
      for (; started < THREADS; started++) {
        T[started] = (thread_state){&S, started, 0, 0, 0};
        if (pthread_create(&tid[started], NULL, thread_main, &T[started]) != 0) break;
      }
      if (started < THREADS) {
        printf("FAIL: pthread_create for thread %d\n", started);
        fails++;
        exit(1); /* the barrier would wait forever for the missing thread */
      }
      for (int i = 0; i < THREADS; i++) pthread_join(tid[i], NULL);
    }
    int runs = 0, mismatched = 0, errors = 0;
    for (int i = 0; i < THREADS; i++) runs += T[i].runs, mismatched += T[i].mismatches, errors += T[i].errors;
    pthread_barrier_destroy(&S.barrier);
    printf(
        "%s %d %s threads, one shared context and plan%s: %d runs, %d outputs differ from the single-threaded "
        "run, %d errors\n",
        mismatched || errors ? "FAIL" : "PASS", THREADS, omp ? "OpenMP" : "POSIX",
        share ? ", ONE SHARED WORKSPACE" : ", a workspace each", runs, mismatched, errors);
    fails += mismatched + errors;
  } else if (!fails) {
    printf("FAIL: pthread_barrier_init\n");
    fails++;
  }
  free_inputs(&S);
  anyattn_plan_free(plan);
  anyattn_context_free(S.ctx);
  printf("%s\n", fails ? "FAIL" : "PASS");
  return fails ? 1 : 0;
}
