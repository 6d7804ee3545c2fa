/* nccl.c: the NCCL transport of the CUDA backend. The caller's communicator
 * is split three ways (all ranks, each node, each local index across nodes),
 * with two non-blocking communication streams: ring or intra-node transfers
 * on one, inter-node transfers on the other. An op's messages are one NCCL
 * group of sends and receives; events order ops across the caller's stream
 * and the two communication streams, and the caller's stream waits for both
 * at the end, so run returns without waiting on the host. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>

#include "cp.h"

typedef struct {
  ncclComm_t world, intra, inter;
  cudaStream_t stream[2];
} cp_nccl;

typedef struct {
  cudaEvent_t *ev; /* one per op */
  int nev;
  cudaEvent_t fork, join[2];
} cp_nccl_plan;

#define CP_NCCL(call, what)                                                                                   \
  do {                                                                                                        \
    const ncclResult_t rc_ = (call);                                                                          \
    if (rc_ != ncclSuccess) return cp_error(ANYATTN_STATUS_COMM_ERROR, "%s: %s", what, ncclGetErrorString(rc_)); \
  } while (0)
#define CP_CUDA(call, what)                                                                                      \
  do {                                                                                                           \
    const cudaError_t rc_ = (call);                                                                              \
    if (rc_ != cudaSuccess) return cp_error(ANYATTN_STATUS_DEVICE_ERROR, "%s: %s", what, cudaGetErrorString(rc_)); \
  } while (0)

static void cp_nccl_release(cp_nccl *m) {
  ncclComm_t *all[3] = {&m->world, &m->intra, &m->inter};
  for (int i = 0; i < 3; i++)
    if (*all[i]) ncclCommDestroy(*all[i]);
  for (int i = 0; i < 2; i++)
    if (m->stream[i]) cudaStreamDestroy(m->stream[i]);
}

static anyattn_status cp_nccl_setup(cp_nccl *m, ncclComm_t user, int rpn, anyattn_cp_comm *c) {
  CP_NCCL(ncclCommCount(user, &c->size), "ncclCommCount");
  CP_NCCL(ncclCommUserRank(user, &c->rank), "ncclCommUserRank");
  CP_NCCL(ncclCommCuDevice(user, &c->device), "ncclCommCuDevice");
  CP_CHECK(c->size <= CP_MAX_WORLD, ANYATTN_STATUS_INVALID_SIZE,
           "the communicator has %d ranks, context parallelism takes at most %d", c->size, CP_MAX_WORLD);
  CP_CHECK(rpn == 0 || c->size % rpn == 0, ANYATTN_STATUS_INVALID_SIZE,
           "ranks_per_node is %d, not a divisor of the communicator's %d ranks", rpn, c->size);
  c->ranks_per_node = rpn ? rpn : c->size;
  const int node = c->rank / c->ranks_per_node, local = c->rank % c->ranks_per_node;
  CP_CUDA(cudaSetDevice(c->device), "cudaSetDevice");
  CP_NCCL(ncclCommSplit(user, 0, c->rank, &m->world, NULL), "ncclCommSplit (all ranks)");
  CP_NCCL(ncclCommSplit(user, node, local, &m->intra, NULL), "ncclCommSplit (node)");
  CP_NCCL(ncclCommSplit(user, local, node, &m->inter, NULL), "ncclCommSplit (local index)");
  for (int i = 0; i < 2; i++) CP_CUDA(cudaStreamCreateWithFlags(&m->stream[i], cudaStreamNonBlocking), "cudaStreamCreate");
  return ANYATTN_STATUS_OK;
}

anyattn_status cp_nccl_comm_create(void *nccl_comm, int rpn, anyattn_cp_comm *c) {
  cp_nccl *m = (cp_nccl *)calloc(1, sizeof *m);
  CP_CHECK(m != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "communicator allocation failed");
  const anyattn_status s = cp_nccl_setup(m, (ncclComm_t)nccl_comm, rpn, c);
  if (s != ANYATTN_STATUS_OK) {
    cp_nccl_release(m);
    free(m);
    return s;
  }
  c->impl = m;
  return ANYATTN_STATUS_OK;
}

static void cp_nccl_free(anyattn_cp_comm *c) {
  cp_nccl *m = (cp_nccl *)c->impl;
  if (!m) return;
  cudaSetDevice(c->device);
  cp_nccl_release(m);
  free(m);
}

/* Equal arguments are the caller's duty: checking them would need device memory and a host wait. */
static anyattn_status cp_nccl_check_same(anyattn_cp_comm *c, const int64_t *v, int n, int *first_diff) {
  (void)c, (void)v, (void)n;
  *first_diff = -1;
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_plan_init(anyattn_cp_plan *p) {
  cp_nccl_plan *s = (cp_nccl_plan *)calloc(1, sizeof *s);
  CP_CHECK(s != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  p->tstate = s;
  CP_CUDA(cudaSetDevice(p->comm->device), "cudaSetDevice");
  s->ev = (cudaEvent_t *)calloc((size_t)p->max_ops, sizeof *s->ev);
  CP_CHECK(s->ev != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  for (; s->nev < p->max_ops; s->nev++)
    CP_CUDA(cudaEventCreateWithFlags(&s->ev[s->nev], cudaEventDisableTiming), "cudaEventCreate");
  CP_CUDA(cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming), "cudaEventCreate");
  for (int i = 0; i < 2; i++) CP_CUDA(cudaEventCreateWithFlags(&s->join[i], cudaEventDisableTiming), "cudaEventCreate");
  return ANYATTN_STATUS_OK;
}

static void cp_nccl_plan_free(anyattn_cp_plan *p) {
  cp_nccl_plan *s = (cp_nccl_plan *)p->tstate;
  if (!s) return;
  for (int i = 0; i < s->nev; i++) cudaEventDestroy(s->ev[i]);
  if (s->fork) cudaEventDestroy(s->fork);
  for (int i = 0; i < 2; i++)
    if (s->join[i]) cudaEventDestroy(s->join[i]);
  free(s->ev);
  free(s);
  p->tstate = NULL;
}

static cudaStream_t cp_stream_of(const cp_run *r, int op) {
  const cp_op *o = &r->plan->ops[op];
  return o->kind == CP_OP_XFER ? ((cp_nccl *)r->plan->comm->impl)->stream[o->level] : (cudaStream_t)r->stream;
}

static anyattn_status cp_nccl_begin(cp_run *r) {
  cp_nccl *m = (cp_nccl *)r->plan->comm->impl;
  cp_nccl_plan *s = (cp_nccl_plan *)r->plan->tstate;
  CP_CUDA(cudaSetDevice(r->plan->comm->device), "cudaSetDevice");
  CP_CUDA(cudaEventRecord(s->fork, (cudaStream_t)r->stream), "cudaEventRecord");
  for (int i = 0; i < 2; i++) CP_CUDA(cudaStreamWaitEvent(m->stream[i], s->fork, 0), "cudaStreamWaitEvent");
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_wait(cp_run *r, int op, int dep) {
  const cudaStream_t to = cp_stream_of(r, op), from = cp_stream_of(r, dep);
  if (to == from) return ANYATTN_STATUS_OK; /* stream order */
  CP_CUDA(cudaStreamWaitEvent(to, ((cp_nccl_plan *)r->plan->tstate)->ev[dep], 0), "cudaStreamWaitEvent");
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_post(cp_run *r, int i, const cp_msg *msg, int nm) {
  const anyattn_cp_plan *p = r->plan;
  cp_nccl *m = (cp_nccl *)p->comm->impl;
  const cp_op *op = &p->ops[i];
  const ncclComm_t comm = op->level == 1 ? m->inter : p->z.mode == ANYATTN_CP_TWO_LEVEL ? m->intra : m->world;
  const cudaStream_t st = m->stream[op->level];
  if (nm == 0) return ANYATTN_STATUS_OK;
  CP_NCCL(ncclGroupStart(), "ncclGroupStart");
  for (int k = 0; k < nm; k++) {
    const size_t bytes = (size_t)msg[k].rows * p->z.kv_row_bytes;
    const ncclResult_t rc = msg[k].send ? ncclSend(msg[k].ptr, bytes, ncclInt8, msg[k].peer, comm, st)
                                        : ncclRecv(msg[k].ptr, bytes, ncclInt8, msg[k].peer, comm, st);
    if (rc != ncclSuccess) {
      ncclGroupEnd();
      return cp_error(ANYATTN_STATUS_COMM_ERROR, "%s: %s", msg[k].send ? "ncclSend" : "ncclRecv",
                      ncclGetErrorString(rc));
    }
  }
  CP_NCCL(ncclGroupEnd(), "ncclGroupEnd");
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_record(cp_run *r, int op) {
  CP_CUDA(cudaEventRecord(((cp_nccl_plan *)r->plan->tstate)->ev[op], cp_stream_of(r, op)), "cudaEventRecord");
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_end(cp_run *r) {
  cp_nccl *m = (cp_nccl *)r->plan->comm->impl;
  cp_nccl_plan *s = (cp_nccl_plan *)r->plan->tstate;
  for (int i = 0; i < 2; i++) {
    CP_CUDA(cudaEventRecord(s->join[i], m->stream[i]), "cudaEventRecord");
    CP_CUDA(cudaStreamWaitEvent((cudaStream_t)r->stream, s->join[i], 0), "cudaStreamWaitEvent");
  }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_nccl_allgather(const anyattn_cp_plan *p, const float *send, float *recv, int count,
                                        void *stream) {
  const size_t n = (size_t)count * (size_t)p->problem.num_q_heads * ((size_t)p->problem.head_dim + 1);
  CP_CUDA(cudaSetDevice(p->comm->device), "cudaSetDevice");
  CP_NCCL(ncclAllGather(send, recv, n, ncclFloat, ((cp_nccl *)p->comm->impl)->world, (cudaStream_t)stream),
          "ncclAllGather");
  return ANYATTN_STATUS_OK;
}

const cp_transport *cp_nccl_transport(void) {
  static const cp_transport t = {cp_nccl_check_same, cp_nccl_plan_init, cp_nccl_plan_free, cp_nccl_begin,
                                 cp_nccl_wait,       cp_nccl_post,      cp_nccl_record,    cp_nccl_end,
                                 cp_nccl_allgather,  cp_nccl_free};
  return &t;
}
