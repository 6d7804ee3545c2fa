/* mpi.c: the MPI transport of the CPU backend. The caller's communicator is
 * duplicated (all ranks) and split (each node; each local index across
 * nodes) with errors returned, not fatal. An op's messages are nonblocking
 * sends and receives in units of one K/V row; ops run in issue order on the
 * calling thread, so waiting for an op means completing its requests. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "cp.h"

typedef struct {
  MPI_Comm world, intra, inter;
} cp_mpi;

typedef struct {
  MPI_Datatype row;   /* one K/V row (prefill) */
  MPI_Datatype part;  /* one row of decode partials: hq x (d + 1) floats */
  MPI_Request *req;
  int cap, used; /* requests of this run so far */
} cp_mpi_plan;

static anyattn_status cp_mpi_error(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return cp_error(ANYATTN_STATUS_COMM_ERROR, "%s: %s", what, msg);
}
#define CP_MPI(call, what)                              \
  do {                                                  \
    const int rc_ = (call);                             \
    if (rc_ != MPI_SUCCESS) return cp_mpi_error(rc_, what); \
  } while (0)

static void cp_mpi_free_comms(cp_mpi *m) {
  MPI_Comm *all[3] = {&m->world, &m->intra, &m->inter};
  for (int i = 0; i < 3; i++)
    if (*all[i] != MPI_COMM_NULL) MPI_Comm_free(all[i]);
}

static anyattn_status cp_mpi_split(cp_mpi *m, const MPI_Comm *user, int rpn, anyattn_cp_comm *c) {
  CP_MPI(MPI_Comm_dup(*user, &m->world), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
  CP_MPI(MPI_Comm_rank(m->world, &c->rank), "MPI_Comm_rank");
  CP_MPI(MPI_Comm_size(m->world, &c->size), "MPI_Comm_size");
  /* Every rank checks the same numbers, so every rank fails alike. */
  CP_CHECK(c->size <= CP_MAX_WORLD, ANYATTN_STATUS_INVALID_SIZE,
           "the communicator has %d ranks, context parallelism takes at most %d", c->size, CP_MAX_WORLD);
  CP_CHECK(rpn == 0 || c->size % rpn == 0, ANYATTN_STATUS_INVALID_SIZE,
           "ranks_per_node is %d, not a divisor of the communicator's %d ranks", rpn, c->size);
  c->ranks_per_node = rpn ? rpn : c->size;
  const int node = c->rank / c->ranks_per_node, local = c->rank % c->ranks_per_node;
  CP_MPI(MPI_Comm_split(m->world, node, local, &m->intra), "MPI_Comm_split (node)");
  CP_MPI(MPI_Comm_split(m->world, local, node, &m->inter), "MPI_Comm_split (local index)");
  MPI_Comm_set_errhandler(m->intra, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(m->inter, MPI_ERRORS_RETURN);
  return ANYATTN_STATUS_OK;
}

anyattn_status cp_mpi_comm_create(const void *mpi_comm, int rpn, anyattn_cp_comm *c) {
  int init = 0;
  MPI_Initialized(&init);
  CP_CHECK(init, ANYATTN_STATUS_INVALID_OPTION, "MPI is not initialised (call MPI_Init first)");
  cp_mpi *m = (cp_mpi *)calloc(1, sizeof *m);
  CP_CHECK(m != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "communicator allocation failed");
  m->world = m->intra = m->inter = MPI_COMM_NULL;
  const anyattn_status s = cp_mpi_split(m, (const MPI_Comm *)mpi_comm, rpn, c);
  if (s != ANYATTN_STATUS_OK) {
    cp_mpi_free_comms(m);
    free(m);
    return s;
  }
  c->impl = m;
  c->device = 0;
  return ANYATTN_STATUS_OK;
}

static void cp_mpi_free(anyattn_cp_comm *c) {
  cp_mpi *m = (cp_mpi *)c->impl;
  if (!m) return;
  cp_mpi_free_comms(m);
  free(m);
}

static anyattn_status cp_mpi_check_same(anyattn_cp_comm *c, const int64_t *v, int n, int *first_diff) {
  cp_mpi *m = (cp_mpi *)c->impl;
  int64_t lo[32], hi[32];
  CP_CHECK(n <= 32, ANYATTN_STATUS_INVALID_SIZE, "internal: %d values to compare", n);
  CP_MPI(MPI_Allreduce(v, lo, n, MPI_INT64_T, MPI_MIN, m->world), "MPI_Allreduce (plan check)");
  CP_MPI(MPI_Allreduce(v, hi, n, MPI_INT64_T, MPI_MAX, m->world), "MPI_Allreduce (plan check)");
  *first_diff = -1;
  for (int i = 0; i < n && *first_diff < 0; i++)
    if (lo[i] != hi[i]) *first_diff = i;
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_plan_init(anyattn_cp_plan *p) {
  cp_mpi_plan *s = (cp_mpi_plan *)calloc(1, sizeof *s);
  CP_CHECK(s != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  s->row = s->part = MPI_DATATYPE_NULL;
  p->tstate = s;
  if (p->z.mode == ANYATTN_CP_DECODE) {
    const int n = p->problem.num_q_heads * (p->problem.head_dim + 1); /* plan.c bounds it */
    CP_MPI(MPI_Type_contiguous(n, MPI_FLOAT, &s->part), "MPI_Type_contiguous");
    CP_MPI(MPI_Type_commit(&s->part), "MPI_Type_commit");
    return ANYATTN_STATUS_OK;
  }
  CP_CHECK(p->z.kv_row_bytes <= INT32_MAX, ANYATTN_STATUS_INVALID_SIZE, "a K/V row of %zu bytes is over INT_MAX",
           p->z.kv_row_bytes);
  CP_MPI(MPI_Type_contiguous((int)p->z.kv_row_bytes, MPI_BYTE, &s->row), "MPI_Type_contiguous");
  CP_MPI(MPI_Type_commit(&s->row), "MPI_Type_commit");
  /* intra-node and ring ops move buffer pages: at most 2 pieces a side, K and V;
   * inter-node ops send and receive the caller's rows: max_pieces a side */
  s->cap = 12 * p->z.world + 8 * p->z.G * p->max_pieces + 16;
  s->req = (MPI_Request *)malloc((size_t)s->cap * sizeof *s->req);
  CP_CHECK(s->req != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan allocation failed");
  return ANYATTN_STATUS_OK;
}

static void cp_mpi_plan_free(anyattn_cp_plan *p) {
  cp_mpi_plan *s = (cp_mpi_plan *)p->tstate;
  if (!s) return;
  if (s->row != MPI_DATATYPE_NULL) MPI_Type_free(&s->row);
  if (s->part != MPI_DATATYPE_NULL) MPI_Type_free(&s->part);
  free(s->req);
  free(s);
  p->tstate = NULL;
}

static anyattn_status cp_mpi_begin(cp_run *r) {
  ((cp_mpi_plan *)r->plan->tstate)->used = 0;
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_complete(cp_run *r, const cp_op *op) {
  cp_mpi_plan *s = (cp_mpi_plan *)r->plan->tstate;
  if (op->num_req == 0) return ANYATTN_STATUS_OK;
  CP_MPI(MPI_Waitall(op->num_req, s->req + op->first_req, MPI_STATUSES_IGNORE), "MPI_Waitall");
  return ANYATTN_STATUS_OK;
}

/* Ops run in issue order: an op after a step finds it done; after a transfer, it completes it. */
static anyattn_status cp_mpi_wait(cp_run *r, int op, int dep) {
  (void)op;
  const cp_op *d = &r->plan->ops[dep];
  return d->kind == CP_OP_XFER ? cp_mpi_complete(r, d) : ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_post(cp_run *r, int i, const cp_msg *msg, int nm) {
  const anyattn_cp_plan *p = r->plan;
  cp_mpi *m = (cp_mpi *)p->comm->impl;
  cp_mpi_plan *s = (cp_mpi_plan *)p->tstate;
  cp_op *op = &p->ops[i];
  MPI_Comm comm = op->level == 1 ? m->inter : p->z.mode == ANYATTN_CP_TWO_LEVEL ? m->intra : m->world;
  CP_CHECK(s->used + nm <= s->cap, ANYATTN_STATUS_INVALID_SIZE, "internal: %d requests over %d", s->used + nm,
           s->cap);
  op->first_req = s->used;
  op->num_req = 0;
  for (int k = 0; k < nm; k++) {
    MPI_Request *q = s->req + op->first_req + op->num_req;
    CP_CHECK(msg[k].rows <= INT32_MAX, ANYATTN_STATUS_INVALID_SIZE, "a message of %lld rows is over INT_MAX",
             (long long)msg[k].rows);
    if (msg[k].send)
      CP_MPI(MPI_Isend(msg[k].ptr, (int)msg[k].rows, s->row, msg[k].peer, 0, comm, q), "MPI_Isend");
    else
      CP_MPI(MPI_Irecv(msg[k].ptr, (int)msg[k].rows, s->row, msg[k].peer, 0, comm, q), "MPI_Irecv");
    op->num_req++;
    s->used++;
  }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_record(cp_run *r, int op) {
  (void)r;
  (void)op;
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_end(cp_run *r) {
  for (int i = 0; i < r->nops; i++)
    if (r->plan->ops[i].kind == CP_OP_XFER) CP_TRY(cp_mpi_complete(r, &r->plan->ops[i]));
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_mpi_allgather(const anyattn_cp_plan *p, const float *send, float *recv, int count,
                                       void *stream) {
  (void)stream;
  cp_mpi *m = (cp_mpi *)p->comm->impl;
  cp_mpi_plan *s = (cp_mpi_plan *)p->tstate;
  CP_MPI(MPI_Allgather(send, count, s->part, recv, count, s->part, m->world), "MPI_Allgather");
  return ANYATTN_STATUS_OK;
}

const cp_transport *cp_mpi_transport(void) {
  static const cp_transport t = {cp_mpi_check_same, cp_mpi_plan_init, cp_mpi_plan_free, cp_mpi_begin,
                                 cp_mpi_wait,       cp_mpi_post,      cp_mpi_record,    cp_mpi_end,
                                 cp_mpi_allgather,  cp_mpi_free};
  return &t;
}
