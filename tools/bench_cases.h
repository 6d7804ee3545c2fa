/* bench_cases.h: the batches `anyattn bench` times (bench_cases.c): the shape every case shares,
 * the case lists, the named workloads, the IBM grid, mixed batches and --cases lists. */
#ifndef ANYATTN_TOOLS_BENCH_CASES_H
#define ANYATTN_TOOLS_BENCH_CASES_H

enum { BENCH_HQ = 32, BENCH_HKV = 8, BENCH_BS = 16, BENCH_DEFAULT_D = 128, BENCH_MAX_D = 512 };
/* The shape's head dim: BENCH_DEFAULT_D unless bench --head-dim sets it. */
extern int bench_head_dim;
#define BENCH_D bench_head_dim

/* One batch: q_lens[s] new tokens over kv_lens[s] cached ones per sequence. */
typedef struct {
  char name[64];
  int num_seqs;
  int *q_lens;
  int *kv_lens;
} bench_case;

typedef struct {
  bench_case *items;
  int count, cap;
} case_list;

void bench_add_case(case_list *l, const char *name, int num_seqs, const int *q, const int *kv);
void bench_add_ibm(case_list *l); /* the 60 cells of arXiv 2511.11581's grid */
/* `chunks` prefill chunks of `chunk_len` tokens at context `chunk_ctx`, then
 * `decodes` decodes at context `ctx` (chunks 0: a plain decode batch). */
void bench_add_mixed(case_list *l, const char *name, int chunks, int chunk_len, int chunk_ctx, int decodes,
                     int ctx);
void bench_free_cases(case_list *l);

/* Parses a --cases list into `l`: items "BxC" (B sequences decoding one
 * token at context C) and "pBxL" (B causal prompts of L tokens), comma
 * separated. 0 on success, -1 on a malformed item. */
int bench_parse_cases(case_list *l, const char *list);

/* Appends workload `w`'s cases (its GPU list when `gpu`, else its CPU list;
 * "default": decode, prefill and mixed) to `l`. */
void bench_build_workload(case_list *l, const char *w, int gpu);

/* 1 when `name` is a known workload. */
int bench_workload_known(const char *name);
const char *bench_workload_names(void);

#endif
