/* anyattn.h: the one public header of libanyattn, a paged-attention library for
 * prefill, decode and mixed batches on CPUs, NVIDIA (CUDA) and AMD (HIP) GPUs.
 *
 * The contract every backend computes is written down in docs/semantics.md.
 * Usage: create a context for a backend and device, plan once per problem
 * (validates, picks a kernel configuration, sizes the workspace), then run as
 * often as needed. run() only launches: it never allocates, synchronises or
 * reads device memory on the host, so it can be captured in a CUDA/HIP graph.
 * The caller owns all memory. Every call returns a status; the message of the
 * last error on the calling thread is available from anyattn_last_error(). */
#ifndef ANYATTN_H
#define ANYATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define ANYATTN_API __declspec(dllexport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define ANYATTN_API __attribute__((visibility("default")))
#else
#  define ANYATTN_API
#endif

#define ANYATTN_VERSION_MAJOR 0
#define ANYATTN_VERSION_MINOR 1
#define ANYATTN_VERSION_PATCH 0
#define ANYATTN_VERSION_NUMBER \
  (ANYATTN_VERSION_MAJOR * 10000 + ANYATTN_VERSION_MINOR * 100 + ANYATTN_VERSION_PATCH)

/* Runtime version: ANYATTN_VERSION_NUMBER of the library actually linked. */
ANYATTN_API unsigned anyattn_version_number(void);
ANYATTN_API const char *anyattn_version_string(void);

/* ------------------------------------------------------------------------ */
/* Threads. The library takes no locks: what calls share is one of the
 * objects below, per-thread state, or the tree state of the last item
 * (tests/test_threads.c exercises these rules).
 *  - Contexts and plans are read-only once created: any number of threads
 *    may create plans on one context, and run, validate or describe one plan,
 *    at the same time. Free an object once, when no call is using it; a
 *    context must outlive its plans.
 *  - A workspace serves one run at a time: run writes into it (the CPU
 *    backend its work-item prefix sums and each OpenMP thread's scratch, GPU
 *    backends their split-KV partials), so give each thread (CPU) or each
 *    stream (GPU) its own. On a GPU, runs ordered on one stream may share a
 *    workspace without synchronising; runs on different streams may not
 *    unless events order them. A captured graph keeps using the workspace it
 *    was captured with: its replays count as runs. The same holds for out
 *    and lse. q, the caches, alibi_slopes, sinks and the batch metadata are
 *    only read: threads and streams may share them.
 *  - Streams: run enqueues on the stream it is given and never synchronises;
 *    several threads may launch into one stream. GPU context_create,
 *    plan_create and run make the context's device current on the calling
 *    thread (cudaSetDevice / hipSetDevice) and leave it so.
 *  - The CPU backend runs each call on an OpenMP team of the calling
 *    thread's omp_get_max_threads() threads, at most as many as the planning
 *    thread's (the workspace holds one scratch per thread). Concurrent runs
 *    each start a team: lower OMP_NUM_THREADS, or call omp_set_num_threads()
 *    in each calling thread, so that they share the cores rather than
 *    oversubscribe them.
 *  - anyattn_last_error() is per thread: it describes the calling thread's
 *    last call, whatever other threads do.
 *  - anyattn_tree_load() replaces the process's loaded tree atomically:
 *    threads may plan, describe or load trees meanwhile, and each plan keeps
 *    the tree that was in use when it was made (a replaced tree is never
 *    freed), so runs go on unaffected. $ANYATTN_TREE is read once, by the
 *    first call that needs a tree, unless anyattn_tree_load ran before it. */

/* ------------------------------------------------------------------------ */
/* Status codes. Values are fixed and append-only.                           */
typedef enum {
  ANYATTN_STATUS_OK = 0,
  ANYATTN_STATUS_NULL_POINTER = 1,          /* a required pointer is NULL */
  ANYATTN_STATUS_INVALID_SIZE = 2,          /* a count or size is out of range */
  ANYATTN_STATUS_HEAD_RATIO = 3,            /* num_q_heads not a multiple of num_kv_heads */
  ANYATTN_STATUS_UNSUPPORTED_DTYPE = 4,
  ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM = 5,
  ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE = 6,
  ANYATTN_STATUS_BAD_STRIDE = 7,            /* cache strides overlap, are negative or misaligned */
  ANYATTN_STATUS_INVALID_OPTION = 8,        /* scale, softcap, window or causal flag invalid */
  ANYATTN_STATUS_WORKSPACE_TOO_SMALL = 9,
  ANYATTN_STATUS_LIMIT_EXCEEDED = 10,       /* batch larger than the limits given to plan */
  ANYATTN_STATUS_BAD_METADATA = 11,         /* validate(): cu_seqlens_q, seq_lens_k or block table wrong */
  ANYATTN_STATUS_BACKEND_UNAVAILABLE = 12,  /* backend not compiled into this library */
  ANYATTN_STATUS_NO_DEVICE = 13,            /* backend compiled in, but no usable device */
  ANYATTN_STATUS_DEVICE_ERROR = 14,         /* the GPU runtime reported an error */
  ANYATTN_STATUS_OUT_OF_MEMORY = 15,        /* host allocation of a plan or context failed */
  ANYATTN_STATUS_STRUCT_SIZE = 16,          /* struct_size field unknown to this library */
  ANYATTN_STATUS_WRONG_CONTEXT = 17,        /* object used with a context or backend it was not made for */
  ANYATTN_STATUS_UNSUPPORTED_CONFIG = 18,   /* forced config unknown or invalid for the problem */
  ANYATTN_STATUS_COMM_ERROR = 19,           /* the communicator (MPI, NCCL) reported an error (anyattn_cp.h) */
  ANYATTN_STATUS_UNSUPPORTED_OPTION = 20    /* a valid problem option the call cannot compute, e.g. a
                                             * sliding window or ALiBi in context-parallel decode
                                             * without batch->q_pos */
} anyattn_status;

/* Constant name of a status ("ANYATTN_STATUS_..."), or "unknown status". */
ANYATTN_API const char *anyattn_status_name(anyattn_status status);
/* Message of the last error on this thread: names the offending argument.
 * Empty string when the last call succeeded. Valid until the next call. */
ANYATTN_API const char *anyattn_last_error(void);

/* ------------------------------------------------------------------------ */
/* Backends, devices and contexts.                                          */
typedef enum {
  ANYATTN_BACKEND_AUTO = 0, /* best available: CUDA, then HIP, then CPU */
  ANYATTN_BACKEND_CPU = 1,
  ANYATTN_BACKEND_CUDA = 2,
  ANYATTN_BACKEND_HIP = 3
} anyattn_backend;

ANYATTN_API const char *anyattn_backend_name(anyattn_backend backend);
/* Parses "cpu", "cuda", "hip" or "auto"; BACKEND_UNAVAILABLE status on other text. */
ANYATTN_API anyattn_status anyattn_backend_from_name(const char *name, anyattn_backend *backend);
/* 1 when the backend was compiled into this library, else 0. */
ANYATTN_API int anyattn_backend_compiled(anyattn_backend backend);
/* Number of usable devices (the CPU backend reports 1). NO_DEVICE when none. */
ANYATTN_API anyattn_status anyattn_device_count(anyattn_backend backend, int *count);
/* Human-readable device name ("NVIDIA H200", "x86_64, 2 threads"). */
ANYATTN_API anyattn_status anyattn_device_name(anyattn_backend backend, int device, char *buf,
                                               size_t buf_size);

typedef struct anyattn_context_s anyattn_context;

/* Opens backend `backend` on device index `device` (0 for the CPU). AUTO
 * resolves to the best backend with a device. */
ANYATTN_API anyattn_status anyattn_context_create(anyattn_backend backend, int device,
                                                  anyattn_context **ctx);
ANYATTN_API void anyattn_context_free(anyattn_context *ctx); /* accepts NULL */
ANYATTN_API anyattn_backend anyattn_context_backend(const anyattn_context *ctx);
/* The device index the context was opened on (0 for the CPU), or -1 for NULL. */
ANYATTN_API int anyattn_context_device(const anyattn_context *ctx);

/* ------------------------------------------------------------------------ */
/* Problem, limits, plan.                                                    */
typedef enum {
  ANYATTN_DTYPE_F32 = 0,
  ANYATTN_DTYPE_F16 = 1,
  ANYATTN_DTYPE_BF16 = 2
} anyattn_dtype;

ANYATTN_API size_t anyattn_dtype_size(anyattn_dtype dtype); /* 0 for unknown */

/* Storage format of the KV cache (docs/semantics.md, "fp8 caches"). The fp8
 * formats hold codes that run converts exactly to the 16-bit problem dtype;
 * tensors->k_descale and v_descale scale the scores and the output. Values
 * are fixed and append-only. */
typedef enum {
  ANYATTN_KV_AS_Q = 0,          /* the caches hold the problem's dtype */
  ANYATTN_KV_FP8_E4M3 = 1,      /* OCP FP8 E4M3 ("e4m3fn"): bias 7, no infinities, 0x7f/0xff NaN, max 448 */
  ANYATTN_KV_FP8_E4M3FNUZ = 2   /* FP8 E4M3 FNUZ (AMD MI300): bias 8, 0x80 the only NaN, no -0, max 240 */
} anyattn_kv_dtype;

/* Bytes per cache element for a problem of dtype `dtype` with caches of
 * kv_dtype: 1 for the fp8 formats, anyattn_dtype_size(dtype) for AS_Q; 0 for
 * an unknown value. */
ANYATTN_API size_t anyattn_kv_dtype_size(anyattn_kv_dtype kv_dtype, anyattn_dtype dtype);
/* Constant name ("as_q", "fp8_e4m3", "fp8_e4m3fnuz"), or "unknown". */
ANYATTN_API const char *anyattn_kv_dtype_name(anyattn_kv_dtype kv_dtype);

/* How tensors->k_descale and v_descale are laid out. Values are fixed and
 * append-only. */
typedef enum {
  ANYATTN_DESCALE_PER_TENSOR = 0,   /* k_descale[0], v_descale[0] */
  ANYATTN_DESCALE_PER_SEQ_HEAD = 1  /* [num_seqs, num_kv_heads]: index seq * num_kv_heads + kv_head */
} anyattn_descale_layout;

/* What is fixed for a layer. Set struct_size = sizeof(anyattn_problem); zero
 * the struct first (anyattn_problem_init does both, with defaults). Plan
 * refuses (INVALID_SIZE) a cache page, block_size x num_kv_heads x head_dim
 * elements of the cache's type, over PTRDIFF_MAX bytes. */
typedef struct {
  size_t struct_size;
  int num_q_heads;      /* 1..65536, multiple of num_kv_heads */
  int num_kv_heads;     /* 1..65536 */
  int head_dim;         /* 1..65536; CPU: any of 1..512; GPU: a multiple of 8 in 32..512 */
  anyattn_dtype dtype;  /* of q and out, and of the caches unless kv_dtype says otherwise */
  int block_size;       /* tokens per KV page; CPU: >= 1 */
  int causal;           /* 0 or 1 */
  int window_left;      /* -1: unbounded; else keys j >= p - window_left (plan treats
                         * windows >= limits.max_context + 2^29 as unbounded) */
  int window_right;     /* -1: unbounded; non-causal only: keys j <= p + window_right */
  float scale;          /* 0: 1/sqrt(head_dim); else finite and > 0 */
  float softcap;        /* 0: none; else finite and > 0 */
  const char *config;   /* NULL: the library chooses; else a config name to force, GPU
                         * optionally suffixed "-kS" (1 <= S <= 128) to force S KV segments
                         * for decode-like batches (mean q_len <= 8; -k1 never splits) where
                         * the workspace holds S x num_tokens partial rows, else one segment;
                         * GPU role pairs "PREFILL+DECODE" (rows paired in the build; CUDA:
                         * "m128n128w8s2+m16n128w8s2" at head dims up to 128) run
                         * every batch as one launch, sequences of one decode Q block on the
                         * DECODE row (-kS: its segments), the rest on PREFILL;
                         * forcing changes what runs, not the plan's limits or workspace */
  anyattn_kv_dtype kv_dtype; /* storage of k_cache and v_cache: ANYATTN_KV_AS_Q (init) or an fp8
                              * format, which needs dtype BF16 or F16 (else UNSUPPORTED_OPTION);
                              * an unknown value is INVALID_OPTION. A backend that does not read
                              * fp8 caches refuses them in plan with UNSUPPORTED_OPTION */
} anyattn_problem;

ANYATTN_API void anyattn_problem_init(anyattn_problem *problem);

/* Upper bounds for every batch run with a plan; plan sizes grids and the
 * workspace from these alone. Each is 1..INT32_MAX; plan refuses
 * (INVALID_SIZE) max_tokens x num_q_heads x head_dim elements of q over
 * PTRDIFF_MAX bytes. */
typedef struct {
  size_t struct_size;
  int max_seqs;      /* >= num_seqs of every run */
  int max_tokens;    /* >= num_tokens (total query tokens) of every run */
  int max_context;   /* >= every seq_lens_k entry; at most 2^29 */
  /* fp8 caches (problem->kv_dtype) on GPU backends: 0 (init) converts the
   * codes inside the attention kernel. N > 0 adds room for a 16-bit copy of
   * N keys of K and V to the workspace (plus a page per sequence for
   * rounding, and a page table): a batch that runs on a prefill tile, with a
   * mean q_len of at least 64, whose keys fit by the host's bound
   * (num_seqs x pages of batch->max_kv_len, else of limits.max_context, or
   * the pages of batch->sum_kv_len plus one per sequence) then runs as two
   * kernels: one converts its sequences' pages exactly into the copy, the
   * attention kernel of 16-bit caches reads the copy (descales applied as
   * with codes). docs/semantics.md, "fp8 caches". A sequence that does not
   * fit after all (a hint that was not a bound) reads NaN keys: its rows come
   * out NaN. 0..2^29; the CPU backend and 16-bit caches ignore it. */
  int stage_kv_tokens;
} anyattn_limits;

ANYATTN_API void anyattn_limits_init(anyattn_limits *limits);

typedef struct anyattn_plan_s anyattn_plan;

ANYATTN_API anyattn_status anyattn_plan_create(anyattn_context *ctx, const anyattn_problem *problem,
                                               const anyattn_limits *limits, anyattn_plan **plan);
ANYATTN_API void anyattn_plan_free(anyattn_plan *plan); /* accepts NULL */
/* Bytes of workspace run() needs (0 is possible). Device memory for GPU
 * backends, host memory for the CPU; alignment 256 bytes. Prepare a new
 * workspace once with anyattn_workspace_prepare before its first run. */
ANYATTN_API size_t anyattn_plan_workspace_size(const anyattn_plan *plan);
/* Makes a workspace ready for runs of `plan`; call it once after allocating
 * the workspace, before its first run, on the stream of its runs (or with
 * that stream ordered after it). GPU plans that split decode-like batches
 * over KV segments keep one arrival counter per program at the workspace's
 * head, and sm_90 plans over 16-bit caches two counters of work handed out
 * to persistent blocks at its end; all must be zero before a run, and every
 * run leaves them zero again (the last segment or block to arrive resets
 * them), so no run needs this again. Prepare again when anything but a run
 * has written the workspace, and before runs of a plan with another problem
 * or other limits (their counters lie elsewhere: a workspace serves plans of
 * one problem and limits). GPU: one or two cudaMemsetAsync / hipMemsetAsync
 * of the counters on `stream`, never synchronised, legal inside a graph
 * capture; the CPU backend and plans without counters need nothing (OK,
 * nothing written).
 * Checks workspace and workspace_size as run does. A run on a workspace that
 * was not prepared computes wrong results or none: the library cannot see
 * device memory from the host. */
ANYATTN_API anyattn_status anyattn_workspace_prepare(const anyattn_plan *plan, void *workspace,
                                                     size_t workspace_size, void *stream);
/* One line describing the choice plan made (config, split), for logs and CLI. */
ANYATTN_API const char *anyattn_plan_describe(const anyattn_plan *plan);

/* ------------------------------------------------------------------------ */
/* Run.                                                                      */

/* What the work before a call may write while the call starts
 * (anyattn_batch.prior_writes). Values are fixed and append-only. */
typedef enum {
  /* Anything (init): the call reads nothing but its arguments before that
   * work has finished. */
  ANYATTN_PRIOR_WRITES_ANY = 0,
  /* The caller promises that the work before the call writes none of this
   * batch's metadata (cu_seqlens_q, seq_lens_k, q_pos, block_table), no
   * alibi_slopes, sinks or descales, and of the caches only the rows of each
   * sequence's newest q_len keys (positions kv_len - q_len .. kv_len - 1), as
   * a serving step's QKV projection and cache write do. The call then finds
   * its work, reads page ids and starts loading K/V tiles of older keys
   * before that work has finished; q, out, lse and the workspace are touched
   * only after it. A broken promise gives wrong results. */
  ANYATTN_PRIOR_WRITES_NEW_KEYS = 1
} anyattn_prior_writes;

/* Batch metadata. All arrays live in the backend's memory (device memory
 * for GPU backends) and are int32. For anyattn_validate() they are host
 * copies instead. */
typedef struct {
  size_t struct_size;
  int num_seqs;                 /* 0 <= num_seqs <= limits.max_seqs; sequences with
                                 * q_len 0 cost nothing (padding for graph replays) */
  int num_tokens;               /* rows of q and out; >= cu_seqlens_q[num_seqs] (rows
                                 * past it are padding, e.g. for graph replays, and are
                                 * not written) */
  const int32_t *cu_seqlens_q;  /* [num_seqs + 1], cu[0] = 0, non-decreasing */
  const int32_t *seq_lens_k;    /* [num_seqs], kv_len per sequence; q_len <= kv_len
                                 * unless q_pos is given */
  const int32_t *block_table;   /* [num_seqs, block_table_stride] physical page ids */
  int block_table_stride;       /* >= pages of the longest sequence */
  /* Optional host-side hints (0: unknown), as serving engines know them:
   * upper bounds of q_len and kv_len over the batch. They steer the choice of
   * tiles and KV splits only; validate checks that they are bounds. */
  int max_q_len;
  int max_kv_len;
  /* [num_seqs] or NULL (the default): where each sequence's queries sit among
   * its keys. Query i of sequence s is at position p = q_pos[s] + i (NULL:
   * p = kv_len - q_len + i, the queries are the last q_len keys). Causal
   * masks, windows and ALiBi all follow p. Any value with
   * -2^29 <= q_pos[s] and q_pos[s] + q_len <= 2^29: before the first key, past
   * the last (e.g. a block of queries after a block of earlier keys); with
   * q_pos, q_len may exceed kv_len. Rows that see no key get out 0, lse -inf.
   * Same memory as the other arrays. */
  const int32_t *q_pos;
  /* What the work enqueued before this call on its stream may still be
   * writing when the call's kernel starts (GPU backends that launch with
   * programmatic dependent launch, sm_90: the kernel starts while the one
   * before it drains; elsewhere no effect). docs/semantics.md, "Overlap with
   * the work before a call". */
  anyattn_prior_writes prior_writes;
  /* Optional host-side hint (0: unknown): an upper bound of the sum of
   * seq_lens_k over the batch's num_seqs sequences, as a serving engine that
   * keeps its sequence lengths on the host knows it. With the max hints it
   * tells equal-length batches from batches of mixed lengths (the mean
   * context sum_kv_len / num_seqs is a tree feature), which steers the choice
   * of tiles; at most num_seqs * (max_kv_len, else limits.max_context);
   * validate checks that it is a bound. */
  int64_t sum_kv_len;
} anyattn_batch;

ANYATTN_API void anyattn_batch_init(anyattn_batch *batch);

/* Tensors. Cache strides are in elements of the cache's type (bytes for the
 * fp8 kv_dtypes), all other sizes in elements of the problem's dtype. */
typedef struct {
  size_t struct_size;
  const void *q;       /* [num_tokens, num_q_heads, head_dim], dense */
  const void *k_cache; /* logical [num_blocks, block_size, num_kv_heads, head_dim] */
  const void *v_cache; /* same logical shape as k_cache */
  int64_t num_blocks;  /* physical pages in each cache; the cache must span at most
                        * PTRDIFF_MAX bytes (else INVALID_SIZE, or BAD_STRIDE), counted in
                        * elements of the cache's type */
  /* Strides of the first three dims of each cache (head_dim is contiguous).
   * All zero: dense NHD layout. HND: stride_token = head_dim,
   * stride_head = block_size * head_dim. */
  int64_t k_stride_block, k_stride_token, k_stride_head;
  int64_t v_stride_block, v_stride_token, v_stride_head;
  const void *alibi_slopes; /* [num_q_heads] of alibi_slopes_dtype, or NULL */
  const void *sinks;        /* [num_q_heads] logits of sinks_dtype, or NULL */
  void *out;                 /* [num_tokens, num_q_heads, head_dim], dense */
  float *lse;                /* [num_tokens, num_q_heads] fp32 or NULL; never includes v_descale */
  /* Dequantisation factors of fp8 caches (problem->kv_dtype not AS_Q), fp32
   * in the backend's memory (device memory for GPU backends), read by each
   * run (graph replays see the values of the moment); NULL means 1.0. The
   * scores are scale * k_descale * dot(q, k_code), the output v_descale *
   * sum(p_j v_code_j) / denom. Either non-NULL with kv_dtype AS_Q is
   * INVALID_OPTION; an unknown descale_layout is INVALID_OPTION. */
  const float *k_descale;
  const float *v_descale;
  anyattn_descale_layout descale_layout; /* init: ANYATTN_DESCALE_PER_TENSOR */
  /* The element types of alibi_slopes and sinks: ANYATTN_DTYPE_F32 (init),
   * BF16 or F16 (a model's parameters as it holds them, such as gpt-oss's
   * bf16 sinks), in the same memory as the other tensors and aligned to
   * their element size; each value is widened to fp32 exactly where it is
   * read, nothing is copied. Another value is INVALID_OPTION.
   * anyattn_cp_decode takes fp32 sinks only (UNSUPPORTED_OPTION). */
  anyattn_dtype alibi_slopes_dtype;
  anyattn_dtype sinks_dtype;
} anyattn_tensors;

ANYATTN_API void anyattn_tensors_init(anyattn_tensors *tensors);

/* Launches attention on `stream` (cudaStream_t / hipStream_t; NULL is the
 * default stream; ignored by the CPU backend, which returns when done).
 * Checks every argument the host can see; on any error nothing is written.
 * The metadata contents are trusted: check them once with anyattn_validate.
 * The caches are never written. */
ANYATTN_API anyattn_status anyattn_run(const anyattn_plan *plan, const anyattn_batch *batch,
                                       const anyattn_tensors *tensors, void *workspace,
                                       size_t workspace_size, void *stream);

/* Host-side check of host copies of the batch metadata against a plan:
 * cu_seqlens_q monotonic from 0, 0 <= q_len <= kv_len <=
 * max_context (q_len unbounded by kv_len when q_pos is given; q_pos in
 * range as anyattn_batch says), cu_seqlens_q[num_seqs] <= num_tokens, the block table wide
 * enough, and every page id that run will read in [0, num_blocks).
 * BAD_METADATA names the first offender. */
ANYATTN_API anyattn_status anyattn_validate(const anyattn_plan *plan, const anyattn_batch *host_batch,
                                            int64_t num_blocks);

/* What anyattn_run would launch for this batch, as one line into buf (cut
 * to buf_size - 1 characters), e.g. "m64n64w4s2, unsplit" or "m16n128w8s2,
 * 16 segments merged by the last to arrive": GPU backends choose a tile
 * and split per batch from its counts and host hints (anyattn_batch's
 * num_seqs, num_tokens, max_q_len, max_kv_len, sum_kv_len; its arrays are
 * not read), the CPU backend has plan's one tiling (anyattn_plan_describe's
 * line). Checks the batch's sizes as run does; NULL_POINTER without plan,
 * batch or buf, INVALID_SIZE for buf_size 0. */
ANYATTN_API anyattn_status anyattn_run_describe(const anyattn_plan *plan, const anyattn_batch *batch, char *buf,
                                                size_t buf_size);

/* ------------------------------------------------------------------------ */
/* Kernel configurations (the tile table), for tools and logs.             */
typedef struct {
  size_t struct_size;
  char name[32];   /* e.g. "m64n64w4s2" */
  int block_m;     /* query rows per program: BLOCK_Q tokens x the GQA group */
  int block_n;     /* keys per KV tile, independent of the page size */
  int warps;       /* warps (wavefronts) per program */
  int stages;      /* K/V pipeline depth in shared memory */
} anyattn_config_info;

/* Number of configs the backend was built with. */
ANYATTN_API int anyattn_config_count(anyattn_backend backend);
ANYATTN_API anyattn_status anyattn_config_get(anyattn_backend backend, int index,
                                              anyattn_config_info *info);

/* ------------------------------------------------------------------------ */
/* Decision trees: how GPU plans pick a config from host-visible batch sizes.
 * Trees are tuned offline (`anyattn tune`) and compiled in per device; a
 * JSON tree file written by the tuner can replace them for this process
 * ($ANYATTN_TREE does the same at the first plan). No timing ever happens in
 * plan or run. */
/* Loads a tree file; NULL goes back to the compiled-in trees. A loaded tree
 * serves every device until the next load. The file must be a regular file of
 * at most 1 MiB holding a tree as `anyattn tune` writes it: at most 512 nodes,
 * inner nodes {"feature": F, "threshold": T, "left": L, "right": R} with F in
 * [0, ANYATTN_TREE_FEATURE_COUNT), T finite, each node but the root the child
 * of exactly one node before it; leaves {"config": NAME, "splits": S} with
 * NAME under 32 characters and S in [0, 128] (0: the backend decides).
 * INVALID_OPTION when the file cannot be read or is not such a tree,
 * INVALID_SIZE when it is too large or has too many nodes, OUT_OF_MEMORY; the
 * message names the file and the node and field at fault. A failed load leaves
 * the tree in use before it in place. A plan keeps the tree in use when it was
 * made (replaced trees are never freed); loads may come from any thread. The
 * first plan or tree call loads $ANYATTN_TREE the same way, unless this was
 * called before; a bad one is reported by one line on stderr (the library's
 * only output of its own) and by anyattn_tree_describe, and the compiled-in
 * trees stay in charge. */
ANYATTN_API anyattn_status anyattn_tree_load(const char *path);
/* One line naming the tree that serves ctx's device, or the fallback (and why
 * a $ANYATTN_TREE file was not loaded). */
ANYATTN_API anyattn_status anyattn_tree_describe(const anyattn_context *ctx, char *buf, size_t buf_size);

/* What a tree tests, in the order of a feature vector: what run() knows on the
 * host about a batch (its counts, its hints or else the plan's limits) and the
 * problem. Values are fixed and append-only. */
typedef enum {
  ANYATTN_TREE_FEATURE_NUM_SEQS = 0,   /* batch->num_seqs */
  ANYATTN_TREE_FEATURE_NUM_TOKENS = 1, /* batch->num_tokens */
  ANYATTN_TREE_FEATURE_MEAN_Q = 2,     /* num_tokens / num_seqs (not rounded) */
  ANYATTN_TREE_FEATURE_MAX_Q = 3,      /* batch->max_q_len, else num_tokens */
  ANYATTN_TREE_FEATURE_MAX_KV = 4,     /* batch->max_kv_len, else limits.max_context */
  ANYATTN_TREE_FEATURE_HEAD_DIM = 5,   /* problem->head_dim */
  ANYATTN_TREE_FEATURE_GROUP = 6,      /* num_q_heads / num_kv_heads */
  ANYATTN_TREE_FEATURE_KV_BYTES = 7,   /* bytes per K/V cache element: 1 (fp8), 2, 4 */
  ANYATTN_TREE_FEATURE_MEAN_KV = 8,    /* batch->sum_kv_len / num_seqs (not rounded), else 0 */
  ANYATTN_TREE_FEATURE_COUNT = 9       /* length of a feature vector */
} anyattn_tree_feature;

/* Constant name of a feature ("num_seqs", ...; the sweep CSV's column names),
 * or "?" outside [0, ANYATTN_TREE_FEATURE_COUNT). */
ANYATTN_API const char *anyattn_tree_feature_name(int feature);

typedef enum {
  ANYATTN_TREE_SOURCE_NONE = 0,     /* no tree: the backend's fallback heuristic decides */
  ANYATTN_TREE_SOURCE_COMPILED = 1, /* compiled into the library (src/choose/trees/) */
  ANYATTN_TREE_SOURCE_FILE = 2      /* loaded by anyattn_tree_load or $ANYATTN_TREE */
} anyattn_tree_source;

/* Identifies a tree. Set struct_size = sizeof(anyattn_tree_info). */
typedef struct {
  size_t struct_size;
  anyattn_tree_source source;
  char device[128];      /* device it was tuned on, e.g. "NVIDIA H200" ("" for NONE) */
  char family[32];       /* architecture family it serves, e.g. "sm_90", "gfx942" */
  char provenance[256];  /* what made it (tool, sweep, date), cut to fit */
  int tuned;             /* 1: fitted to a sweep; 0: seeded by hand, untuned */
  int num_nodes;
} anyattn_tree_info;

/* The tree that serves a device as plan would find it: a loaded file, else the
 * compiled-in tree for the exact device_name, else the one for its family
 * (either may be NULL: it then matches nothing). device_name is what
 * anyattn_device_name reports; family is "sm_XY" (CUDA) or "gfxNNN" (HIP).
 * Writes *info (source NONE when no tree serves). NULL_POINTER without info,
 * STRUCT_SIZE when info->struct_size is not sizeof(anyattn_tree_info). */
ANYATTN_API anyattn_status anyattn_tree_get(const char *device_name, const char *family,
                                            anyattn_tree_info *info);

/* A tree's choice. Set struct_size = sizeof(anyattn_tree_choice). */
typedef struct {
  size_t struct_size;
  char config[32];  /* the config row the leaf names ("" when no tree serves) */
  int splits;       /* KV split count of the leaf; 0: the backend decides */
} anyattn_tree_choice;

/* What the tree serving (device_name, family) (as anyattn_tree_get finds it)
 * picks for a feature vector: features is a host array of num_features
 * doubles, num_features = ANYATTN_TREE_FEATURE_COUNT, each finite, laid out as
 * anyattn_tree_feature says; the caller owns it. The counts of earlier
 * versions are also taken: 8 (before MEAN_KV) with mean_kv 0 (no sum_kv_len
 * hint), 7 (before KV_BYTES) with kv_bytes 2 (a 16-bit cache) too. The GPU backends take the
 * leaf's config when it is a row of their table that fits the problem, else
 * their fallback. A walk of a few nodes, no timing. NULL_POINTER without
 * features or choice, STRUCT_SIZE as above, INVALID_SIZE when num_features
 * differs, INVALID_OPTION for a feature that is not finite. */
ANYATTN_API anyattn_status anyattn_tree_choose(const char *device_name, const char *family,
                                               const double *features, int num_features,
                                               anyattn_tree_choice *choice);

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_H */
