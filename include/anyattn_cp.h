/* anyattn_cp.h: context-parallel attention in libanyattn_cp, over the
 * communicators a multi-process job already has: an MPI communicator for the
 * CPU backend, an NCCL communicator for the CUDA backend.
 *
 * Three modes. RING and TWO_LEVEL prefill one or more whole sequences whose
 * tokens are spread over the ranks in the load-balanced causal (zigzag)
 * layout of docs/semantics.md#context-parallelism; K/V shards travel between
 * ranks while each rank attends its queries to the shard at hand and merges
 * the partial outputs through their log-sum-exp. TWO_LEVEL moves shards
 * between nodes at a level of their own, concurrently with the intra-node
 * ring (docs/design/context-parallel.md). DECODE attends queries present on
 * every rank to each rank's shard of a KV cache, then merges the partials
 * by log-sum-exp in one all-gather.
 *
 * The calls follow anyattn.h: plan once per problem and limits (checks,
 * sub-plans, workspace size), run as often as needed; run only enqueues work
 * (GPU: on the caller's stream and the communicator's own streams, ordered by
 * events; nothing allocates or waits on the host) and checks every argument
 * before it starts. Every call returns a status; anyattn_cp_last_error()
 * describes the calling thread's last failed anyattn_cp_* call. A
 * communicator and the plans made on it serve one run at a time. Every rank
 * of the communicator makes the same calls with the same problem, limits,
 * options and sequence lengths (MPI: plan creation checks this). */
#ifndef ANYATTN_CP_H
#define ANYATTN_CP_H

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Communicators.                                                            */
typedef struct anyattn_cp_comm_s anyattn_cp_comm;

/* Wraps an MPI communicator for plans on the CPU backend. `mpi_comm` points
 * to an MPI_Comm (passed by address so this header needs no mpi.h); MPI must
 * be initialised. Collective: every rank of the communicator calls it. The
 * library duplicates the communicator and splits it into nodes, so its
 * messages never meet the caller's. `ranks_per_node`: ranks of one node,
 * numbered consecutively (rank = node * ranks_per_node + local rank), a
 * divisor of the communicator's size; 0 means every rank on one node.
 * BACKEND_UNAVAILABLE when the library was built without MPI. */
ANYATTN_API anyattn_status anyattn_cp_comm_create_mpi(const void *mpi_comm, int ranks_per_node,
                                                      anyattn_cp_comm **comm);

/* Wraps an NCCL communicator (an ncclComm_t, passed as void *) for plans on
 * the CUDA backend, on the communicator's device. Collective, as above: the
 * library makes its own communicators with ncclCommSplit (all ranks, each
 * node, and the ranks of one local index across nodes) and two
 * communication streams (intra-node or ring; inter-node). BACKEND_UNAVAILABLE
 * when the library was built without NCCL. */
ANYATTN_API anyattn_status anyattn_cp_comm_create_nccl(void *nccl_comm, int ranks_per_node,
                                                       anyattn_cp_comm **comm);

/* Frees what create made (the caller's communicator stays). After every
 * plan made on it is freed. Accepts NULL. */
ANYATTN_API void anyattn_cp_comm_free(anyattn_cp_comm *comm);

/* This rank, the number of ranks and the ranks per node (each pointer may be NULL). */
ANYATTN_API anyattn_status anyattn_cp_comm_get(const anyattn_cp_comm *comm, int *rank, int *size,
                                               int *ranks_per_node);

/* ------------------------------------------------------------------------ */
/* The zigzag layout. A sequence of seq_len tokens over world_size ranks is
 * cut into 2 * world_size chunks; the first seq_len % (2 * world_size) chunks
 * hold one token more than the rest. Rank i holds chunks i and
 * 2 * world_size - 1 - i. Writes chunk `chunk`'s first token and length. */
ANYATTN_API anyattn_status anyattn_cp_chunk(int seq_len, int world_size, int chunk, int *start, int *len);

/* ------------------------------------------------------------------------ */
/* Plans.                                                                    */
typedef enum {
  ANYATTN_CP_RING = 0,      /* prefill: one ring over all ranks, passing K/V */
  ANYATTN_CP_TWO_LEVEL = 1, /* prefill: intra-node ring plus inter-node transfers at their own level */
  ANYATTN_CP_DECODE = 2     /* queries on every rank, KV cache sharded: local attention, one merge */
} anyattn_cp_mode;

/* Set struct_size = sizeof(anyattn_cp_options); anyattn_cp_options_init
 * fills the defaults. */
typedef struct {
  size_t struct_size;
  anyattn_cp_mode mode;  /* default RING */
  /* TWO_LEVEL: the share, in percent (0..100), of each inter-node K/V
   * transfer that moves during the intra-node steps, into spare buffers of
   * that size; the rest moves during the last intra-node step into the
   * buffer that step frees. 100 overlaps the inter-node transfer with the
   * whole intra-node ring for two more shard-sized buffers; 0 costs no
   * memory over RING. -1 (default): the largest share whose spare buffers
   * keep the extra memory within 5% of RING's. Ignored by the other modes. */
  int prefetch_percent;
} anyattn_cp_options;

ANYATTN_API void anyattn_cp_options_init(anyattn_cp_options *options);

typedef struct anyattn_cp_plan_s anyattn_cp_plan;

/* Plans context-parallel attention for `problem` on ctx's backend (CPU with
 * an MPI communicator, CUDA with an NCCL one on the context's device;
 * WRONG_CONTEXT otherwise).
 *   problem: as anyattn_plan_create takes it, sliding windows included:
 *            each step places its queries at their true distance from the
 *            keys at hand (batch->q_pos of its local calls). Prefill ignores
 *            block_size (the shards are dense).
 *   limits:  prefill: the whole batch as one device would see it: max_seqs
 *            sequences (at most 256), max_tokens tokens over all of them,
 *            max_context the longest sequence (at most 2^29). Decode: this rank's local
 *            batch, as anyattn_limits always means (max_context: the most
 *            keys a sequence has on this rank).
 * MPI: collective, and every rank must pass equal arguments (INVALID_OPTION
 * names the first difference). The plan keeps ctx and comm: both must
 * outlive it. */
ANYATTN_API anyattn_status anyattn_cp_plan_create(anyattn_context *ctx, anyattn_cp_comm *comm,
                                                  const anyattn_problem *problem, const anyattn_limits *limits,
                                                  const anyattn_cp_options *options, anyattn_cp_plan **plan);
ANYATTN_API void anyattn_cp_plan_free(anyattn_cp_plan *plan); /* accepts NULL */

/* Bytes of workspace a run needs: device memory on the CUDA backend, host
 * memory on the CPU; 256-byte aligned. */
ANYATTN_API size_t anyattn_cp_plan_workspace_size(const anyattn_cp_plan *plan);
/* Makes a workspace ready for runs of `plan`, once after allocating it
 * (anyattn_workspace_prepare for the local attention's part of it; the same
 * rules). Enqueued on `stream`; checks workspace and workspace_size as the
 * runs do. */
ANYATTN_API anyattn_status anyattn_cp_workspace_prepare(const anyattn_cp_plan *plan, void *workspace,
                                                        size_t workspace_size, void *stream);
/* One line: mode, ranks and nodes, steps, workspace. */
ANYATTN_API const char *anyattn_cp_plan_describe(const anyattn_cp_plan *plan);

/* How a plan's workspace divides. Set struct_size = sizeof(anyattn_cp_plan_info). */
typedef struct {
  size_t struct_size;
  anyattn_cp_mode mode;
  int world_size, rank, nodes, ranks_per_node;
  int steps;                /* attention steps per run: world_size (prefill), 1 (decode) */
  int prefetch_percent;     /* TWO_LEVEL: the share in use; else 0 */
  size_t workspace_bytes;   /* all of it */
  size_t local_bytes;       /* the workspace of local attention on this rank's shard (sub-plans) */
  size_t extra_bytes;       /* workspace_bytes - local_bytes: what context parallelism adds */
  size_t kv_bytes;          /* K/V shard buffers (prefill: two, plus the TWO_LEVEL spares) */
  size_t spare_bytes;       /* of kv_bytes, the TWO_LEVEL spares */
  size_t accumulator_bytes; /* fp32 output and LSE accumulators (prefill); fp32 partials sent
                             * and gathered (decode) */
  size_t metadata_bytes;    /* per-step batch metadata of the sub-plans */
} anyattn_cp_plan_info;

ANYATTN_API anyattn_status anyattn_cp_plan_get_info(const anyattn_cp_plan *plan, anyattn_cp_plan_info *info);

/* The info a plan would have, without a communicator: what `rank` of
 * world_size ranks (ranks_per_node per node; 0: one node) would be given,
 * for sizing before the job starts (`anyattn cp-model` uses it). Checks
 * what anyattn_cp_plan_create checks, except the communicator. */
ANYATTN_API anyattn_status anyattn_cp_plan_estimate(anyattn_context *ctx, const anyattn_problem *problem,
                                                    const anyattn_limits *limits, const anyattn_cp_options *options,
                                                    int world_size, int ranks_per_node, int rank,
                                                    anyattn_cp_plan_info *info);

/* ------------------------------------------------------------------------ */
/* Prefill (RING, TWO_LEVEL).                                                */

/* This rank's shard. Rows: for every sequence in order its chunk `rank`
 * (the front half), then for every sequence in order its chunk
 * 2 * world_size - 1 - rank (the back half); local_tokens rows in all. All in
 * the backend's memory (device memory on the CUDA backend), dense. Set
 * struct_size = sizeof(anyattn_cp_tensors). */
typedef struct {
  size_t struct_size;
  const void *q;       /* [local_tokens, num_q_heads, head_dim], problem dtype */
  const void *k;       /* [local_tokens, num_kv_heads, head_dim] */
  const void *v;       /* [local_tokens, num_kv_heads, head_dim] */
  const float *sinks;  /* [num_q_heads] fp32 logits, or NULL */
  void *out;           /* [local_tokens, num_q_heads, head_dim]: written */
  float *lse;          /* [local_tokens, num_q_heads] fp32, or NULL: written */
  const float *alibi_slopes; /* [num_q_heads] fp32, or NULL: ALiBi on the whole sequence's positions
                              * (the same slopes on every rank) */
} anyattn_cp_tensors;

ANYATTN_API void anyattn_cp_tensors_init(anyattn_cp_tensors *tensors);

/* Attention of this rank's queries to every key of their sequences, as
 * anyattn_run computes it on one device for the whole batch (docs/semantics.md:
 * sequence s has q_len = kv_len = seq_lens[s]). seq_lens: HOST array of
 * num_seqs whole-sequence lengths, each >= 0, the same on every rank (message
 * sizes depend on them). local_tokens follows from them and the layout; q, k,
 * v, out and lse hold exactly that many rows. `out` also serves as scratch
 * for each step's partial output before the final one is written.
 * Precision: each step's partial output is rounded to the problem dtype by the
 * local attention, then merged in fp32 and rounded once more at the end. */
ANYATTN_API anyattn_status anyattn_cp_prefill(const anyattn_cp_plan *plan, int num_seqs, const int32_t *seq_lens,
                                              const anyattn_cp_tensors *tensors, void *workspace,
                                              size_t workspace_size, void *stream);

/* ------------------------------------------------------------------------ */
/* Decode over a sharded KV cache (DECODE).                                  */

/* batch and tensors as anyattn_run takes them, over this rank's shard of the
 * cache: the same num_seqs, num_tokens and cu_seqlens_q on every rank (q is
 * the same on every rank); seq_lens_k, block_table, q_pos and the caches are
 * this rank's.
 * With batch->q_pos: each rank's shard of a sequence is a run of consecutive
 * positions of it (any length, 0 included) and q_pos[s] is the first query's
 * position minus the shard's first key's; the problem's mask, windows and
 * ALiBi then see true distances and holds_new_keys is ignored.
 * Without: windows and ALiBi are refused (UNSUPPORTED_OPTION, naming
 * q_pos); every rank's shard of a sequence holds at least its q_len keys (as
 * anyattn_run requires; e.g. at least one key per rank for decode), any
 * subset of the sequence's positions (attention is order-free then).
 * holds_new_keys: 1 on the rank whose shard ends, for every sequence of the
 * batch, with the queries' own keys (the rank that appended them); its local
 * attention is causal as anyattn_run defines it. 0: every key of this rank's
 * shard precedes the queries. With q_len = 1 both give the same result.
 * out (and lse) receive the merged attention over all ranks' keys, the same
 * on every rank; sinks enter once, and must be fp32 (tensors->sinks_dtype
 * F32, else UNSUPPORTED_OPTION); alibi_slopes may be 16-bit, as anyattn_run
 * takes them. Same precision note as prefill. */
ANYATTN_API anyattn_status anyattn_cp_decode(const anyattn_cp_plan *plan, const anyattn_batch *batch,
                                             const anyattn_tensors *tensors, int holds_new_keys, void *workspace,
                                             size_t workspace_size, void *stream);

/* Message of the last error of an anyattn_cp_* call on this thread, naming
 * the offending argument; when a call of libanyattn failed inside, its
 * message (anyattn_last_error) follows. Empty after a call that succeeded. */
ANYATTN_API const char *anyattn_cp_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_CP_H */
