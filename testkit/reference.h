/* reference.h: the double-precision attention reference every backend is
 * checked against. Written straight from docs/semantics.md for clarity, not
 * speed: no tiling, one query row and one head at a time, all math in double. */
#ifndef ANYATTN_TL_REFERENCE_H
#define ANYATTN_TL_REFERENCE_H

#include <stdint.h>

#include "anyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Computes attention for a whole batch on the host.
 *   problem:  heads, head_dim, dtype, block_size, causal, windows, scale
 *             (0: 1/sqrt(head_dim)), softcap (0: off). struct_size and config
 *             are not read.
 *   batch:    HOST copies of cu_seqlens_q, seq_lens_k, block_table, q_pos (or NULL).
 *   tensors:  HOST q, k_cache, v_cache in problem->dtype (the caches: fp8
 *             codes when problem->kv_dtype says so, with the HOST k_descale,
 *             v_descale and descale_layout), num_blocks, the six cache
 *             strides (all zero for one cache: dense NHD), optional
 *             alibi_slopes and sinks. out and lse are not read.
 * Outputs (host, caller-owned, rows = batch->num_tokens):
 *   out    [num_tokens * num_q_heads * head_dim]
 *   lse    [num_tokens * num_q_heads]; -INFINITY (and out 0) for rows with no
 *          visible key.
 *   absout [num_tokens * num_q_heads * head_dim] or NULL: sum over visible j of
 *          the softmax weight times |v_j[d]|, the natural scale of rounding
 *          error in out (it bounds |out| and does not cancel).
 *   xmag   [num_tokens * num_q_heads] or NULL: the scale of fp32 rounding
 *          error in the logits: the largest over visible keys of
 *          |scale| * sum_c |q_c k_c| (the dot product's terms, which bound its
 *          rounding however they cancel) plus |ALiBi term|, and |sink|.
 * Unlike run() without q_pos, the reference does not require q_len <=
 * kv_len: a query whose position p is negative simply sees no key, which is
 * how tests reach the empty-row rule. Returns 0, or -1 (with a message on stderr) when the
 * metadata would make it read outside the caches. */
int tl_reference(const anyattn_problem *problem, const anyattn_batch *batch,
                 const anyattn_tensors *tensors, double *out, double *lse, double *absout,
                 double *xmag);

/* The dense strides the library uses when all three given are zero. */
void tl_resolve_strides(const anyattn_problem *problem, int64_t in_block, int64_t in_token,
                        int64_t in_head, int64_t out[3]);

#ifdef __cplusplus
}
#endif
#endif
