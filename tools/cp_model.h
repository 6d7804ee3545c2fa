/* cp_model.h: `anyattn cp-model`, the planning model of context-parallel
 * prefill (cp_model.c; assumptions in docs/design/context-parallel.md#model). */
#ifndef ANYATTN_TOOLS_CP_MODEL_H
#define ANYATTN_TOOLS_CP_MODEL_H

typedef struct {
  const char *rates;    /* bench JSON of the prefill workload (TFLOP/s by length); NULL: the H200 file */
  double intra_gbs;     /* GB/s one way between two GPUs of a node */
  double inter_gbs;     /* GB/s one way between two GPUs of different nodes (per GPU's NIC) */
  int gpus_per_node;
  int q_heads, kv_heads, head_dim;
} cp_model_options;

/* Prints the table; 0 on success, 1 when the rates cannot be read. */
int cp_model_main(const cp_model_options *o);

#endif
