/* cp_boot.c: joining a multi-process job for the context-parallel bench (see
 * cp_boot.h): MPI or environment variables for the ranks, NCCL's unique id
 * by MPI broadcast or through a file, a barrier, a max and a gather. */
#define _POSIX_C_SOURCE 200809L
#include "cp_boot.h"

#if defined(ANYATTN_WITH_CP)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmem.h"
#if defined(ANYATTN_CP_WITH_MPI)
#include <mpi.h>
#endif
#if defined(ANYATTN_CP_WITH_NCCL)
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

static int __attribute__((unused)) env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* rank, world, local rank and ranks per host. */
static int boot_ranks(cp_boot *b) {
#if defined(ANYATTN_CP_WITH_MPI)
  int init = 0;
  MPI_Initialized(&init);
  if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS) return fprintf(stderr, "anyattn: MPI_Init failed\n"), 1;
  b->mpi = !init;
  MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b->world);
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b->rank, MPI_INFO_NULL, &host);
  int per_host = 1;
  MPI_Comm_rank(host, &b->local_rank);
  MPI_Comm_size(host, &per_host);
  MPI_Comm_free(&host);
  if (!b->ranks_per_node) b->ranks_per_node = per_host;
#else
  b->rank = env_int("RANK", 0);
  b->world = env_int("WORLD_SIZE", 1);
  b->local_rank = env_int("LOCAL_RANK", b->rank);
  if (!b->ranks_per_node) b->ranks_per_node = env_int("LOCAL_WORLD_SIZE", b->world);
#endif
  if (b->world < 1 || b->rank < 0 || b->rank >= b->world)
    return fprintf(stderr, "anyattn: rank %d of %d ranks is not a job\n", b->rank, b->world), 1;
  if (b->world % b->ranks_per_node) b->ranks_per_node = b->world; /* uneven hosts: one level */
  return 0;
}

#if defined(ANYATTN_CP_WITH_NCCL)
/* Rank 0's NCCL id to every rank: MPI broadcast, or the file $ANYATTN_NCCL_ID_FILE. */
static int share_id(const cp_boot *b, ncclUniqueId *id) {
  if (b->rank == 0 && ncclGetUniqueId(id) != ncclSuccess) return fprintf(stderr, "anyattn: ncclGetUniqueId failed\n"), 1;
#if defined(ANYATTN_CP_WITH_MPI)
  MPI_Bcast(id, (int)sizeof *id, MPI_BYTE, 0, MPI_COMM_WORLD);
  return 0;
#else
  if (b->world == 1) return 0;
  const char *path = getenv("ANYATTN_NCCL_ID_FILE");
  if (!path || !*path)
    return fprintf(stderr, "anyattn: several ranks without MPI: set ANYATTN_NCCL_ID_FILE to a new file path\n"), 1;
  if (b->rank == 0) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
      return fprintf(stderr, "anyattn: cannot write %s\n", path), 1;
    return 0;
  }
  for (int tries = 0; tries < 1200; tries++) { /* two minutes */
    FILE *f = fopen(path, "rb");
    if (f) {
      const size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  return fprintf(stderr, "anyattn: no NCCL id in %s after two minutes\n", path), 1;
#endif
}
#endif

int cp_boot_init(cp_boot *b, anyattn_backend backend, int device, int ranks_per_node) {
  memset(b, 0, sizeof *b);
  b->ranks_per_node = ranks_per_node;
  if (boot_ranks(b)) return 1;
  int count = 0;
  if (backend == ANYATTN_BACKEND_AUTO)
    backend = anyattn_device_count(ANYATTN_BACKEND_CUDA, &count) == ANYATTN_STATUS_OK && count > 0 ? ANYATTN_BACKEND_CUDA
                                                                                                    : ANYATTN_BACKEND_CPU;
  b->backend = backend;
  b->device = b->world > 1 && backend == ANYATTN_BACKEND_CUDA && count > 0 ? b->local_rank % count : device;
  anyattn_status s = ANYATTN_STATUS_BACKEND_UNAVAILABLE;
  if (backend == ANYATTN_BACKEND_CPU) {
#if defined(ANYATTN_CP_WITH_MPI)
    MPI_Comm world = MPI_COMM_WORLD;
    s = anyattn_cp_comm_create_mpi(&world, b->ranks_per_node, &b->comm);
#else
    fprintf(stderr, "anyattn: context parallelism on the CPU needs MPI, which this build lacks\n");
    return 1;
#endif
  } else if (backend == ANYATTN_BACKEND_CUDA) {
#if defined(ANYATTN_CP_WITH_NCCL)
    if (anyattn_device_count(ANYATTN_BACKEND_CUDA, &count) != ANYATTN_STATUS_OK || count == 0)
      return fprintf(stderr, "anyattn: %s\n", anyattn_last_error()), 77;
    ncclUniqueId id;
    ncclComm_t nc = NULL;
    if (dm_set_device(backend, b->device) || share_id(b, &id)) return 1;
    if (ncclCommInitRank(&nc, b->world, id, b->rank) != ncclSuccess)
      return fprintf(stderr, "anyattn: ncclCommInitRank failed\n"), 1;
    b->nccl = nc;
    b->scratch = dm_alloc(backend, 2 * sizeof(double) * (size_t)b->world);
    s = anyattn_cp_comm_create_nccl(nc, b->ranks_per_node, &b->comm);
#else
    fprintf(stderr, "anyattn: context parallelism on CUDA needs NCCL, which this build lacks\n");
    return 1;
#endif
  }
  if (s != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_cp_last_error());
    return s == ANYATTN_STATUS_NO_DEVICE ? 77 : 1;
  }
  return 0;
}

void cp_boot_fini(cp_boot *b) {
  anyattn_cp_comm_free(b->comm);
#if defined(ANYATTN_CP_WITH_NCCL)
  if (b->nccl) ncclCommDestroy((ncclComm_t)b->nccl);
  dm_free(b->backend, b->scratch);
#endif
#if defined(ANYATTN_CP_WITH_MPI)
  if (b->mpi) MPI_Finalize();
#endif
}

/* v of every rank into all[world]: MPI_Allgather, or NCCL's on device memory. */
static void allgather(const cp_boot *b, double v, double *all) {
  if (b->world == 1) {
    all[0] = v;
    return;
  }
#if defined(ANYATTN_CP_WITH_MPI)
  MPI_Allgather(&v, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
#elif defined(ANYATTN_CP_WITH_NCCL)
  double *d = (double *)b->scratch;
  cudaMemcpy(d + b->world, &v, sizeof v, cudaMemcpyHostToDevice);
  ncclAllGather(d + b->world, d, 1, ncclDouble, (ncclComm_t)b->nccl, 0);
  cudaMemcpy(all, d, sizeof(double) * (size_t)b->world, cudaMemcpyDeviceToHost);
#endif
}

void cp_boot_barrier(const cp_boot *b) {
  double *all = (double *)malloc(sizeof(double) * (size_t)b->world);
  allgather(b, 0.0, all);
  free(all);
}

double cp_boot_max(const cp_boot *b, double v) {
  double *all = (double *)malloc(sizeof(double) * (size_t)b->world), m = v;
  allgather(b, v, all);
  for (int i = 0; i < b->world; i++) m = all[i] > m ? all[i] : m;
  free(all);
  return m;
}

void cp_boot_gather(const cp_boot *b, double v, double *all) { allgather(b, v, all); }
#endif
