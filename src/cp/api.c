/* api.c: the entry points of anyattn_cp.h. Every argument the host can see is
 * checked here, before any work starts; the plan's collective check (MPI)
 * makes all ranks fail together; runs go to exec.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"

/* ---- communicators ----------------------------------------------------- */
static anyattn_status cp_comm_new(anyattn_cp_comm **comm, int rpn, anyattn_cp_comm **c) {
  CP_CHECK_NOT_NULL(comm, "comm");
  *comm = NULL;
  CP_CHECK(rpn >= 0, ANYATTN_STATUS_INVALID_SIZE, "ranks_per_node is %d, must be >= 0 (0: one node)", rpn);
  *c = (anyattn_cp_comm *)calloc(1, sizeof **c);
  CP_CHECK(*c != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "communicator allocation failed");
  return ANYATTN_STATUS_OK;
}

/* Hands the communicator out, or frees it when its transport refused it. */
static anyattn_status cp_comm_finish(anyattn_cp_comm *c, anyattn_status s, anyattn_cp_comm **comm) {
  if (s != ANYATTN_STATUS_OK) {
    free(c);
    return s;
  }
  *comm = c;
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_cp_comm_create_mpi(const void *mpi_comm, int ranks_per_node, anyattn_cp_comm **comm) {
  cp_clear_error();
  anyattn_cp_comm *c = NULL;
  CP_TRY(cp_comm_new(comm, ranks_per_node, &c));
  anyattn_status s = ANYATTN_STATUS_OK;
#ifdef ANYATTN_CP_WITH_MPI
  if (!mpi_comm) s = cp_error(ANYATTN_STATUS_NULL_POINTER, "mpi_comm is NULL");
  c->backend = ANYATTN_BACKEND_CPU;
  c->tr = cp_mpi_transport();
  if (s == ANYATTN_STATUS_OK) s = cp_mpi_comm_create(mpi_comm, ranks_per_node, c);
#else
  (void)mpi_comm;
  s = cp_error(ANYATTN_STATUS_BACKEND_UNAVAILABLE,
               "libanyattn_cp was built without MPI (Debian: libopenmpi-dev; configure with -DANYATTN_MPI=ON)");
#endif
  return cp_comm_finish(c, s, comm);
}

anyattn_status anyattn_cp_comm_create_nccl(void *nccl_comm, int ranks_per_node, anyattn_cp_comm **comm) {
  cp_clear_error();
  anyattn_cp_comm *c = NULL;
  CP_TRY(cp_comm_new(comm, ranks_per_node, &c));
  anyattn_status s = ANYATTN_STATUS_OK;
#ifdef ANYATTN_CP_WITH_NCCL
  if (!nccl_comm) s = cp_error(ANYATTN_STATUS_NULL_POINTER, "nccl_comm is NULL");
  c->backend = ANYATTN_BACKEND_CUDA;
  c->tr = cp_nccl_transport();
  if (s == ANYATTN_STATUS_OK) s = cp_nccl_comm_create(nccl_comm, ranks_per_node, c);
#else
  (void)nccl_comm;
  s = cp_error(ANYATTN_STATUS_BACKEND_UNAVAILABLE,
               "libanyattn_cp was built without NCCL (it needs the CUDA backend and nccl.h; configure with "
               "-DANYATTN_NCCL=ON)");
#endif
  return cp_comm_finish(c, s, comm);
}

void anyattn_cp_comm_free(anyattn_cp_comm *comm) {
  if (!comm) return;
  if (comm->tr) comm->tr->free(comm);
  free(comm);
}

anyattn_status anyattn_cp_comm_get(const anyattn_cp_comm *comm, int *rank, int *size, int *ranks_per_node) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(comm, "comm");
  if (rank) *rank = comm->rank;
  if (size) *size = comm->size;
  if (ranks_per_node) *ranks_per_node = comm->ranks_per_node;
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_cp_chunk(int seq_len, int world_size, int chunk, int *start, int *len) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(start, "start");
  CP_CHECK_NOT_NULL(len, "len");
  CP_CHECK(seq_len >= 0, ANYATTN_STATUS_INVALID_SIZE, "seq_len is %d, must be >= 0", seq_len);
  CP_CHECK(world_size >= 1 && world_size <= CP_MAX_WORLD, ANYATTN_STATUS_INVALID_SIZE,
           "world_size is %d, must be in 1..%d", world_size, CP_MAX_WORLD);
  CP_CHECK(chunk >= 0 && chunk < 2 * world_size, ANYATTN_STATUS_INVALID_SIZE, "chunk is %d, must be in 0..%d",
           chunk, 2 * world_size - 1);
  cp_chunk_of(seq_len, world_size, chunk, start, len);
  return ANYATTN_STATUS_OK;
}

/* ---- plans ----------------------------------------------------------------- */
void anyattn_cp_plan_free(anyattn_cp_plan *plan) {
  if (!plan) return;
  if (plan->comm && plan->comm->tr) plan->comm->tr->plan_free(plan);
  anyattn_plan_free(plan->causal_plan);
  anyattn_plan_free(plan->full_plan);
  free(plan->ops);
  free(plan->pieces);
  free(plan->msgs);
  free(plan->ints);
  free(plan);
}

/* Host scratch of a run: ops, pieces, messages, shard and call arrays (exec.c). */
static anyattn_status cp_scratch_alloc(anyattn_cp_plan *p) {
  const int S = p->limits.max_seqs;
  p->max_ops = 3 * p->z.world + 1;
  p->max_pieces = 2 * S + 4;
  p->ops = (cp_op *)calloc((size_t)p->max_ops, sizeof *p->ops);
  p->pieces = (cp_piece *)calloc((size_t)p->max_pieces + 1, sizeof *p->pieces);
  p->msgs = (cp_msg *)calloc((size_t)8 * p->max_pieces, sizeof *p->msgs);
  /* exec.c's scratch: three shards (6 S ints each), 4 S entries (7 ints), 4 S calls (5), a call's metadata (8 S + 1) */
  p->ints = (int32_t *)calloc((size_t)80 * S + 16, sizeof *p->ints);
  CP_CHECK(p->ops && p->pieces && p->msgs && p->ints, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  return ANYATTN_STATUS_OK;
}

/* Everything plan_create checks and builds on this rank alone. */
static anyattn_status cp_plan_local(anyattn_cp_plan *p) {
  anyattn_cp_comm *c = p->comm;
  const anyattn_backend be = anyattn_context_backend(p->ctx);
  CP_CHECK(be == c->backend, ANYATTN_STATUS_WRONG_CONTEXT,
           "ctx is a %s context but comm wraps an %s communicator (cpu: MPI, cuda: NCCL)", anyattn_backend_name(be),
           c->backend == ANYATTN_BACKEND_CPU ? "MPI" : "NCCL");
  CP_CHECK(be != ANYATTN_BACKEND_CUDA || anyattn_context_device(p->ctx) == c->device, ANYATTN_STATUS_WRONG_CONTEXT,
           "ctx is on CUDA device %d, the NCCL communicator on device %d", anyattn_context_device(p->ctx),
           c->device);
  CP_TRY(cp_check_problem(p->ctx, &p->problem, &p->limits, &p->options));
  CP_TRY(cp_size(&p->z, &p->problem, &p->limits, &p->options, c->size, c->ranks_per_node, c->rank, 0));
  CP_TRY(cp_subplans(p->ctx, &p->problem, &p->limits, &p->options, c->size, &p->causal_plan, &p->full_plan));
  size_t inner = anyattn_plan_workspace_size(p->full_plan), ci = anyattn_plan_workspace_size(p->causal_plan);
  if (ci > inner) inner = ci;
  CP_TRY(cp_size(&p->z, &p->problem, &p->limits, &p->options, c->size, c->ranks_per_node, c->rank, inner));
#ifdef ANYATTN_CP_WITH_NCCL
  p->math = be == ANYATTN_BACKEND_CUDA ? cp_cuda_math() : cp_host_math();
#else
  p->math = cp_host_math();
#endif
  CP_TRY(cp_scratch_alloc(p));
  CP_TRY(c->tr->plan_init(p));
  static const char *const names[] = {"ring", "two-level", "decode"};
  snprintf(p->describe, sizeof p->describe,
           "cp %s: rank %d of %d (%d node%s x %d), %d step%s, prefetch %d%%, workspace %zu bytes (%zu over local "
           "attention); steps: %s",
           names[p->z.mode], c->rank, c->size, p->z.mode == ANYATTN_CP_TWO_LEVEL ? p->z.G : 1,
           p->z.mode == ANYATTN_CP_TWO_LEVEL && p->z.G > 1 ? "s" : "",
           p->z.mode == ANYATTN_CP_TWO_LEVEL ? p->z.R : c->size, p->z.mode == ANYATTN_CP_DECODE ? 1 : c->size,
           p->z.mode == ANYATTN_CP_DECODE || c->size == 1 ? "" : "s", p->z.prefetch_percent, p->z.total,
           p->z.total - p->z.inner_bytes, anyattn_plan_describe(p->full_plan));
  return ANYATTN_STATUS_OK;
}

/* The values every rank must agree on, and the local status, for the collective check. */
static int cp_plan_values(const anyattn_cp_plan *p, anyattn_status local, int64_t *v, const char **names) {
  const anyattn_problem *pr = &p->problem;
  const anyattn_limits *l = &p->limits;
  uint32_t scale_bits, cap_bits;
  memcpy(&scale_bits, &pr->scale, 4);
  memcpy(&cap_bits, &pr->softcap, 4);
  const int64_t vals[] = {local,           p->options.mode, p->options.prefetch_percent, pr->num_q_heads,
                          pr->num_kv_heads, pr->head_dim,   pr->dtype,                   pr->block_size,
                          pr->causal,       pr->window_left, pr->window_right,          scale_bits,
                          cap_bits,         l->max_seqs,    l->max_tokens,              l->max_context};
  static const char *const n[] = {"the status of plan creation", "options->mode", "options->prefetch_percent",
                                  "problem->num_q_heads", "problem->num_kv_heads", "problem->head_dim",
                                  "problem->dtype", "problem->block_size", "problem->causal",
                                  "problem->window_left", "problem->window_right", "problem->scale",
                                  "problem->softcap", "limits->max_seqs", "limits->max_tokens",
                                  "limits->max_context"};
  const int count = (int)(sizeof vals / sizeof vals[0]);
  for (int i = 0; i < count; i++) v[i] = vals[i], names[i] = n[i];
  return count;
}

anyattn_status anyattn_cp_plan_create(anyattn_context *ctx, anyattn_cp_comm *comm, const anyattn_problem *problem,
                                      const anyattn_limits *limits, const anyattn_cp_options *options,
                                      anyattn_cp_plan **plan) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(plan, "plan");
  *plan = NULL;
  CP_CHECK_NOT_NULL(ctx, "ctx");
  CP_CHECK_NOT_NULL(comm, "comm");
  CP_CHECK_NOT_NULL(problem, "problem");
  CP_CHECK_NOT_NULL(limits, "limits");
  CP_CHECK_NOT_NULL(options, "options");
  anyattn_cp_plan *p = (anyattn_cp_plan *)calloc(1, sizeof *p);
  CP_CHECK(p != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  p->ctx = ctx;
  p->comm = comm;
  p->problem = *problem;
  p->limits = *limits;
  p->options = *options;
  anyattn_status s = cp_plan_local(p);
  p->problem.config = NULL;
  /* Every rank learns whether any failed, or passed different arguments. */
  char why[768];
  snprintf(why, sizeof why, "%s", anyattn_cp_last_error());
  int64_t v[32];
  const char *names[32];
  const int nv = cp_plan_values(p, s, v, names);
  int diff = -1;
  const anyattn_status cs = comm->tr->check_same(comm, v, nv, &diff);
  if (s != ANYATTN_STATUS_OK) cp_restore_error(why); /* this rank's own reason */
  else if (cs != ANYATTN_STATUS_OK) s = cs;
  else if (diff == 0)
    s = cp_error(ANYATTN_STATUS_INVALID_OPTION, "plan creation failed on another rank of the communicator");
  else if (diff > 0)
    s = cp_error(ANYATTN_STATUS_INVALID_OPTION, "%s differs between ranks of the communicator", names[diff]);
  if (s != ANYATTN_STATUS_OK) {
    anyattn_cp_plan_free(p);
    return s;
  }
  *plan = p;
  return ANYATTN_STATUS_OK;
}

size_t anyattn_cp_plan_workspace_size(const anyattn_cp_plan *plan) { return plan ? plan->z.total : 0; }

const char *anyattn_cp_plan_describe(const anyattn_cp_plan *plan) { return plan ? plan->describe : ""; }

anyattn_status anyattn_cp_plan_get_info(const anyattn_cp_plan *plan, anyattn_cp_plan_info *info) {
  cp_clear_error();
  CP_CHECK_NOT_NULL(plan, "plan");
  CP_CHECK_NOT_NULL(info, "info");
  CP_CHECK(info->struct_size == sizeof *info, ANYATTN_STATUS_STRUCT_SIZE,
           "info->struct_size is %zu, this library expects %zu", info->struct_size, sizeof *info);
  return cp_info_of(&plan->z, info);
}

void anyattn_cp_tensors_init(anyattn_cp_tensors *t) {
  if (!t) return;
  memset(t, 0, sizeof *t);
  t->struct_size = sizeof *t;
}
