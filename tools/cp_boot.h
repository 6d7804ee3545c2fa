/* cp_boot.h: how the CLI joins a multi-process job for context parallelism:
 * MPI when the build has it (mpirun starts the processes), else RANK,
 * WORLD_SIZE and LOCAL_RANK from the environment with the NCCL id passed
 * through a file; then a libanyattn_cp communicator (MPI for the CPU backend,
 * NCCL for CUDA) and the few collectives the bench needs. */
#ifndef ANYATTN_TOOLS_CP_BOOT_H
#define ANYATTN_TOOLS_CP_BOOT_H

#include "anyattn.h"
#if defined(ANYATTN_WITH_CP)
#include "anyattn_cp.h"

typedef struct {
  anyattn_backend backend;
  int device, rank, world, local_rank, ranks_per_node;
  int mpi;          /* 1: MPI started the job (and this process initialised it) */
  void *nccl;       /* the job's ncclComm_t (CUDA) */
  void *scratch;    /* a device float for NCCL reductions */
  anyattn_cp_comm *comm;
} cp_boot;

/* Joins the job on `backend` (AUTO: CUDA where a device is, else the CPU);
 * ranks_per_node 0: the ranks sharing this host (MPI) or $LOCAL_WORLD_SIZE.
 * Returns 0, or an exit code after one line on stderr (77: no device). */
int cp_boot_init(cp_boot *b, anyattn_backend backend, int device, int ranks_per_node);
void cp_boot_fini(cp_boot *b);
void cp_boot_barrier(const cp_boot *b);
double cp_boot_max(const cp_boot *b, double v);
/* every rank's v, in rank order, into all[world] on rank 0 */
void cp_boot_gather(const cp_boot *b, double v, double *all);
#endif
#endif
