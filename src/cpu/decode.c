/* decode.c: the CPU backend's fused decode path for bf16, fp16, fp32 and fp8
 * caches (fp32 through the fp16 path's loops, with 4-byte elements).
 * Items with a few query rows per kv head read K and V in place, a block of
 * keys at a time, instead of widening them into fp32 tiles as tiled.c does. */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* A decode item has a handful of query rows per kv head (the GQA group), so
 * staging K and V as fp32 tiles costs more than the math it feeds: the tiled
 * path (tiled.c) reached 9.3 GB/s on one Zen 5 core (decode 16x4096, bf16), and
 * only 16-17 GB/s with the whole cache in L2; fp16 decode 16x4096 on both
 * cores: 18 GB/s tiled, 25-26 GB/s here. This path reads 16-bit K and V
 * rows in place, a block of AA_DEC_KB keys at a time:
 *   scores: bf16 caches where the plan has AMX, one tdpbf16ps per 32 dims
 *   with 16 K rows straight from the cache as the A tile
 *   (aa_dec_scores_amx); otherwise, bf16 caches with AVX512-BF16, 4 query
 *   rows x 8 keys per pass with q interleaved, 8 dims of each row to a
 *   128-bit lane, against each K row's 8 dims broadcast (aa_dec_qk4x16i);
 *   otherwise 4 query rows x 4 keys per step (fp8 caches as bf16 with
 *   AVX512-BF16: q stays in bf16 and vdpbf16ps takes 32 dims per
 *   instruction; otherwise q is fp32 and K is widened 32 dims at a time by
 *   aa_dec_load32); each folded into one vector per row whose lanes are the
 *   block's keys; an online softmax of 4 rows on those 16 lanes; then P.V
 *   from the V rows into fp32 accumulators kept in aa_dec_load32's element
 *   order until the output is written. The scores and P.V also prefetch
 *   the block ahead (aa_dec_pf), each head a share of its rows in address
 *   order, so the reads go on under the math (with job->dec_spread > 1, a
 *   share of each of that many blocks ahead), and where the rows come from
 *   memory every line once more shortly before its math (AA_DEC_PF_TWICE);
 *   builds with 16 registers (AVX2) walk the block ahead with a cursor
 *   (aa_dec_pf_step, AA_DEC_CURSOR).
 * fp16 never takes vdpbf16ps or AMX: rounding q and K to bf16 would cost
 * fp16 its 3 extra mantissa bits. 32 dims per step: head_dim % 32 == 0, or
 * with AA_DEC_TAILS (cpu.h) any multiple of 8, whose rows' last block loads
 * masked (aa_dec_load32d; 8-lane builds 8 elements at a time, aa_dec_partt)
 * against q and accumulator rows padded with zeros to AA_DEC_DQ(d); the AMX
 * scores take whole blocks only.
 * fp8 caches (kv below) convert exactly where they are read, the row in place
 * as for 16-bit caches (rows are d bytes, half the lines):
 *   AVX512-VBMI: 64 codes at a time to bf16 by two byte lookups
 *   (aa_load_fp8x64_vbmi, five ops), so bf16 q keeps the vdpbf16ps scores
 *   of bf16 caches (q's words permuted once per item to the lookups' order,
 *   aa_dec_wpos) and V splits into fp32 pairs like a bf16 row; a 32-dim
 *   tail through aa_load_fp8x32_bf16. AVX-512BW without VBMI: K to bf16 by
 *   shifts and a subnormal table (aa_load_fp8x32_bf16), V (and K under fp16
 *   q) to fp32 through the fp16 bit pattern (aa_load_fp8x32_f16; the power
 *   of two it leaves folds into the q scale and v_descale). Elsewhere the
 *   exact fp32 widening aa_load_fp8. NaN codes: e4m3fn's lookup table holds
 *   the NaN; otherwise a scan of each key block (aa_dec_scan) flags blocks
 *   with a NaN code and only those run the conversions with their NaN fix.
 * decode 16x4096, one thread on the shared 2-core Xeon (AMX, VBMI), thread
 * CPU time, with a touch pass before each block's math (commit 0b9235b):
 * bf16 caches 55 ms, e4m3fn 49-51 ms with this (66-77 ms widening 16 codes
 * at a time to fp32); with the cache in L2 (decode 4x256) fp8's math costs
 * 1.28x bf16's (the conversions): fp8 gains the halved bytes less the
 * conversions. Measured and dropped: P.V by vdpbf16ps on key pairs (P
 * rounded to bf16; 3-5% slower: vdpbf16ps issues on one port, the FMAs on
 * two) and fp32 q with FMA scores instead of vdpbf16ps (the same speed). */
#define AA_DEC_KB 16 /* keys per block: one score vector per row */
typedef uint8_t aa_vB __attribute__((vector_size(64)));
/* Bytewise unsigned max (GCC 12 scalarises the generic form's compare). */
AA_INLINE aa_vB aa_dec_bmax(aa_vB a, aa_vB b) {
#if defined(__AVX512BW__)
  const __m512i r = _mm512_max_epu8((__m512i)a, (__m512i)b);
  return (aa_vB)r;
#elif defined(__AVX2__)
  __m256i x[2], y[2];
  memcpy(x, &a, sizeof x);
  memcpy(y, &b, sizeof y);
  x[0] = _mm256_max_epu8(x[0], y[0]);
  x[1] = _mm256_max_epu8(x[1], y[1]);
  memcpy(&a, x, sizeof a);
  return a;
#else
  const aa_vB gt = (aa_vB)(a > b); /* lanes all ones or zero */
  return (a & gt) | (b & ~gt);
#endif
}
/* Software prefetch distance in key blocks (aa_dec_pf): 1 and 2 measured
 * the same (decode 16x4096 bf16, one thread, Xeon); into L2 (hint 2): the
 * whole block of 8 kv heads is 64 KiB, more than L1d. */
#ifndef AA_DEC_PF_BLOCKS
#define AA_DEC_PF_BLOCKS 1
#endif
#ifndef AA_DEC_PF_HINT
#define AA_DEC_PF_HINT 2
#endif
/* The most blocks whose pages the prefetch reads at once (job->dec_spread,
 * aa_dec_pf_head). */
#define AA_DEC_PF_SPREAD_MAX 4
/* The hint of the split prefetch (AA_DEC_PF_KSCORES, below): T0 (3). On the
 * 2-core Zen 5 EPYC, with the rows in address order (AA_DEC_PF_ADDR),
 * decode from memory ran 1.03-1.29x faster with T0 than with T1 (with the
 * cache in L2 or L3 0.97-0.99x); with each head's own rows T0 had been
 * 0.83-0.89x of T1 (docs/design/cpu.md, Fused decode). The AMX scores'
 * prefetch from P.V keeps T1, as measured on the Xeon. */
#ifndef AA_DEC_PF_HINT_SPLIT
#define AA_DEC_PF_HINT_SPLIT 3
#endif
/* The split prefetch issues every line a second time, a little before its
 * math reads it: the V rows of the head at hand from its scores, the K rows
 * of the next head (of the next block's first head, at the last) from
 * P.V. With the memory busy the CPU drops software prefetches (on the Zen 5
 * EPYC a build that prefetched only every other line ran 0.52-0.56x; the
 * hardware prefetchers do not fill in), and a dropped line is a demand miss
 * under the math; the second prefetch asks again while there is time. From
 * memory 1.10-1.26x faster; with the rows in L3 0.84-0.89x, so it is on for
 * runs whose decode rows are more than the last-level cache (job->dec_pf2,
 * backend.c; docs/design/cpu.md, Fused decode). -DAA_DEC_PF_TWICE=0 or 1
 * turns it off or on for every run, for measurements. */
#ifndef AA_DEC_PF_TWICE
#define AA_DEC_PF_TWICE 2
#endif
/* Builds with 16 registers (AVX2) prefetch the block ahead in address order
 * instead (aa_dec_pf_step): a cursor walks its lines key by key, head by
 * head, K and V in turn, one line per step of the score and P.V loops. On
 * the 2-core AMD EPYC (Zen 3, AVX2) the per-head prefetch below gained 1.06x
 * over none, a burst of loads of every line of the block before its math
 * (commit 2d17296) 1.38x, and the cursor 1.05-1.22x over the burst
 * (docs/design/cpu.md, Fused decode). -DAA_DEC_CURSOR=0|1 overrides the
 * choice, for measurements. */
#ifndef AA_DEC_CURSOR
#define AA_DEC_CURSOR (AA_VR == 8)
#endif
/* AVX-512 builds with vector scores (no AMX tile scores) split the block
 * ahead's prefetch: its K lines from the scores (a line of 4 of the head's
 * rows, aa_dec_pf_head, at each 64 bytes of the current K rows, beside
 * their loads), its V lines from P.V, so the reads are spread over the
 * whole math instead of coming in bursts inside P.V. On the 2-core Zen 5 EPYC, from
 * memory, 1.08-1.30x faster over bf16 and fp16 caches and 1.12-1.22x over
 * fp8; with a bf16 cache in L2 or L3 0.94-0.97x, an fp8 one 1.11x
 * (docs/design/cpu.md, Fused decode). -DAA_DEC_PF_KSCORES=0 keeps both in
 * P.V, for measurements. */
#ifndef AA_DEC_PF_KSCORES
#define AA_DEC_PF_KSCORES 1
#endif
/* The rows of the block ahead a head's math prefetches (aa_dec_pf_head):
 * with AA_DEC_PF_ADDR, the head's share of all the item's rows in address
 * order (where a token's heads lie closer together than its tokens, as in
 * vLLM's [block, token, head, dim] layout: head hb takes rows hb * 16 ..
 * hb * 16 + 15 of the key-major list, two keys' rows of all 8 heads), so
 * the reads go out line after line; otherwise the head's own rows, 16 rows
 * a token stride apart. (docs/design/cpu.md, Fused decode.)
 * -DAA_DEC_PF_ADDR=0 keeps the head's own rows, for measurements. */
#ifndef AA_DEC_PF_ADDR
#define AA_DEC_PF_ADDR 1
#endif
#if defined(__AVX512BF16__)
#define AA_DEC_QBF16 1
#else
#define AA_DEC_QBF16 0
#endif
/* kv: 0 for 16-bit caches, else the fp8 format (AA_DEC_FMT: 1 e4m3fn, 2
 * e4m3fnuz) plus AA_DEC_NAN in key blocks that hold a NaN code. */
#define AA_DEC_NAN 4
#define AA_DEC_FMT(kv) ((kv) & 3)
/* bytes per cache element */
#define AA_DEC_ES(dt, kv) ((kv) ? 1 : (dt) == ANYATTN_DTYPE_F32 ? 4 : 2)
/* fp8 K rows converted to bf16 for vdpbf16ps (aa_load_fp8x32_bf16). */
#define AA_DEC_FP8BF16 (AA_DEC_QBF16 && AA_FP8_F16)
/* q rows stay raw bf16 (unscaled) for vdpbf16ps over bf16 caches and fp8
 * caches converted to bf16; otherwise fp32, scaled. */
#define AA_DEC_QRAW(dt, kv) (AA_DEC_QBF16 && (dt) == ANYATTN_DTYPE_BF16 && ((kv) == 0 || AA_DEC_FP8BF16))
/* Over bf16 caches the raw q rows are kept interleaved, 4 rows to a group:
 * per 8 dims the 4 rows' 16 bytes side by side, one 64-byte vector
 * (aa_dec_interleave_q), for aa_dec_qk4x16i. -DAA_DEC_QINTER=0 keeps the
 * 4 x 4 key blocks (aa_dec_qk4x4) there too, for measurements. */
#ifndef AA_DEC_QINTER
#define AA_DEC_QINTER 1
#endif
#define AA_DEC_QI(dt, kv) (AA_DEC_QINTER && AA_DEC_QRAW(dt, kv) && !(kv))
/* What q's scale and v_descale multiply by to undo the factor fp8 codes
 * read with in fp32 (aa_load_fp8x32_f16: 2^-8 e4m3fn, 2^-7 fnuz); 1 where
 * the codes go through exact bf16 or aa_load_fp8. */
#define AA_DEC_UNIT(kv) \
  (!(kv) || AA_FP8_VBMI || !(AA_FP8_F16 || AA_FP8_F16R) ? 1.0f : AA_DEC_FMT(kv) == 2 ? 128.0f : 256.0f)
/* fp8 rows read 64 codes at a time through aa_load_fp8x64_vbmi, in its word
 * order (aa_dec_slot), with a 32-code tail in bf16 pair order. */
#define AA_DEC_W(kv) ((kv) && AA_FP8_VBMI)

/* ---- building blocks ------------------------------------------------------------ */
/* 32 consecutive cache elements as two fp32 vectors, in the order every fp32
 * row of the decode path (q, accumulators) is kept in: bf16 as the even/odd
 * halves of aa_load_bf16_pairs (a shift and a mask, no widening
 * instruction), fp16 in natural order (vcvtph2ps under F16C/AVX-512, the
 * scalar widening elsewhere), fp32 as it is. dt is a constant at every call,
 * so each dtype compiles to its own straight-line loop. */
AA_INLINE void aa_dec_load32_(const anyattn_dtype dt, const void *p, aa_vf *lo, aa_vf *hi) {
  if (dt == ANYATTN_DTYPE_BF16) {
    aa_load_bf16_pairs((const uint16_t *)p, lo, hi);
  } else if (dt == ANYATTN_DTYPE_F32) {
    *lo = aa_load_f32((const float *)p);
    *hi = aa_load_f32((const float *)p + AA_VL);
  } else {
    *lo = aa_load_f16((const uint16_t *)p);
    *hi = aa_load_f16((const uint16_t *)p + AA_VL);
  }
}
/* Elements c .. c + 31 of a cache row (at byte address p) in that order:
 * fp8 codes in natural order, times 1 / AA_DEC_UNIT(kv). The loader of the
 * 16-lane kernels; AA_VR 8 builds read through aa_dec_part. */
AA_INLINE void aa_dec_load32(const anyattn_dtype dt, const int kv, const char *p, int c, aa_vf *lo, aa_vf *hi) {
  if (kv) {
#if AA_FP8_VBMI /* exact bf16 words, then as bf16 pairs */
    const __m512i w = aa_load_fp8x32_bf16((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0);
    aa_load_bf16_pairs((const uint16_t *)&w, lo, hi);
#elif AA_FP8_F16
    aa_load_fp8x32_f16((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, lo, hi);
#else
    *lo = aa_load_fp8((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2);
    *hi = aa_load_fp8((const uint8_t *)p + c + AA_VL, AA_DEC_FMT(kv) == 2);
#endif
  } else {
    aa_dec_load32_(dt, p + (size_t)c * AA_DEC_ES(dt, 0), lo, hi);
  }
}
/* The row length of the path's q and accumulator rows: d rounded up to 32
 * (zeros past d). */
#define AA_DEC_DQ(d) (((d) + 31) & ~31)
/* Rows that end inside a 32-element block load it masked (AVX-512 builds;
 * 8-lane builds read such a block through aa_dec_partt). */
#define AA_DEC_MASKED (AA_DEC_TAILS && AA_VR == 16)
#if AA_DEC_MASKED
/* The n (1..31) elements that end a 16-bit or fp32 row at p, in
 * aa_dec_load32's order with zeros for the rest of the block: masked loads,
 * which read nothing past the row. */
AA_INLINE void aa_dec_load32t(const anyattn_dtype dt, const char *p, int n, aa_vf *lo, aa_vf *hi) {
  if (dt == ANYATTN_DTYPE_F32) {
    const __m512 a = _mm512_maskz_loadu_ps((__mmask16)((1u << (n < 16 ? n : 16)) - 1), p),
                 b = _mm512_maskz_loadu_ps((__mmask16)(n > 16 ? (1u << (n - 16)) - 1 : 0), (const float *)p + 16);
    memcpy(lo, &a, sizeof a);
    memcpy(hi, &b, sizeof b);
    return;
  }
  const __m512i w = _mm512_maskz_loadu_epi16((__mmask32)((1ull << n) - 1), p);
  if (dt == ANYATTN_DTYPE_BF16) { /* x86: little-endian pairs, as aa_load_bf16_pairs */
    aa_vu u;
    memcpy(&u, &w, sizeof u);
    *lo = (aa_vf)(u << 16);
    *hi = (aa_vf)(u & 0xFFFF0000u);
  } else {
    const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(w)), b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(w, 1));
    memcpy(lo, &a, sizeof a);
    memcpy(hi, &b, sizeof b);
  }
}
#endif
/* Codes c .. c + 31 of an fp8 row of d: in place, or where the row ends
 * inside them its last codes and zeros in buf (code 0 is +0 in both
 * formats), by a masked load that reads nothing past the row. */
AA_INLINE const uint8_t *aa_dec_codes32(const char *p, int c, const int d, uint8_t buf[32]) {
#if AA_DEC_MASKED
  if (c + 32 > d) {
    _mm256_storeu_si256((__m256i *)buf, _mm256_maskz_loadu_epi8((__mmask32)((1ull << (d - c)) - 1), p + c));
    return buf;
  }
#else
  (void)d, (void)buf;
#endif
  return (const uint8_t *)p + c;
}
#if AA_DEC_QBF16
/* Words c .. c + 31 of a 16-bit row of d, zeros past d (masked where the row
 * ends inside them). */
AA_INLINE __m512i aa_dec_words32(const char *p, int c, const int d) {
#if AA_DEC_MASKED
  if (c + 32 > d) return _mm512_maskz_loadu_epi16((__mmask32)((1ull << (d - c)) - 1), (const uint16_t *)p + c);
#else
  (void)d;
#endif
  return _mm512_loadu_si512((const uint16_t *)p + c);
}
#endif
/* Elements c .. c + 31 of a cache row of d elements: aa_dec_load32, or the
 * masked load where the row ends inside the block. */
AA_INLINE void aa_dec_load32d(const anyattn_dtype dt, const int kv, const char *p, int c, const int d, aa_vf *lo,
                              aa_vf *hi) {
#if AA_DEC_MASKED
  if (c + 32 > d) {
    if (kv) {
      uint8_t buf[32];
      aa_dec_load32(dt, kv, (const char *)aa_dec_codes32(p, c, d, buf), 0, lo, hi);
    } else {
      aa_dec_load32t(dt, p + (size_t)c * AA_DEC_ES(dt, 0), d - c, lo, hi);
    }
    return;
  }
#else
  (void)d;
#endif
  aa_dec_load32(dt, kv, p, c, lo, hi);
}
/* Elements c .. c + 31 of a q row, in the order its cache rows load in. */
AA_INLINE void aa_dec_loadq32(const anyattn_dtype dt, const int kv, const void *p, aa_vf *lo, aa_vf *hi) {
  if (kv && dt == ANYATTN_DTYPE_BF16) {
    *lo = aa_load_bf16((const uint16_t *)p);
    *hi = aa_load_bf16((const uint16_t *)p + AA_VL);
  } else {
    aa_dec_load32_(dt, p, lo, hi);
  }
}
#if AA_FP8_VBMI
/* Elements c .. c + 63 of an fp8 cache row as four fp32 vectors: the even
 * and the odd words of aa_load_fp8x64_vbmi's *w0, then of *w1. */
AA_INLINE void aa_dec_load64w(const int kv, const char *p, int c, aa_vf v[4]) {
  __m512i w[2];
  aa_load_fp8x64_vbmi((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, &w[0], &w[1]);
  aa_load_bf16_pairs((const uint16_t *)&w[0], &v[0], &v[1]);
  aa_load_bf16_pairs((const uint16_t *)&w[1], &v[2], &v[3]);
}
#endif
/* Where element c of a 16-bit word row (raw bf16 q) sits: for fp8 caches
 * read 64 codes at a time, aa_load_fp8x64_vbmi's word order. */
AA_INLINE int aa_dec_wpos(const int kv, const int d, int c) {
#if AA_FP8_VBMI
  if (kv && (c & ~63) + 64 <= d) return (c & ~63) + aa_fp8_vbmi_pos(c & 63);
#endif
  (void)kv, (void)d;
  return c;
}
/* Where element c of an fp32 row (of d) sits in the order its cache rows
 * load in: bf16 pairs (16 even elements, then 16 odd, per 32) for bf16
 * caches and fp8 tails, the even and odd words of aa_dec_wpos's order for
 * fp8 read 64 at a time, else natural. */
AA_INLINE int aa_dec_slot(const anyattn_dtype dt, const int kv, const int d, int c) {
  if (AA_DEC_W(kv) || (dt == ANYATTN_DTYPE_BF16 && !kv)) {
    const int w = aa_dec_wpos(kv, d, c), b = w & ~31;
    return b + (w & 1) * 16 + ((w & 31) >> 1);
  }
  return c;
}

/* The software prefetch of the keys AA_DEC_PF_BLOCKS blocks ahead: the K
 * and V rows of those keys (pk, pv: kv head g0's; n of them).
 * AVX-512 builds spread it over the math of each head: 16 rows per head
 * (rk, rv: aa_dec_pf_head), their K lines from the scores (ks) or from
 * P.V, their V lines from P.V, the lines of the dims a P.V call covers at
 * each of its keys. Issued in one burst per block, the same prefetches left
 * the memory idle while the math ran (decode time about the sum of the
 * two); spread, the reads go on under the math.
 * AVX2 builds (AA_DEC_CURSOR) walk the block ahead in address order: key j,
 * head hb (sk, sv: the head strides in bytes), byte o of the row (ob bytes),
 * the K line, then the V line; one line per aa_dec_pf_step, a step at every
 * 16 dims of the scores and at every other key of P.V, which for 16-bit and
 * fp8 rows alike covers the block by the end of its math. */
typedef struct {
  /* the rows of the blocks 1 .. sp ahead (sp: job->dec_spread), n[b] keys of block b + 1 ahead */
  const char *pk[AA_DEC_PF_SPREAD_MAX][AA_DEC_KB], *pv[AA_DEC_PF_SPREAD_MAX][AA_DEC_KB];
  int n[AA_DEC_PF_SPREAD_MAX], sp, on;
  int ks; /* AA_DEC_PF_KSCORES: the vector scores prefetch the K lines, P.V the V lines only */
  /* the K and V rows (head offset included) the head the math is on
   * prefetches, nr of them (aa_dec_pf_head) */
  const char *rk[AA_DEC_KB], *rv[AA_DEC_KB];
  int nr;
  /* the second prefetch (two, AA_DEC_PF_TWICE): the V rows of the head at
   * hand (cv, ncv of them; from its scores) and the K rows of the next
   * head (ck, nck; from P.V) */
  int two;
  const char *cv[AA_DEC_KB], *ck[AA_DEC_KB];
  int ncv, nck;
  int64_t sk, sv;
  int j, hb, o, ob, nh, isv;
} aa_dec_pf;

/* The cursor at the start of the block ahead (its rows already in pk, pv). */
AA_INLINE void aa_dec_pf_rewind(aa_dec_pf *pf, int nh, int row_bytes, int64_t sk, int64_t sv) {
  pf->j = pf->hb = pf->o = pf->isv = 0;
  pf->nh = nh;
  pf->ob = row_bytes;
  pf->sk = sk;
  pf->sv = sv;
}
/* Rows n .. AA_DEC_KB - 1 of a prefetch list repeat row n - 1 (n > 0), so
 * that the loops index it without a bound: a line asked for twice is no
 * second read. */
AA_INLINE void aa_dec_pf_pad(const char **rows, int n) {
  for (int j = n; j < AA_DEC_KB && n > 0; j++) rows[j] = rows[n - 1];
}

/* The rows of the block ahead that kv head hb's math prefetches (of the
 * item's nh heads; kh, vh the head strides in bytes): in key-major order
 * (addr) head hb takes slots hb * AA_DEC_KB .. + AA_DEC_KB - 1 of the list
 * (key 0 head 0, key 0 head 1, ...), else key j of its own head. */
AA_INLINE void aa_dec_pf_head(aa_dec_pf *pf, int hb, int nh, int64_t kh, int64_t vh, int addr) {
  if (AA_DEC_CURSOR) return; /* aa_dec_pf_step walks pk, pv itself */
  if (pf->sp == 1) {
    if (!addr) {
      pf->nr = pf->n[0];
      for (int j = 0; j < pf->n[0]; j++) {
        pf->rk[j] = pf->pk[0][j] + hb * kh;
        pf->rv[j] = pf->pv[0][j] + hb * vh;
      }
    } else {
      const int r0 = hb * AA_DEC_KB, left = pf->n[0] * nh - r0;
      pf->nr = left < 0 ? 0 : left < AA_DEC_KB ? left : AA_DEC_KB;
      int key = r0 / nh, h = r0 % nh;
      for (int j = 0; j < pf->nr; j++) {
        pf->rk[j] = pf->pk[0][key] + h * kh;
        pf->rv[j] = pf->pv[0][key] + h * vh;
        if (++h == nh) {
          h = 0;
          key++;
        }
      }
    }
  } else {
    /* AA_DEC_KB / P slots of each block b ahead, from its portion P - 1 - b
     * (of P): a block's portions go out over the P blocks of math before it;
     * the blocks' rows alternate, so that all 2 P pages are read at once */
    const int P = pf->sp, SP = AA_DEC_KB / P;
    int key[AA_DEC_PF_SPREAD_MAX], h[AA_DEC_PF_SPREAD_MAX]; /* each block's next slot: key, head */
    for (int b = 0; b < P; b++) {
      const int r = (P - 1 - b) * SP * nh + hb * SP;
      key[b] = addr ? r / nh : (P - 1 - b) * SP;
      h[b] = addr ? r % nh : hb;
    }
    pf->nr = 0;
    for (int i = 0; i < SP; i++)
      for (int b = 0; b < P; b++) {
        if (key[b] < pf->n[b]) {
          pf->rk[pf->nr] = pf->pk[b][key[b]] + h[b] * kh;
          pf->rv[pf->nr++] = pf->pv[b][key[b]] + h[b] * vh;
        }
        if (!addr)
          key[b]++;
        else if (++h[b] == nh) {
          h[b] = 0;
          key[b]++;
        }
      }
  }
  aa_dec_pf_pad(pf->rk, pf->nr); /* the scores index it by key */
}

/* One line of the block ahead, then the cursor moves on (AA_DEC_CURSOR). */
AA_INLINE void aa_dec_pf_step(aa_dec_pf *pf) {
  if (!pf->on || pf->j >= pf->n[0]) return;
  const char *row = pf->isv ? pf->pv[0][pf->j] + pf->hb * pf->sv : pf->pk[0][pf->j] + pf->hb * pf->sk;
  __builtin_prefetch(row + pf->o, 0, AA_DEC_PF_HINT);
  if (!pf->isv) {
    pf->isv = 1;
    return;
  }
  pf->isv = 0;
  if ((pf->o += 64) < pf->ob) return;
  pf->o = 0;
  if (++pf->hb < pf->nh) return;
  pf->hb = 0;
  pf->j++;
}

#if AA_VR == 8
/* With 16 registers (AVX2) the 4 x 4 blocks below, sized for AVX-512's 32,
 * spill most of their accumulators; these count in ymm registers instead
 * (docs/design/cpu.md, "Register blocks"). */
/* Part h (0 or 1) of elements c .. c + 31 of a cache row at p, in the
 * decode path's fp32 order: lo holds slots c + 8h .. c + 8h + 7, hi slots
 * c + 16 + 8h .. c + 16 + 8h + 7. For bf16 that is one 32-byte load of 8
 * pairs (elements c + 16h .. c + 16h + 15), split by a shift and a mask. */
AA_INLINE void aa_dec_part(const anyattn_dtype dt, const int kv, const char *p, int c, int h, aa_vr *lo, aa_vr *hi) {
  if (kv) {
#if AA_FP8_F16R /* times 1 / AA_DEC_UNIT(kv) */
    *lo = aa_load_fp8x8_f16((const uint8_t *)p + c + 8 * h, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0);
    *hi = aa_load_fp8x8_f16((const uint8_t *)p + c + 16 + 8 * h, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0);
#else /* the two runs of 8 codes through aa_load_fp8 */
    uint8_t b[16];
    memcpy(b, p + c + 8 * h, 8);
    memcpy(b + 8, p + c + 16 + 8 * h, 8);
    const aa_vf w = aa_load_fp8(b, AA_DEC_FMT(kv) == 2);
    memcpy(lo, &w, sizeof *lo);
    memcpy(hi, (const char *)&w + sizeof *lo, sizeof *hi);
#endif
  } else if (dt == ANYATTN_DTYPE_F32) {
    const float *e = (const float *)p + c + 8 * h;
    memcpy(lo, e, sizeof *lo);
    memcpy(hi, e + 16, sizeof *hi);
  } else if (dt == ANYATTN_DTYPE_BF16) {
    aa_vru u;
    memcpy(&u, (const uint16_t *)p + c + 16 * h, sizeof u);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    *lo = (aa_vr)(u & 0xFFFF0000u);
    *hi = (aa_vr)(u << 16);
#else
    *lo = (aa_vr)(u << 16);
    *hi = (aa_vr)(u & 0xFFFF0000u);
#endif
  } else {
    const uint16_t *e = (const uint16_t *)p + c + 8 * h;
#if defined(__F16C__)
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e)),
                 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(e + 16)));
    memcpy(lo, &a, sizeof a);
    memcpy(hi, &b, sizeof b);
#else
    for (int i = 0; i < AA_VR; i++) {
      (*lo)[i] = aa_f16_to_f32(e[i]);
      (*hi)[i] = aa_f16_to_f32(e[16 + i]);
    }
#endif
  }
}
#if defined(__AVX2__)
/* 16 bytes at p where ok, else zeros. */
AA_INLINE __m128i aa_dec_ld16(const void *p, int ok) {
  return ok ? _mm_loadu_si128((const __m128i *)p) : _mm_setzero_si128();
}
#endif
/* aa_dec_part of the block where a row ends: the n (8, 16 or 24) elements
 * from c, zeros past them; nothing past the row is read. 16-bit rows under
 * AVX2 as 8-element loads of the row itself; otherwise (fp32, fp8, builds
 * without AVX2) the elements copied 8 at a time (constant-size copies, each
 * read back by loads of its own size or within it) into a block of their
 * own. */
AA_INLINE void aa_dec_partt(const anyattn_dtype dt, const int kv, const char *p, int c, int n, int h, aa_vr *lo,
                            aa_vr *hi) {
#if defined(__AVX2__) && !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
  if (!kv && dt == ANYATTN_DTYPE_BF16) { /* elements c + 16h .. + 15 as pairs, as aa_dec_part */
    const uint16_t *e = (const uint16_t *)p + c + 16 * h;
    const __m256i u = _mm256_setr_m128i(aa_dec_ld16(e, n >= 16 * h + 8), aa_dec_ld16(e + 8, n >= 16 * h + 16));
    const __m256i l = _mm256_slli_epi32(u, 16), m = _mm256_and_si256(u, _mm256_set1_epi32((int)0xFFFF0000u));
    memcpy(lo, &l, sizeof *lo);
    memcpy(hi, &m, sizeof *hi);
    return;
  }
#if defined(__F16C__)
  if (!kv && dt == ANYATTN_DTYPE_F16) { /* elements c + 8h .. + 7 and c + 16 + 8h .. + 7 */
    const uint16_t *e = (const uint16_t *)p + c + 8 * h;
    const __m256 a = _mm256_cvtph_ps(aa_dec_ld16(e, n >= 8 * h + 8)),
                 b = _mm256_cvtph_ps(aa_dec_ld16(e + 16, n >= 8 * h + 24));
    memcpy(lo, &a, sizeof a);
    memcpy(hi, &b, sizeof b);
    return;
  }
#endif
#endif
  const int es = AA_DEC_ES(dt, kv);
  char blk[128] = {0}; /* 32 elements */
  for (int i = 0; i < n; i += 8) memcpy(blk + i * es, p + (size_t)(c + i) * es, (size_t)8 * es);
  aa_dec_part(dt, kv, blk, 0, h, lo, hi);
}
/* One step of aa_dec_qk4x4r: half h of elements c .. c + 31 of keys j0 and
 * j0 + 1 against the four rows' q (TAIL: the block where the rows end). */
AA_INLINE void aa_dec_qk2r_step(const anyattn_dtype dt, const int kv, const int TAIL, const float *restrict qf,
                                const char *const *k, const int d, int j0, int c, int h, aa_dec_pf *pf, aa_vr a[4][2]) {
  aa_vr kl[2], kh[2];
  aa_dec_pf_step(pf);
  for (int jj = 0; jj < 2; jj++) {
    if (TAIL)
      aa_dec_partt(dt, kv, k[j0 + jj], c, d - c, h, &kl[jj], &kh[jj]);
    else
      aa_dec_part(dt, kv, k[j0 + jj], c, h, &kl[jj], &kh[jj]);
  }
  for (int r = 0; r < 4; r++) {
    const aa_vr ql = aa_rld(qf + (size_t)r * AA_DEC_DQ(d) + c + 8 * h),
                qh = aa_rld(qf + (size_t)r * AA_DEC_DQ(d) + c + 16 + 8 * h);
    for (int jj = 0; jj < 2; jj++) {
      a[r][jj] += ql * kl[jj];
      a[r][jj] += qh * kh[jj];
    }
  }
}
/* aa_dec_qk4x4 in ymm registers: two keys at a time, per 16 elements their
 * four registers against the four rows' q (8 accumulators, 2 q loads per 4
 * FMAs); a prefetch step per 16 elements. */
AA_INLINE aa_vf aa_dec_qk4x4r(const anyattn_dtype dt, const int kv, const float *restrict qf, const char *const *k,
                              const int d, aa_dec_pf *pf) {
  aa_vr acc[16];
  for (int j0 = 0; j0 < 4; j0 += 2) {
    aa_vr a[4][2];
    for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = aa_rsplat(0.0f);
    int c = 0;
    for (; c + 32 <= d; c += 32)
      for (int h = 0; h < 2; h++) aa_dec_qk2r_step(dt, kv, 0, qf, k, d, j0, c, h, pf, a);
    if (c < d) /* where the rows end (AA_DEC_TAILS), outside the loop so that its code stays out of it */
      for (int h = 0; h < 2; h++) aa_dec_qk2r_step(dt, kv, 1, qf, k, d, j0, c, h, pf, a);
    for (int r = 0; r < 4; r++)
      for (int jj = 0; jj < 2; jj++) acc[r * 4 + j0 + jj] = a[r][jj];
  }
  return aa_rreduce16(acc);
}
#endif

/* Byte off of four rows: K rows of the block ahead (AA_DEC_PF_KSCORES) or
 * the second prefetch's V rows (AA_DEC_PF_TWICE). */
AA_INLINE void aa_dec_pf4(const char *const *pq, int off) {
  for (int j = 0; j < 4; j++) __builtin_prefetch(pq[j] + off, 0, AA_DEC_PF_HINT_SPLIT);
}

/* Scores of q rows 0..3 (row stride d) against 4 key rows: lane 4r + j. */
AA_INLINE aa_vf aa_dec_qk4x4(const anyattn_dtype dt, const int kv, const void *restrict q, const char *const *k,
                             const int d, aa_dec_pf *pf, int jb) {
  const int dq = AA_DEC_DQ(d); /* q's row stride */
  aa_vf acc[16];
  /* K rows jb .. jb + 3 of those the head prefetches (pf->ks, aa_dec_pf_head):
   * rows past the last repeat it */
  const int kpf = pf->ks && jb < pf->nr;
  const char *pq[4] = {0};
  if (kpf)
    for (int j = 0; j < 4; j++) pq[j] = pf->rk[jb + j]; /* padded past nr (aa_dec_pf_pad) */
  /* and V rows jb .. jb + 3 of this head's block (pf->two) */
  const int vpf = pf->ks && pf->two && jb < pf->ncv;
  const char *pc[4] = {0};
  if (vpf)
    for (int j = 0; j < 4; j++) pc[j] = pf->cv[jb + j];
#if AA_DEC_QBF16
  if (AA_DEC_QRAW(dt, kv)) {
    __m512 t[16];
    for (int i = 0; i < 16; i++) t[i] = _mm512_setzero_ps();
    const uint16_t *qb = (const uint16_t *)q;
    int c = 0;
#if AA_FP8_VBMI
    if (kv) /* 64 codes per load; q words in the same order */
      for (; c + 64 <= d; c += 64) {
        __m512bh qv[4][2];
        for (int r = 0; r < 4; r++)
          for (int h = 0; h < 2; h++) qv[r][h] = (__m512bh)_mm512_loadu_si512(qb + (size_t)r * dq + c + 32 * h);
        if (kpf) aa_dec_pf4(pq, c);
        if (vpf) aa_dec_pf4(pc, c);
        for (int j = 0; j < 4; j++) {
          __m512i w[2];
          aa_load_fp8x64_vbmi((const uint8_t *)k[j] + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, &w[0], &w[1]);
          for (int r = 0; r < 4; r++) {
            t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r][0], (__m512bh)w[0]);
            t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r][1], (__m512bh)w[1]);
          }
        }
      }
#endif
    for (; c < d; c += 32) {
      __m512bh qv[4];
      for (int r = 0; r < 4; r++) qv[r] = (__m512bh)_mm512_loadu_si512(qb + (size_t)r * dq + c);
      if (!((c * AA_DEC_ES(dt, kv)) & 63)) { /* at each line of the rows */
        if (kpf) aa_dec_pf4(pq, c * AA_DEC_ES(dt, kv));
        if (vpf) aa_dec_pf4(pc, c * AA_DEC_ES(dt, kv));
      }
      for (int j = 0; j < 4; j++) {
#if AA_DEC_FP8BF16
        uint8_t tail[32];
        const __m512bh kb = kv ? (__m512bh)aa_load_fp8x32_bf16(aa_dec_codes32(k[j], c, d, tail), AA_DEC_FMT(kv) == 2,
                                                               (kv & AA_DEC_NAN) != 0)
                               : (__m512bh)aa_dec_words32(k[j], c, d);
#else
        const __m512bh kb = (__m512bh)aa_dec_words32(k[j], c, d);
#endif
        for (int r = 0; r < 4; r++) t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r], kb);
      }
    }
    for (int i = 0; i < 16; i++) acc[i] = (aa_vf)t[i];
    return aa_reduce16(acc);
  }
#endif
  const float *qf = (const float *)q;
#if AA_VR == 8
  (void)dq;
  (void)acc;
  (void)kpf;
  (void)pq;
  (void)vpf;
  (void)pc;
  return aa_dec_qk4x4r(dt, kv, qf, k, d, pf);
#else
  for (int i = 0; i < 16; i++) acc[i] = aa_splat(0.0f);
  int c = 0;
#if AA_FP8_VBMI
  if (kv)
    for (; c + 64 <= d; c += 64) {
      if (kpf) aa_dec_pf4(pq, c);
      if (vpf) aa_dec_pf4(pc, c);
      for (int j = 0; j < 4; j++) {
        aa_vf kk[4];
        aa_dec_load64w(kv, k[j], c, kk);
        for (int r = 0; r < 4; r++)
          for (int i = 0; i < 4; i++) acc[r * 4 + j] += aa_ld(qf + (size_t)r * dq + c + i * AA_VL) * kk[i];
      }
    }
#endif
  for (; c < d; c += 32) {
    aa_vf qe[4], qo[4];
    for (int r = 0; r < 4; r++) {
      qe[r] = aa_ld(qf + (size_t)r * dq + c);
      qo[r] = aa_ld(qf + (size_t)r * dq + c + 16);
    }
    for (int o = c * AA_DEC_ES(dt, kv); o < (c + 32) * AA_DEC_ES(dt, kv); o += 32)
      if (!(o & 63)) { /* at each line of the rows: every other step of fp8, two a step of fp32 */
        if (kpf) aa_dec_pf4(pq, o);
        if (vpf) aa_dec_pf4(pc, o);
      }
    for (int j = 0; j < 4; j++) {
      aa_vf ke, ko;
      aa_dec_load32d(dt, kv, k[j], c, d, &ke, &ko);
      /* two statements, so each half contracts into an FMA on the
       * accumulator: written as one sum GCC 12 emits mul + fma + add, and
       * fp16 decode 16x4096 ran at 24.0 GB/s against 25.5 (2 threads) */
      for (int r = 0; r < 4; r++) {
        acc[r * 4 + j] += qe[r] * ke;
        acc[r * 4 + j] += qo[r] * ko;
      }
    }
  }
  return aa_reduce16(acc);
#endif
}

#if AA_DEC_QBF16
/* One step of aa_dec_qk4x16i (below): NI x 8 dims of keys kb .. kb + 7 into two
 * accumulators per key (even and odd dim groups: chains half as long). */
AA_INLINE void aa_dec_qk4x16i_step(const int NI, const uint16_t *restrict qi, const char *const *k, int kb, int c,
                                   const aa_dec_pf *pf, int kpf, int vpf, __m512 acc[16]) {
  __m512bh qv[8];
#pragma GCC unroll 8
  for (int i = 0; i < NI; i++) qv[i] = (__m512bh)_mm512_loadu_si512(qi + (size_t)(c + 8 * i) * 4);
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) {
    /* this step's lines of the rows the head prefetches; rows past the last repeat it */
    if (kpf) {
      const char *r = pf->rk[kb + j] + 2 * c; /* padded past nr (aa_dec_pf_pad) */
      for (int o = 0; o < 16 * NI; o += 64) __builtin_prefetch(r + o, 0, AA_DEC_PF_HINT_SPLIT);
    }
    if (vpf) {
      const char *r = pf->cv[kb + j] + 2 * c;
      for (int o = 0; o < 16 * NI; o += 64) __builtin_prefetch(r + o, 0, AA_DEC_PF_HINT_SPLIT);
    }
    const uint16_t *kr = (const uint16_t *)k[kb + j] + c;
#pragma GCC unroll 8
    for (int i = 0; i < NI; i++) {
      const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(kr + 8 * i)));
      acc[2 * j + (i & 1)] = _mm512_dpbf16_ps(acc[2 * j + (i & 1)], qv[i], (__m512bh)kv);
    }
  }
}
/* Scores of 4 q rows against the block's 16 K rows (bf16 caches), sc[r]
 * lane j: row r, key j. q interleaved (aa_dec_interleave_q: per 8 dims one
 * vector of the 4 rows' 16 bytes); each K row is read 8 dims at a time,
 * broadcast to the 4 row lanes of a vector (vbroadcasti32x4), so that one
 * vdpbf16ps takes 8 dims of 4 rows and one key, and a key's accumulators
 * hold 4 partial sums per row. Two passes of 8 keys (16 accumulators, 8 q
 * vectors of 64 dims at a time); each pass folds its accumulators to 2
 * vectors by adds and in-lane shuffles (26 ops), and a 4 x 4 transpose of
 * 128-bit blocks puts the keys in lanes: 60 ops for the block's 64 scores,
 * against 188 for the 16-lane partial sums of aa_dec_qk4x4's blocks.
 * Prefetches as aa_dec_qk4x4's: the head's share of the block ahead's K
 * rows (pf->ks) and this head's V rows (pf->two), here two lines of each of
 * 8 rows per step (docs/design/cpu.md, Fused decode). */
AA_INLINE void aa_dec_qk4x16i(const uint16_t *restrict qi, const char *const *k, const int d, const aa_dec_pf *pf,
                              aa_vf sc[4]) {
  __m512 w[4];
  for (int h = 0; h < 2; h++) {
    const int kb = 8 * h;
    const int kpf = pf->ks && kb < pf->nr, vpf = pf->ks && pf->two && kb < pf->ncv;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 64 <= d; c += 64) aa_dec_qk4x16i_step(8, qi, k, kb, c, pf, kpf, vpf, acc);
    if (c + 32 <= d) { /* a 32-dim tail */
      aa_dec_qk4x16i_step(4, qi, k, kb, c, pf, kpf, vpf, acc);
      c += 32;
    }
    /* 8, 16 or 24 dims that end the rows (AA_DEC_TAILS) */
    if (d - c == 24)
      aa_dec_qk4x16i_step(3, qi, k, kb, c, pf, kpf, vpf, acc);
    else if (d - c == 16)
      aa_dec_qk4x16i_step(2, qi, k, kb, c, pf, kpf, vpf, acc);
    else if (d - c == 8)
      aa_dec_qk4x16i_step(1, qi, k, kb, c, pf, kpf, vpf, acc);
    /* per row group of 4 lanes: pairs of keys to 2 partials each, then 4 keys' sums */
    __m512 b[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
      const __m512 x = _mm512_add_ps(acc[4 * p], acc[4 * p + 1]), y = _mm512_add_ps(acc[4 * p + 2], acc[4 * p + 3]);
      b[p] = _mm512_add_ps((__m512)_mm512_unpacklo_pd((__m512d)x, (__m512d)y),
                           (__m512)_mm512_unpackhi_pd((__m512d)x, (__m512d)y));
    }
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++)
      w[2 * h + p] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * p], b[2 * p + 1], 0x88),
                                   _mm512_shuffle_ps(b[2 * p], b[2 * p + 1], 0xDD));
  }
  aa_vf wv[4];
  for (int i = 0; i < 4; i++) wv[i] = (aa_vf)w[i];
  aa_transpose4x4q(wv, sc); /* sc[r] block b = w[b] block r: keys 4b .. 4b + 3 of row r */
}
#endif

/* acc (4 rows of AA_DEC_DQ(d) floats, aa_dec_load32 order), columns
 * [c0, c0 + 32 NC): acc * alpha + P[0:4, 0:nk] . V[0:nk], with the
 * accumulators in registers. TAIL: the block where the V rows end (NC 1,
 * AA_DEC_TAILS), loaded masked or through aa_dec_partt. */
AA_INLINE void aa_dec_pv(const anyattn_dtype dt, const int kv, const int NC, const int TAIL, float *restrict acc,
                         const int d, int c0, const float *restrict alpha, const float *restrict P,
                         const char *const *v, int64_t hv, int nk, aa_dec_pf *pf) {
#if AA_VR == 8
  const int dq = AA_DEC_DQ(d); /* the accumulators' row stride */
  /* in ymm registers: per 32 columns, two calls over aa_dec_part's halves
   * (4 rows x 2 registers: 8 accumulators); a prefetch step every other key */
  for (int c = c0; c < c0 + 32 * NC; c += 32)
    for (int h = 0; h < 2; h++) {
      aa_vr ar[4][2];
      float *restrict lo = acc + c + 8 * h, *restrict hi = acc + c + 16 + 8 * h;
      for (int r = 0; r < 4; r++) {
        const aa_vr al = aa_rsplat(alpha[r]);
        ar[r][0] = aa_rld(lo + (size_t)r * dq) * al;
        ar[r][1] = aa_rld(hi + (size_t)r * dq) * al;
      }
      for (int j = 0; j < nk; j++) {
        if (j & 1) aa_dec_pf_step(pf);
        aa_vr vl, vh;
        if (TAIL)
          aa_dec_partt(dt, kv, v[j] + hv, c, d - c, h, &vl, &vh);
        else
          aa_dec_part(dt, kv, v[j] + hv, c, h, &vl, &vh);
        for (int r = 0; r < 4; r++) {
          const aa_vr pb = aa_rsplat(P[r * AA_DEC_KB + j]);
          ar[r][0] += pb * vl;
          ar[r][1] += pb * vh;
        }
      }
      for (int r = 0; r < 4; r++) {
        aa_rst(lo + (size_t)r * dq, ar[r][0]);
        aa_rst(hi + (size_t)r * dq, ar[r][1]);
      }
    }
#else
  const int dq = AA_DEC_DQ(d); /* the accumulators' row stride */
  aa_vf a[4][4];
  for (int r = 0; r < 4; r++) {
    const aa_vf al = aa_splat(alpha[r]);
    for (int k = 0; k < 2 * NC; k++) a[r][k] = aa_ld(acc + (size_t)r * dq + c0 + k * AA_VL) * al;
  }
  for (int j = 0; j < nk; j++) {
    if (pf->on && pf->ks && pf->two && j < pf->nck)
      for (int o = c0 * AA_DEC_ES(dt, kv); o < (c0 + 32 * NC) * AA_DEC_ES(dt, kv); o += 64)
        __builtin_prefetch(pf->ck[j] + o, 0, AA_DEC_PF_HINT_SPLIT);
    if (pf->on && j < pf->nr)
      for (int o = c0 * AA_DEC_ES(dt, kv); o < (c0 + 32 * NC) * AA_DEC_ES(dt, kv); o += 64) {
        if (pf->ks) {
          __builtin_prefetch(pf->rv[j] + o, 0, AA_DEC_PF_HINT_SPLIT);
        } else {
          __builtin_prefetch(pf->rk[j] + o, 0, AA_DEC_PF_HINT);
          __builtin_prefetch(pf->rv[j] + o, 0, AA_DEC_PF_HINT);
        }
      }
    aa_vf vv[4];
    const char *vj = v[j] + hv;
#if AA_FP8_VBMI
    if (kv && NC == 2) aa_dec_load64w(kv, vj, c0, vv);
    else
#endif
      for (int n = 0; n < NC; n++) {
        if (TAIL)
          aa_dec_load32d(dt, kv, vj, c0 + 32 * n, d, &vv[2 * n], &vv[2 * n + 1]);
        else
          aa_dec_load32(dt, kv, vj, c0 + 32 * n, &vv[2 * n], &vv[2 * n + 1]);
      }
    for (int r = 0; r < 4; r++) {
      const aa_vf pb = aa_splat(P[r * AA_DEC_KB + j]);
      for (int k = 0; k < 2 * NC; k++) a[r][k] += pb * vv[k];
    }
  }
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 2 * NC; k++) aa_st(acc + (size_t)r * dq + c0 + k * AA_VL, a[r][k]);
#endif
}

/* Four rows' reductions at once: lane group r (lanes 4r .. 4r + 3) of the
 * result holds the maximum (or the sum) of x[r]'s 16 lanes, in 10 shuffles
 * and combines instead of 4 x 8. */
#define AA_DEC_RED4(name, op)                                                                                         \
  AA_INLINE aa_vf name(const aa_vf x[4]) {                                                                        \
    aa_vf h[2];                                                                                                   \
    for (int i = 0; i < 2; i++) {                                                                                 \
      const aa_vf a = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, \
                                              22, 23);                                                            \
      const aa_vf b = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, \
                                              28, 29, 30, 31);                                                    \
      h[i] = op(a, b);                                                                                            \
    }                                                                                                             \
    aa_vf c = op(__builtin_shufflevector(h[0], h[1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27),    \
                 __builtin_shufflevector(h[0], h[1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31));  \
    c = op(c, __builtin_shufflevector(c, c, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));               \
    return op(c, __builtin_shufflevector(c, c, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));            \
  }
#define AA_DEC_ADD(a, b) ((a) + (b))
AA_DEC_RED4(aa_dec_max4, aa_max)
AA_DEC_RED4(aa_dec_sum4, AA_DEC_ADD)
#undef AA_DEC_ADD
#undef AA_DEC_RED4
/* Lane group r of v in every lane. */
AA_INLINE aa_vf aa_dec_bcast4(aa_vf v, int r) {
  const aa_vi idx = aa_splati(4 * r);
  return (aa_vf)__builtin_shuffle(v, idx);
}

/* e^x on 16 lanes for the softmax, whose arguments are <= 0 (or -inf, or
 * NaN): on AVX-512 2^(x log2 e) by aa_exp2_512 (11 operations with the
 * multiply, against aa_exp's 19), else aa_exp. */
AA_INLINE aa_vf aa_dec_exp(aa_vf x) {
#if defined(__AVX512F__)
  return (aa_vf)aa_exp2_512((__m512)(x * aa_splat(1.44269504088896341f)));
#else
  return aa_exp(x);
#endif
}

/* Online softmax of rows [rc, rc + 4) of kv head g over the key block
 * [j0, j0 + nk): sc[r] holds row rc + r's scores (lane j: key j0 + j), P[r]
 * receives its probabilities, alpha[r] the factor that rescales its
 * accumulator; m and l (the rows' running max and sum) are updated. The
 * four rows go through the maximum, the rescale factors and the sums
 * together (aa_dec_max4, one exp for the four factors). A block that all
 * four rows see whole (the middle of every context) skips the per-row key
 * ranges and masks. */
AA_INLINE void aa_dec_softmax4(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                               const aa_vf sc[4], const float qs, float *restrict m, float *restrict l,
                               float *restrict P, float alpha[4], int rc, int g, int j0, int nk) {
  const anyattn_problem *pr = &job->plan->problem;
  const anyattn_args *a = job->a;
  const int group = job->group;
  int full = nk == AA_DEC_KB && rc + 4 <= rw->R;
  for (int r = 0; r < 4 && full; r++) full = rw->lo[rc + r] <= j0 && rw->hi[rc + r] >= j0 + AA_DEC_KB;
  aa_vf x[4];
  aa_vi vis[4];
  for (int r = 0; r < 4; r++) {
    x[r] = sc[r];
    if (AA_DEC_QRAW(dt, kv)) x[r] *= aa_splat(qs); /* q was kept unscaled in bf16 */
  }
  if (!full || pr->softcap > 0.0f || a->alibi_slopes)
    for (int r = 0; r < 4; r++) {
      const int rr = rc + r;
      int jlo, jhi;
      aa_key_range(rw->lo, rw->hi, rw->R, rr, j0, nk, &jlo, &jhi);
      if (pr->softcap > 0.0f) {
        const float cap = pr->softcap, inv = 1.0f / cap;
        for (int j = jlo; j < jhi; j++) x[r][j] = cap * tanhf(x[r][j] * inv);
      }
      if (a->alibi_slopes) {
        const float slope = ((const float *)a->alibi_slopes)[g * group + rr % group];
        const int rel = j0 - (rw->qpos0 + rr / group); /* key j0 minus the query position */
        for (int j = jlo; j < jhi; j++) x[r][j] += slope * (float)(rel + j);
      }
      const aa_vi idx = aa_iota();
      vis[r] = aa_in_range(idx, aa_splati(jlo), aa_splati(jhi));
      x[r] = aa_sel(vis[r], x[r], aa_splat(-INFINITY)); /* a row with no visible key: all -inf */
    }
  /* lane group r: row r's old max, new max, rescale factor */
  const aa_vf mold = {m[0], m[0], m[0], m[0], m[1], m[1], m[1], m[1], m[2], m[2], m[2], m[2], m[3], m[3], m[3], m[3]};
  const aa_vf mnew = aa_max(aa_dec_max4(x), mold);
  /* 0 while m is still -inf; 1 for a row that sees no key here (mnew == mold) */
  const aa_vf al = aa_sel(aa_eq(mold, aa_splat(-INFINITY)), aa_splat(0.0f), aa_dec_exp(mold - mnew));
  aa_vf p[4];
  for (int r = 0; r < 4; r++) {
    const aa_vf mr = aa_dec_bcast4(mnew, r);
    p[r] = aa_dec_exp(x[r] - mr);
    /* a row with no key seen yet keeps its -inf max and zero probabilities */
    if (!full) p[r] = aa_sel(vis[r], p[r], aa_splat(0.0f));
    aa_st(P + r * AA_DEC_KB, p[r]);
  }
  const aa_vf sum = aa_dec_sum4(p);
  for (int r = 0; r < 4; r++) {
    alpha[r] = al[4 * r];
    l[r] = l[r] * al[4 * r] + sum[4 * r];
    m[r] = mnew[4 * r];
  }
}

/* The scores St[16 keys][4 rows] of the AMX products as one vector per
 * row (lane j: key j): a stride-4 deinterleave in two rounds of two-source
 * permutes. */
AA_INLINE void aa_dec_scores_st(const float *St, aa_vf sc[4]) {
  aa_vf v[4], e[2], o[2];
  for (int b = 0; b < 4; b++) v[b] = aa_ld(St + 16 * b);
  for (int h = 0; h < 2; h++) {
    e[h] = __builtin_shufflevector(v[2 * h], v[2 * h + 1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    o[h] = __builtin_shufflevector(v[2 * h], v[2 * h + 1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  }
  sc[0] = __builtin_shufflevector(e[0], e[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  sc[2] = __builtin_shufflevector(e[0], e[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  sc[1] = __builtin_shufflevector(o[0], o[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  sc[3] = __builtin_shufflevector(o[0], o[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

/* One key block for rows [rc, rc + 4) of kv head g: scores (from St where
 * AMX made them, else from k), online softmax (P lands in P[4][AA_DEC_KB]),
 * P.V. k holds the head's AA_DEC_KB K row pointers (padded past nk with
 * valid rows whose scores are masked), v the nk V rows of kv head g0, hv
 * bytes from this head's; qs multiplies the scores of raw bf16 q
 * (AA_DEC_QRAW). */
AA_INLINE void aa_dec_rows4(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const int d,
                            const aa_cpu_rows *rw, const float qs, const void *restrict q, float *restrict acc,
                            float *restrict m, float *restrict l, float *restrict P, int rc, int g, int j0, int nk,
                            const char *const *k, const char *const *v, int64_t hv, aa_dec_pf *pf,
                            const float *St) {
  aa_vf blk[4], sc[4];
  if (St) {
    aa_dec_scores_st(St, sc);
  } else {
#if AA_DEC_QBF16
    if (AA_DEC_QI(dt, kv)) {
      aa_dec_qk4x16i((const uint16_t *)q, k, d, pf, sc);
    } else
#endif
    {
      for (int b = 0; b < 4; b++) blk[b] = aa_dec_qk4x4(dt, kv, q, k + 4 * b, d, pf, 4 * b);
      aa_transpose4x4q(blk, sc); /* sc[r] lane j: row r, key j0 + j */
    }
  }
  float alpha[4];
  aa_dec_softmax4(job, dt, kv, rw, sc, qs, m, l, P, alpha, rc, g, j0, nk);
  int c = 0;
  for (; c + 64 <= d; c += 64) aa_dec_pv(dt, kv, 2, 0, acc, d, c, alpha, P, v, hv, nk, pf);
  for (; c + 32 <= d; c += 32) aa_dec_pv(dt, kv, 1, 0, acc, d, c, alpha, P, v, hv, nk, pf);
  if (c < d) aa_dec_pv(dt, kv, 1, 1, acc, d, c, alpha, P, v, hv, nk, pf); /* where the rows end */
}

/* ---- one decode item ------------------------------------------------------------ */
/* The item's q rows (hb-th kv head's at hb * R4, AA_DEC_DQ(d) elements
 * each, zeros past d): raw bf16 for vdpbf16ps (AA_DEC_QRAW), else fp32 in
 * aa_dec_load32 order with the scale (times the k_descale of fp8 caches)
 * folded in (a multiply per score saved); padding rows zero; m and l
 * started from the sinks; accumulators cleared. */
AA_INLINE void aa_dec_load_q(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                             int s, int g0, int nh, const int d, void *Q, float *restrict acc, float *restrict m,
                             float *restrict l) {
  const anyattn_args *a = job->a;
  const int group = job->group, R = rw->R, R4 = rw->R4, dq = AA_DEC_DQ(d);
  const size_t qes = dt == ANYATTN_DTYPE_F32 ? 4 : 2; /* bytes per q element */
  for (int hb = 0; hb < nh; hb++) {
    const float scale = job->plan->scale * aa_descale_of(a, a->k_descale, s, g0 + hb, job->kvh) * AA_DEC_UNIT(kv);
    for (int r = 0; r < R4; r++) {
      const size_t row = (size_t)hb * R4 + r;
      const int h = (g0 + hb) * group + r % group;
      const char *srcb = (const char *)a->q + ((size_t)(rw->tok0 + r / group) * job->nqh + h) * d * qes;
      const uint16_t *src = (const uint16_t *)srcb; /* 16-bit q */
      if (AA_DEC_QRAW(dt, kv)) {
        uint16_t *dst = (uint16_t *)Q + row * dq;
        if (r >= R)
          memset(dst, 0, (size_t)dq * sizeof(uint16_t));
        else if (AA_DEC_W(kv)) {
          memset(dst + d, 0, (size_t)(dq - d) * sizeof(uint16_t)); /* aa_dec_wpos moves only whole 64s */
          for (int c = 0; c < d; c++) dst[aa_dec_wpos(kv, d, c)] = src[c];
        } else {
          memcpy(dst, src, (size_t)d * sizeof(uint16_t));
          memset(dst + d, 0, (size_t)(dq - d) * sizeof(uint16_t));
        }
      } else if (AA_DEC_W(kv)) { /* once per item: scalar */
        float *dst = (float *)Q + row * dq;
        memset(dst, 0, (size_t)dq * sizeof(float)); /* the slots of d .. dq */
        for (int c = 0; c < d; c++)
          dst[aa_dec_slot(dt, kv, d, c)] =
              r >= R ? 0.0f : (dt == ANYATTN_DTYPE_BF16 ? aa_bf16_to_f32(src[c]) : aa_f16_to_f32(src[c])) * scale;
      } else {
        float *dst = (float *)Q + row * dq;
        const aa_vf sc = aa_splat(scale);
        for (int c = 0; c < d; c += 32) {
          aa_vf e = aa_splat(0.0f), o = aa_splat(0.0f);
          if (r < R && c + 32 <= d) {
            aa_dec_loadq32(dt, kv, srcb + c * qes, &e, &o);
          } else if (r < R) { /* the row's last elements (AA_DEC_TAILS), then zeros */
            float tail[32] = {0};
            memcpy(tail, srcb + c * qes, (size_t)(d - c) * qes);
            aa_dec_loadq32(dt, kv, tail, &e, &o);
          }
          aa_st(dst + c, e * sc);
          aa_st(dst + c + 16, o * sc);
        }
      }
      m[row] = r < R && a->sinks ? ((const float *)a->sinks)[h] : -INFINITY;
      l[row] = r < R && a->sinks ? 1.0f : 0.0f;
    }
  }
  memset(acc, 0, (size_t)nh * R4 * dq * sizeof(float));
}

/* The raw bf16 q rows (nr of d, a multiple of 4) as the AMX scores' B
 * operand: per 4 rows, Qt[i][n] = pair i of row n. */
AA_INLINE void aa_dec_load_qt(const uint16_t *Q, int nr, const int d, uint32_t *qt) {
  const uint32_t *q32 = (const uint32_t *)Q;
  for (int r0 = 0; r0 < nr; r0 += 4)
    for (int i = 0; i < d / 2; i++)
      for (int n = 0; n < 4; n++) qt[(size_t)r0 * d / 2 + i * 4 + n] = q32[(size_t)(r0 + n) * d / 2 + i];
}

/* The raw bf16 q rows (nr of d elements each, nr a multiple of 4; d here
 * the row length AA_DEC_DQ) interleaved in place for aa_dec_qk4x16i: per
 * group of 4 rows, per 8 dims, the 4 rows' 8 dims. */
AA_INLINE void aa_dec_interleave_q(uint16_t *Q, int nr, const int d) {
  uint16_t tmp[4 * AA_CPU_MAX_HEAD_DIM]; /* 4 rows */
  for (int r0 = 0; r0 < nr; r0 += 4) {
    uint16_t *g = Q + (size_t)r0 * d;
    memcpy(tmp, g, (size_t)4 * d * sizeof(uint16_t));
    for (int c = 0; c < d; c += 8)
      for (int n = 0; n < 4; n++) memcpy(g + (size_t)c * 4 + n * 8, tmp + (size_t)n * d + c, 8 * sizeof(uint16_t));
  }
}

/* Whether the K and V rows of a key block (nk keys at kr, vr; nh heads)
 * hold a NaN code: a bytewise max of the codes mapped so that only NaN
 * codes give 0xFF (two ops a line), so that the conversions with a NaN fix
 * run only in such blocks. A row that ends inside a line is read only up to
 * its end (a whole line would read past the cache's last row); the zeros
 * that fill the rest map to no NaN. */
AA_INLINE int aa_dec_scan(const aa_cpu_job *job, const int kv, int nh, const int d, int nk, const char *const *kr,
                          const char *const *vr) {
  const anyattn_args *a = job->a;
  const size_t row_bytes = (size_t)d; /* fp8: a byte per element */
  const int64_t kh = a->k_stride_head, vh = a->v_stride_head;
  aa_vB top = {0};
  for (int j = 0; j < nk; j++)
    for (int hb = 0; hb < nh; hb++)
      for (size_t o = 0; o < row_bytes; o += 64) {
        aa_vB tk = {0}, tv = {0};
        if (o + 64 > row_bytes) {
#if AA_DEC_MASKED /* the row's last bytes, masked */
          const __mmask64 mk = (__mmask64)((1ull << (row_bytes - o)) - 1);
          const __m512i a = _mm512_maskz_loadu_epi8(mk, kr[j] + hb * kh + o),
                        b = _mm512_maskz_loadu_epi8(mk, vr[j] + hb * vh + o);
          memcpy(&tk, &a, 64);
          memcpy(&tv, &b, 64);
#else /* the row's last bytes, 8 at a time (rows are multiples of 8 bytes): constant-size copies, a variable one is a \
         call */
          for (size_t b = 0; b < row_bytes - o; b += 8) {
            memcpy((char *)&tk + b, kr[j] + hb * kh + o + b, 8);
            memcpy((char *)&tv + b, vr[j] + hb * vh + o + b, 8);
          }
#endif
        } else {
          memcpy(&tk, kr[j] + hb * kh + o, 64);
          memcpy(&tv, vr[j] + hb * vh + o, 64);
        }
        const aa_vB x = AA_DEC_FMT(kv) == 2 ? tk ^ 0x7F : tk | 0x80; /* fnuz 0x80, e4m3fn 0x7F */
        const aa_vB y = AA_DEC_FMT(kv) == 2 ? tv ^ 0x7F : tv | 0x80;
        top = aa_dec_bmax(aa_dec_bmax(top, x), y);
      }
  int nan = 0;
  for (int i = 0; i < 64; i++) nan |= top[i] == 0xFF;
  return nan;
}

/* The K and V row addresses of the next n keys of w (kv head g0's; the
 * other heads of the item are at the head strides). */
AA_INLINE void aa_dec_next_rows(aa_kv_walks *w, int n, const char **kr, const char **vr) {
  for (int j = 0; j < n; j++) {
    kr[j] = aa_walk_next(&w->k);
    vr[j] = aa_walk_next(&w->v);
  }
}

/* The prefetch's next block: the lists of the blocks ahead move up one, and
 * the last takes the keys AA_DEC_PF_BLOCKS + sp - 1 blocks ahead of the one
 * the math is on, walked by w up to key ihi (next: w's position). */
AA_INLINE void aa_dec_pf_next(aa_dec_pf *pf, aa_kv_walks *w, int *next, int ihi) {
  const int B = pf->sp - 1;
  for (int b = 0; b < B; b++) {
    pf->n[b] = pf->n[b + 1];
    memcpy(pf->pk[b], pf->pk[b + 1], sizeof pf->pk[b]);
    memcpy(pf->pv[b], pf->pv[b + 1], sizeof pf->pv[b]);
  }
  pf->n[B] = ihi - *next < AA_DEC_KB ? ihi - *next : AA_DEC_KB;
  if (pf->n[B] < 0) pf->n[B] = 0;
  aa_dec_next_rows(w, pf->n[B], pf->pk[B], pf->pv[B]);
  *next += pf->n[B];
}

/* The first AA_DEC_PF_BLOCKS blocks, which no P.V loop prefetches: all
 * their lines at once, in address order, at the start of the item, with
 * the hint of the split prefetch where the item takes it (split). */
AA_INLINE void aa_dec_pf_first(const aa_cpu_job *job, int nh, const int d, aa_kv_walks w, int n, int split) {
  const anyattn_args *a = job->a;
  const size_t row_bytes = (size_t)d * job->kes;
  const int64_t kh = a->k_stride_head * (int64_t)job->kes, vh = a->v_stride_head * (int64_t)job->kes;
  for (int j = 0; j < n; j++) {
    const char *kp = aa_walk_next(&w.k), *vp = aa_walk_next(&w.v);
    for (int hb = 0; hb < nh; hb++)
      for (size_t o = 0; o < row_bytes; o += 64)
        if (split) {
          __builtin_prefetch(kp + hb * kh + o, 0, AA_DEC_PF_HINT_SPLIT);
          __builtin_prefetch(vp + hb * vh + o, 0, AA_DEC_PF_HINT_SPLIT);
        } else {
          __builtin_prefetch(kp + hb * kh + o, 0, AA_DEC_PF_HINT);
          __builtin_prefetch(vp + hb * vh + o, 0, AA_DEC_PF_HINT);
        }
  }
}

/* The keys [*ilo, *ihi) of chunk `chunk` of job->dec_chunks of an item's
 * keys [*ilo, *ihi): whole blocks, the last chunk the rest. */
AA_INLINE void aa_dec_chunk_keys(const aa_cpu_job *job, int chunk, int *ilo, int *ihi) {
  const int c = job->dec_chunks, n = *ihi > *ilo ? *ihi - *ilo : 0;
  const int span = (int)aa_round_up((size_t)((n + c - 1) / c), AA_DEC_KB);
  const int lo = *ilo + chunk * span < *ihi ? *ilo + chunk * span : *ihi;
  *ihi = lo + span < *ihi ? lo + span : *ihi;
  *ilo = lo;
}

/* The keys from ilo whose blocks aa_dec_pf_first prefetches: the first
 * block, and with a spread the second as well; the first portions of blocks
 * 2 .. sp - 1 go without (prefetching those blocks whole at the start too
 * made decode 1x512 slower; docs/design/cpu.md, Fused decode). */
AA_INLINE int aa_dec_first_keys(const aa_cpu_job *job, int ilo, int ihi) {
  const int n = (AA_DEC_PF_BLOCKS + (job->dec_spread > 1 && !AA_DEC_CURSOR)) * AA_DEC_KB;
  return ihi - ilo < n ? ihi - ilo : n;
}

/* The prefetch a decode item hands to its thread's next item
 * (aa_cpu_items.carry): its block lists and its walk, already into the next
 * item's keys. */
typedef struct {
  aa_dec_pf pf;
  aa_kv_walks pw;
  int next; /* the walk's next key (its end: the next item's last key) */
} aa_dec_carry;
_Static_assert(sizeof(aa_dec_carry) <= AA_CPU_DEC_CARRY, "aa_cpu_items.carry holds an aa_dec_carry");

/* Claims the thread's next work item (q->next) when the current item's
 * prefetch has no block left; where that item is a decode item with keys,
 * the prefetch's walk (pw, up to *hi from *next) moves on into its keys and
 * returns 1: the math of the current item's last blocks then prefetches
 * the next one's first blocks, as in the middle of an item. Without it a
 * thread's reads stopped before every item's end and started again with a
 * burst of prefetches at the next one's (docs/design/cpu.md, Work items).
 * No claim while fewer items than threads are left: the item would wait
 * for this one's end while another thread may be free to run it. */
AA_INLINE int aa_dec_claim(const aa_cpu_job *job, aa_cpu_items *q, aa_kv_walks *pw, int *next, int *hi) {
  if (aa_cpu_items_left(q) < q->threads) return 0;
  q->next = aa_cpu_claim(q);
  int s, g0, chunk, ilo, ihi;
  int64_t local;
  if (q->next >= q->total || !aa_cpu_item_at(job, q->prefix, q->next, &s, &local, &g0, &chunk)) return 0;
  aa_keys_of(job, s, &ilo, &ihi);
  if (job->dec_chunks > 1) aa_dec_chunk_keys(job, chunk, &ilo, &ihi);
  if (ilo >= ihi) return 0;
  aa_walks_init(pw, job, s, g0, ilo);
  *next = ilo;
  *hi = ihi;
  return 1;
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* 16 floats to bf16, rounded as aa_f32_to_bf16 does: to nearest even, NaN
 * kept quiet (vcvtneps2bf16 would flush subnormals). */
AA_INLINE __m256i aa_dec_bf16x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
  const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), qnan));
}
#endif

/* Row ar of the accumulators times inv into out (dt), undoing their order
 * (aa_dec_slot): 32 elements at a time where AVX-512 has them in bf16 pairs
 * or in order, the same bits as the scalar loop; returns the elements done. */
AA_INLINE int aa_dec_store_vec(const anyattn_dtype dt, const int kv, const int d, const float *restrict ar, float inv,
                               void *out) {
  int c = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  if (kv) return 0;
  const __m512 vi = _mm512_set1_ps(inv);
  if (dt == ANYATTN_DTYPE_BF16) { /* 16 even elements, then 16 odd, per 32 */
    const __m512i pos = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (; c + 32 <= d; c += 32) {
      const __m256i e = aa_dec_bf16x16(_mm512_mul_ps(_mm512_loadu_ps(ar + c), vi));
      const __m256i o = aa_dec_bf16x16(_mm512_mul_ps(_mm512_loadu_ps(ar + c + 16), vi));
      const __m512i eo = _mm512_inserti64x4(_mm512_castsi256_si512(e), o, 1);
      _mm512_storeu_si512((uint16_t *)out + c, _mm512_permutexvar_epi16(pos, eo));
    }
  } else if (dt == ANYATTN_DTYPE_F16) {
    for (; c + 16 <= d; c += 16)
      _mm256_storeu_si256((__m256i *)((uint16_t *)out + c),
                          _mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(ar + c), vi), _MM_FROUND_TO_NEAREST_INT));
  }
#else
  (void)dt, (void)kv, (void)d, (void)ar, (void)inv, (void)out;
#endif
  return c;
}

/* Normalises the accumulators (times the v_descale of fp8 caches), undoes
 * aa_dec_load32's order and rounds once to the output dtype; writes the LSE
 * (without v_descale) when asked. */
AA_INLINE void aa_dec_store(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                            int s, int g0, int nh, const int d, const float *restrict acc, const float *restrict m,
                            const float *restrict l) {
  const anyattn_args *a = job->a;
  const int group = job->group;
  for (int hb = 0; hb < nh; hb++) {
    const float vd = aa_descale_of(a, a->v_descale, s, g0 + hb, job->kvh) * AA_DEC_UNIT(kv);
    for (int r = 0; r < rw->R; r++) {
      const int t = rw->tok0 + r / group, h = (g0 + hb) * group + r % group;
      const size_t o = (size_t)t * job->nqh + h, rr = (size_t)hb * rw->R4 + r;
      const int empty = rw->lo[r] >= rw->hi[r];
      const float inv = empty ? 0.0f : vd / l[rr];
      const float *ar = acc + rr * AA_DEC_DQ(d);
      uint16_t *out = (uint16_t *)a->out + o * d;
      float *outf = (float *)a->out + o * d;
      if (dt == ANYATTN_DTYPE_F32)
        for (int c = 0; c < d; c++) outf[c] = ar[aa_dec_slot(dt, kv, d, c)] * inv;
      else if (dt == ANYATTN_DTYPE_BF16)
        for (int c = aa_dec_store_vec(dt, kv, d, ar, inv, out); c < d; c++)
          out[c] = aa_f32_to_bf16(ar[aa_dec_slot(dt, kv, d, c)] * inv);
      else
        for (int c = aa_dec_store_vec(dt, kv, d, ar, inv, out); c < d; c++)
          out[c] = aa_f32_to_f16(ar[aa_dec_slot(dt, kv, d, c)] * inv);
      if (a->lse) a->lse[o] = empty ? -INFINITY : m[rr] + logf(l[rr]);
    }
  }
}

/* Whether the nk keys of a block sit at one stride kst (bytes) from kr[0]:
 * then one AMX tile load takes 16 K rows of a head straight from the cache
 * (a whole page of 16 keys or more, or pages laid out back to back). */
AA_INLINE int aa_dec_uniform(const char *const *kr, int nk, int64_t kst) {
  int uni = nk == AA_DEC_KB;
  for (int j = 1; j < nk && uni; j++) uni = kr[j] == kr[0] + j * kst;
  return uni;
}

#if defined(ANYATTN_CPU_MM16)
/* The AMX scores of a key block for all the item's row groups (4 rows,
 * R4 / 4 per kv head) into St (64 floats each, aa_dec_scores_st's input),
 * two groups per call so that their products overlap. All before the first
 * softmax: a tile store read back by the vector unit right away stalled
 * (1.45x slower than vdpbf16ps; batched, 1.2x faster). */
AA_INLINE void aa_dec_scores_amx(const aa_mm16_ops *mm, const char *k0, int64_t kh, int64_t kst, const uint32_t *qt,
                                 int ng, int R4, const int d, float *St) {
  int gi = 0;
  for (; gi + 1 < ng; gi += 2) {
    const int r0 = 4 * gi, r1 = r0 + 4;
    mm->dec_qk2(k0 + r0 / R4 * kh, k0 + r1 / R4 * kh, kst, qt + (size_t)r0 * d / 2, qt + (size_t)r1 * d / 2, d,
                St + r0 * AA_DEC_KB, St + r1 * AA_DEC_KB);
  }
  if (gi < ng) mm->dec_qk(k0 + 4 * gi / R4 * kh, kst, qt + (size_t)4 * gi * d / 2, d, St + 4 * gi * AA_DEC_KB);
}
#endif

/* A decode item in bf16 or fp16 (dt) over caches of dt (kv 0) or fp8 codes
 * (kv 1 e4m3fn, 2 e4m3fnuz): every token of sequence s (q_len <= dec_q)
 * against kv heads g0 .. g0 + nh - 1, the rows as in cpu.h. Always inlined
 * into one wrapper per (dtype, cache format), so no type test is left in the
 * hot loops. A key block at a time: its row addresses, the NaN scan of fp8
 * codes where needed, the AMX scores of every head where the plan has AMX
 * and the block is at one stride, then per head and 4 rows the scores
 * (unless AMX made them), the softmax and P.V, which also prefetches the
 * block AA_DEC_PF_BLOCKS ahead. */
AA_INLINE void aa_cpu_decode16(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, float *restrict ws, int s,
                               int g0, int nh, const int d, int chunk, float *part, aa_cpu_items *q) {
  const anyattn_args *a = job->a;
  const aa_cpu_layout *L = &job->L;
  aa_dec_carry *cy = (aa_dec_carry *)q->carry;
  const int warm = q->warm; /* the thread's item before this one streams its first blocks (aa_dec_claim) */
  q->warm = 0;
  const int nq = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
  void *Q = ws + L->q; /* raw bf16 rows or fp32 rows, d elements each (aa_dec_load_q) */
  float *restrict acc = ws + L->acc, *restrict P = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l;
  float *St = P + 4 * AA_DEC_KB; /* AMX scores, after P in the scores segment */
  const aa_cpu_rows rw = aa_rows_of(job, s, 0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const int R4 = rw.R4, dq = AA_DEC_DQ(d);
  aa_dec_load_q(job, dt, kv, &rw, s, g0, nh, d, Q, acc, m, l);
  int ilo = rw.ilo, ihi = rw.ihi;
  if (part) { /* key chunk `chunk` of dec_chunks; the sinks count in chunk 0 only */
    aa_dec_chunk_keys(job, chunk, &ilo, &ihi);
    if (chunk > 0)
      for (int r = 0; r < nh * R4; r++) m[r] = -INFINITY, l[r] = 0.0f;
  }
  const int64_t kh = a->k_stride_head * (int64_t)job->kes, vh = a->v_stride_head * (int64_t)job->kes; /* bytes */
  const int64_t kst = a->k_stride_token * (int64_t)job->kes;
#if defined(ANYATTN_CPU_MM16)
  const aa_mm16_ops *mm = job->mm16;
  /* whole 32-dim tiles; vdpbf16ps instead where the run reads from memory (job->dec_amx) */
  const int amx = AA_DEC_QRAW(dt, kv) && !kv && mm && mm->dec_qk && d % 32 == 0 && job->dec_amx;
  uint32_t *qt = (uint32_t *)((uint16_t *)Q + (size_t)nh * R4 * dq);             /* after the bf16 rows */
  if (amx) {
    aa_dec_load_qt((const uint16_t *)Q, nh * R4, d, qt);
    mm->dec_begin();
  }
#else
  const int amx = 0;
#endif
  if (AA_DEC_QI(dt, kv)) aa_dec_interleave_q((uint16_t *)Q, nh * R4, dq); /* after the AMX operand, from the rows */

  aa_kv_walks rd = {0}, pw = {0};
  int pf_next = ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB < ihi ? ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB : ihi;
  int pf_hi = ihi, claim = 1, carried = 0; /* the prefetch's end: the next item's (carried) once it walks there */
  aa_dec_pf pf = {.n = {0}, .sp = AA_DEC_CURSOR ? 1 : job->dec_spread};
  if (ilo < ihi) {
    aa_walks_init(&rd, job, s, g0, ilo);
    if (warm) { /* the prefetch of the item before, into this one's blocks */
      pf = cy->pf;
      pw = cy->pw;
      pf_next = cy->next;
    } else { /* the first blocks, which no block's math before them prefetches */
      aa_walks_init(&pw, job, s, g0, pf_next);
      aa_dec_pf_first(job, nh, d, rd, aa_dec_first_keys(job, ilo, ihi), AA_DEC_PF_KSCORES && !amx && !AA_DEC_CURSOR);
      for (int b = 1; b < pf.sp; b++) aa_dec_pf_next(&pf, &pw, &pf_next, ihi);
    }
  }
#if AA_DEC_PF_TWICE == 2
  pf.two = !AA_DEC_CURSOR && job->dec_pf2;
#else
  pf.two = !AA_DEC_CURSOR && AA_DEC_PF_TWICE;
#endif
  /* key-major is address order where a token's heads lie within its stride */
  const int pf_addr = AA_DEC_PF_ADDR && !AA_DEC_CURSOR && nh > 1 && kh > 0 && vh > 0 && kh * nh <= kst &&
                      vh * nh <= a->v_stride_token * (int64_t)job->kes;
  /* NaN codes need their fix in the conversions, except e4m3fn read 64 at a
   * time, whose lookup table holds the NaN */
  const int scan = kv && !(AA_FP8_VBMI && AA_DEC_FMT(kv) == 1 && d % 64 == 0);
  const char *kr[AA_DEC_KB], *vr[AA_DEC_KB];
  for (int j0 = ilo; j0 < ihi; j0 += AA_DEC_KB) {
    const int nk = ihi - j0 < AA_DEC_KB ? ihi - j0 : AA_DEC_KB;
    aa_dec_next_rows(&rd, nk, kr, vr);
    aa_dec_pf_next(&pf, &pw, &pf_next, pf_hi);
    if (claim && pf_next >= pf_hi) { /* once per item */
      claim = 0;
      carried = aa_dec_claim(job, q, &pw, &pf_next, &pf_hi);
    }
    if (AA_DEC_CURSOR) aa_dec_pf_rewind(&pf, nh, d * AA_DEC_ES(dt, kv), kh, vh);
    const int nan = scan && aa_dec_scan(job, kv, nh, d, nk, kr, vr);
    const int ast = amx && aa_dec_uniform(kr, nk, kst);
#if defined(ANYATTN_CPU_MM16)
    if (ast) aa_dec_scores_amx(mm, kr[0], kh, kst, qt, nh * R4 / 4, R4, d, St);
#endif
    for (int hb = 0; hb < nh; hb++) {
      const float qs = job->plan->scale * (kv ? aa_descale_of(a, a->k_descale, s, g0 + hb, job->kvh) : 1.0f);
      const char *k[AA_DEC_KB]; /* the head's K rows for the vector scores */
      if (!ast)
        for (int j = 0; j < AA_DEC_KB; j++) k[j] = kr[j < nk ? j : 0] + hb * kh; /* rows past nk repeat row 0: masked */
      aa_dec_pf_head(&pf, hb, nh, kh, vh, pf_addr);
      if (pf.two && !ast) { /* the second prefetch's rows */
        pf.ncv = nk;
        for (int j = 0; j < nk; j++) pf.cv[j] = vr[j] + hb * vh;
        pf.nck = hb + 1 < nh ? nk : pf.n[0];
        for (int j = 0; j < pf.nck; j++) pf.ck[j] = hb + 1 < nh ? kr[j] + (hb + 1) * kh : pf.pk[0][j];
        aa_dec_pf_pad(pf.cv, pf.ncv); /* the scores index it by key */
      }
      for (int rc = 0; rc < R4; rc += 4) {
        const size_t row = (size_t)hb * R4 + rc;
        const void *qrow = AA_DEC_QRAW(dt, kv) ? (const void *)((const uint16_t *)Q + row * dq)
                                               : (const void *)((const float *)Q + row * dq);
        const float *st = ast ? St + row * AA_DEC_KB : NULL;
        pf.on = rc == 0; /* one row group per head prefetches */
        pf.ks = AA_DEC_PF_KSCORES && pf.on && !st && !AA_DEC_CURSOR;
        if (kv && nan) /* the conversions with their NaN fix, only where a NaN code is */
          aa_dec_rows4(job, dt, kv | AA_DEC_NAN, d, &rw, qs, qrow, acc + row * dq, m + row, l + row, P, rc, g0 + hb, j0,
                       nk, k, vr, hb * vh, &pf, st);
        else
          aa_dec_rows4(job, dt, kv, d, &rw, qs, qrow, acc + row * dq, m + row, l + row, P, rc, g0 + hb, j0, nk, k, vr,
                       hb * vh, &pf, st);
      }
    }
  }
#if defined(ANYATTN_CPU_MM16)
  if (amx) mm->end();
#endif
  if (carried) {
    cy->pf = pf;
    cy->pw = pw;
    cy->next = pf_next;
    q->warm = 1;
  }
  if (part) { /* the rows' accumulators (in their load order), maxima and sums */
    const size_t nr = (size_t)nh * R4;
    memcpy(part, acc, nr * dq * sizeof(float));
    memcpy(part + nr * dq, m, nr * sizeof(float));
    memcpy(part + nr * dq + nr, l, nr * sizeof(float));
  } else
    aa_dec_store(job, dt, kv, &rw, s, g0, nh, d, acc, m, l);
}

/* aa_cpu_decode_merge for one (dtype, cache format): per row, the chunks'
 * maxima M = max m_k, then l = sum l_k e^(m_k - M) and acc = sum acc_k
 * e^(m_k - M), which aa_dec_store normalises as an item's own. A NaN max
 * (NaN scores) is kept, so NaN propagates as in one item; a chunk whose row
 * saw no key (m_k = -inf) adds nothing. */
AA_INLINE void aa_cpu_decode_merge16(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, float *restrict ws,
                                     int s, int g0, int nh, const int d, const float *parts) {
  const anyattn_args *a = job->a;
  const aa_cpu_layout *L = &job->L;
  const int nq = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s], c = job->dec_chunks, dq = AA_DEC_DQ(d);
  float *restrict acc = ws + L->acc, *restrict m = ws + L->m, *restrict l = ws + L->l;
  const aa_cpu_rows rw = aa_rows_of(job, s, 0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const size_t nr = (size_t)nh * rw.R4;
  for (size_t r = 0; r < nr; r++) {
    float M = -INFINITY;
    for (int k = 0; k < c; k++) {
      const float mk = parts[(size_t)k * job->dec_slot + nr * dq + r];
      if (mk > M || isnan(mk)) M = mk;
      if (isnan(M)) break;
    }
    float *restrict ar = acc + r * dq, lr = 0.0f;
    memset(ar, 0, (size_t)dq * sizeof(float));
    for (int k = 0; k < c; k++) {
      const float *p = parts + (size_t)k * job->dec_slot;
      const float mk = p[nr * dq + r];
      if (mk == -INFINITY) continue;
      const float f = expf(mk - M); /* NaN where M or mk is */
      lr += p[nr * dq + nr + r] * f;
      for (int i = 0; i < dq; i++) ar[i] += p[r * dq + i] * f;
    }
    m[r] = M;
    l[r] = lr;
  }
  aa_dec_store(job, dt, kv, &rw, s, g0, nh, d, acc, m, l);
}

void aa_cpu_decode_bf16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk, float *part,
                        aa_cpu_items *q) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 0, ws, s, g0, nh, d, chunk, part, q);
}
void aa_cpu_decode_f16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk, float *part,
                       aa_cpu_items *q) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 0, ws, s, g0, nh, d, chunk, part, q);
}
void aa_cpu_decode_f32(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk, float *part,
                       aa_cpu_items *q) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_F32, 0, ws, s, g0, nh, d, chunk, part, q);
}
void aa_cpu_decode_fp8(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d, int chunk, float *part,
                       aa_cpu_items *q) {
  const int fnuz = job->kv == ANYATTN_KV_FP8_E4M3FNUZ;
  if (job->plan->problem.dtype == ANYATTN_DTYPE_BF16) {
    if (fnuz)
      aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 2, ws, s, g0, nh, d, chunk, part, q);
    else
      aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 1, ws, s, g0, nh, d, chunk, part, q);
  } else {
    if (fnuz)
      aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 2, ws, s, g0, nh, d, chunk, part, q);
    else
      aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 1, ws, s, g0, nh, d, chunk, part, q);
  }
}
void aa_cpu_decode_merge(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, const float *parts) {
  const anyattn_dtype dt = job->plan->problem.dtype;
  const int d = job->d, fmt = job->kv == ANYATTN_KV_AS_Q ? 0 : job->kv == ANYATTN_KV_FP8_E4M3FNUZ ? 2 : 1;
  if (dt == ANYATTN_DTYPE_F32)
    aa_cpu_decode_merge16(job, ANYATTN_DTYPE_F32, 0, ws, s, g0, nh, d, parts);
  else if (dt == ANYATTN_DTYPE_BF16) {
    if (fmt == 0)
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_BF16, 0, ws, s, g0, nh, d, parts);
    else if (fmt == 1)
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_BF16, 1, ws, s, g0, nh, d, parts);
    else
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_BF16, 2, ws, s, g0, nh, d, parts);
  } else {
    if (fmt == 0)
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_F16, 0, ws, s, g0, nh, d, parts);
    else if (fmt == 1)
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_F16, 1, ws, s, g0, nh, d, parts);
    else
      aa_cpu_decode_merge16(job, ANYATTN_DTYPE_F16, 2, ws, s, g0, nh, d, parts);
  }
}
