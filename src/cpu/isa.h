/* isa.h: which products the CPU backend's tiled path uses for bf16 and fp16
 * (docs/design/cpu.md, "16-bit products"): the present fp32 FMA path, AVX512-BF16
 * or AMX, found at run time or forced with ANYATTN_CPU_ISA, and the kernel
 * tables of the two 16-bit kinds (mm16_dpbf16.c, mm16_amx.c). */
#ifndef AA_CPU_ISA_H
#define AA_CPU_ISA_H

#include <stdint.h>

#include "internal.h"

/* Append-only: the values are printed by the CLI and named in tests. */
typedef enum {
  AA_CPU_ISA_FP32 = 0,       /* 16-bit inputs widened to fp32, fp32 FMA products (tiled.c) */
  AA_CPU_ISA_AVX512BF16 = 1, /* vdpbf16ps products on bf16 pairs (mm16_dpbf16.c) */
  AA_CPU_ISA_AMX = 2,        /* AMX-BF16 tile products (mm16_amx.c) */
  AA_CPU_ISA_COUNT
} aa_cpu_isa;

AA_HIDDEN const char *aa_cpu_isa_name(aa_cpu_isa isa);
/* Whether this build has the kernels of isa and this CPU (and, for AMX, the
 * kernel's permission to use its tile state) runs them. */
AA_HIDDEN int aa_cpu_isa_supported(aa_cpu_isa isa);
/* The products for a plan of dtype and head_dim: ANYATTN_CPU_ISA when set
 * (an unknown name or an ISA this machine lacks fails the plan with
 * UNSUPPORTED_CONFIG), else the fastest the machine has: AMX, else
 * vdpbf16ps for bf16 (fp16's three products there lose to fp32 FMA). fp32
 * inputs, and head dims that are not multiples of 8 or would pad to twice
 * their length (8, 16), always take AA_CPU_ISA_FP32. */
AA_HIDDEN anyattn_status aa_cpu_isa_choose(anyattn_dtype dtype, int head_dim, aa_cpu_isa *isa);
/* Bytes of one instance of the CPU's last-level cache (the cpuid cache
 * descriptors on x86, else glibc's sysconf of the L3), or 32 MiB where
 * neither tells. */
AA_HIDDEN size_t aa_cpu_llc_bytes(void);
/* Bytes of one instance of the CPU's L2 cache (as above, the L2), or 1 MiB
 * where neither tells. */
AA_HIDDEN size_t aa_cpu_l2_bytes(void);
/* Whether the CPU says it is Intel's (cpuid vendor string); 0 off x86. */
AA_HIDDEN int aa_cpu_intel(void);

/* The 16-bit products over the layouts of tiled16.c (all row-major, strides in
 * elements; "pairs" are two bf16 in one 32-bit word, the first in the low half):
 *   Q  [R32][kd] bf16          query rows, kd a multiple of 32
 *   Kt [kd/2][ldk] pairs       Kt[i][n] = dims 2i, 2i+1 of key n
 *   S  [R32][lds] fp32         scores
 *   P  [R32][ldp] bf16         probabilities, term t's keys at t * bn
 *   Vp [terms * bn/2][d] pairs Vp[i][c] = dim c of keys 2i, 2i+1 (of term i / (bn/2))
 *   O  [R32][d] fp32           accumulators
 * R32 and nkp are multiples of 32, d of 32. */
typedef struct {
  const char *name;
  void (*begin)(void); /* before a thread's first product of an item (AMX: the tile config) */
  void (*end)(void);   /* after its last (AMX: release the tile state) */
  /* S[0:R32][0:nkp] = Q . Kt */
  void (*qk)(const uint16_t *Q, int kd, const uint32_t *Kt, int ldk, float *S, int lds, int R32, int nkp);
  /* O[0:R32][0:d] += sum over terms t of P[:, t bn : t bn + nkp] . Vp[t bn/2 : t bn/2 + nkp/2] */
  void (*pv)(const uint16_t *P, int ldp, const uint32_t *Vp, int d, float *O, int R32, int terms, int bn, int nkp);
  /* The fused decode path's scores (decode.c), NULL where the kind has none
   * (the path then keeps its vdpbf16ps loop). dec_begin before a thread's
   * first dec_qk of an item, end after its last. dec_qk: St[16][4] = the
   * scores of 16 keys (K rows of kd bf16 at k, ldk bytes apart) against 4 q
   * rows given as Qt[kd/2][4] pairs (Qt[i][n] = dims 2i, 2i+1 of row n). */
  void (*dec_begin)(void);
  void (*dec_qk)(const char *k, int64_t ldk, const uint32_t *Qt, int kd, float *St);
  void (*dec_qk2)(const char *k0, const char *k1, int64_t ldk, const uint32_t *q0, const uint32_t *q1, int kd,
                  float *St0, float *St1);
} aa_mm16_ops;

#if defined(ANYATTN_CPU_MM16)
AA_HIDDEN const aa_mm16_ops *aa_mm16_dpbf16_ops(void);
AA_HIDDEN const aa_mm16_ops *aa_mm16_amx_ops(void);
#endif

#endif /* AA_CPU_ISA_H */
