/* conformance.c: the conformance suite behind tl_check_run (ctest and
 * `anyattn check`). A fixed list of cases crosses every semantic feature; each
 * case draws its batch and data from its own sub-seed, runs through the public
 * API on backend memory, and is compared with the double-precision reference. */
#define _POSIX_C_SOURCE 200809L
#include "conformance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

/* ---- the case list ------------------------------------------------------ */
enum { LAYOUT_NHD0, LAYOUT_NHD, LAYOUT_HND, LAYOUT_PAD, LAYOUT_MIXED, LAYOUT_COUNT };
static const char *const layout_names[LAYOUT_COUNT] = {"nhd0", "nhd", "hnd", "pad", "kNHDvHND"};

/* KIND_COUNT kinds are drawn at random; KIND_PROMPT (long prompts, so the
 * prefill tiles' rings wrap) and KIND_MANY (hundreds of short sequences, so
 * the GPU's work search, find_work, takes two rounds) only where a case
 * names it. */
enum {
  KIND_MIXED,
  KIND_DECODE,
  KIND_PREFILL,
  KIND_CHUNKED,
  KIND_LONG,
  KIND_SPARSE,
  KIND_COUNT,
  KIND_PROMPT = KIND_COUNT,
  KIND_MANY
};
static const char *const kind_names[KIND_MANY + 1] = {"mixed", "decode", "prefill", "chunked",
                                                      "long",  "sparse", "prompt",  "many"};

enum { GROUP_G1, GROUP_G3, GROUP_G4, GROUP_G8, GROUP_MQA, GROUP_COUNT };

typedef struct {
  char name[160];
  anyattn_dtype dtype;
  int head_dim, block_size, num_kv_heads, group;
  int causal, window_left, window_right;
  float scale, softcap;
  int alibi, sinks, lse;
  float sink_bias;  /* added to every sink logit: large makes the sink dominate */
  int layout;       /* LAYOUT_* */
  int shuffle;      /* physical pages in random order */
  int extra_cols;   /* block table columns beyond the longest sequence */
  int garbage;      /* NaN in every cache slot and table entry run must not read */
  int kind;         /* KIND_*: the shape of the batch */
  int small;        /* quick mode: smaller contexts */
  int padded;       /* rows past cu[num_seqs] (padding: run must leave them untouched) */
  int qpos;         /* batch->q_pos given: queries anywhere among (or beyond) the keys */
  anyattn_kv_dtype kv; /* the caches' storage: AS_Q, or fp8 codes */
  int descale;      /* fp8: 0 no descales (NULL), 1 per tensor, 2 per (sequence, kv head) */
  int stage;        /* fp8: limits.stage_kv_tokens holds the batch (prompts of 64 tokens or more), and on CUDA
                       the run must say it stages (docs/design/layout.md#staged-prefill); the CPU ignores it */
} tl_case;

#define TL_MAX_CASES 640
#define TL_MAX_SEQS 320 /* KIND_MANY: up to 300 */

static void case_set_group(tl_case *c, int g) {
  static const int kv[GROUP_COUNT] = {4, 2, 2, 2, 1}, grp[GROUP_COUNT] = {1, 3, 4, 8, 8};
  c->num_kv_heads = kv[g];
  c->group = grp[g];
}

/* Every feature drawn at random from the list's own fixed stream, so that the
 * list (and every name) is the same for every seed. */
static void case_random(tl_case *c, uint64_t *r, anyattn_dtype dt) {
  static const int dims[] = {64, 96, 128, 256};
  static const int sizes[] = {16, 16, 32, 1, 64, 128, 5, 16};
  static const float caps[] = {2.0f, 5.0f, 20.0f, 50.0f};
  static const float scales[] = {0.05f, 0.125f, 0.3f, 1.0f};
  memset(c, 0, sizeof *c);
  c->dtype = dt;
  c->head_dim = dims[tl_rng_int(r, 0, 3)];
  c->block_size = sizes[tl_rng_int(r, 0, 7)];
  case_set_group(c, tl_rng_int(r, 0, GROUP_COUNT - 1));
  c->causal = tl_rng_int(r, 0, 3) != 0;
  c->window_left = tl_rng_int(r, 0, 4) == 0 ? tl_rng_int(r, 0, 64) : -1;
  c->window_right = (!c->causal && tl_rng_int(r, 0, 2) == 0) ? tl_rng_int(r, 0, 32) : -1;
  c->softcap = tl_rng_int(r, 0, 4) == 0 ? caps[tl_rng_int(r, 0, 3)] : 0.0f;
  c->scale = tl_rng_int(r, 0, 5) == 0 ? scales[tl_rng_int(r, 0, 3)] : 0.0f;
  c->alibi = tl_rng_int(r, 0, 3) == 0;
  c->sinks = tl_rng_int(r, 0, 3) == 0;
  c->lse = tl_rng_int(r, 0, 3) != 0;
  c->layout = tl_rng_int(r, 0, LAYOUT_COUNT - 1);
  c->shuffle = tl_rng_int(r, 0, 5) != 0;
  c->extra_cols = tl_rng_int(r, 0, 2) == 0 ? tl_rng_int(r, 1, 4) : 0;
  c->garbage = tl_rng_int(r, 0, 5) == 0;
  c->kind = tl_rng_int(r, 0, KIND_COUNT - 1);
}

static void name_add(char *buf, size_t size, const char *fmt, int v) {
  size_t n = strlen(buf);
  if (n < size) snprintf(buf + n, size - n, fmt, v);
}

/* Names are built from the features, so --filter can pick by feature: "bf16",
 * "d40", "bs5", "alibi", "hnd", "decode", ... */
static void case_name(tl_case *c, char section, int idx) {
  char *b = c->name;
  const size_t n = sizeof c->name;
  snprintf(b, n, "%c%03d_%s_d%d_bs%d_h%dk%d_%s", section, idx, tl_dtype_name(c->dtype), c->head_dim,
           c->block_size, c->num_kv_heads * c->group, c->num_kv_heads, c->causal ? "causal" : "full");
  if (c->kv != ANYATTN_KV_AS_Q) {
    name_add(b, n, "_", 0);
    name_add(b, n, tl_kv_name(c->kv), 0);
    static const char *const ds[3] = {"_nodescale", "_dsT", "_dsSH"};
    name_add(b, n, ds[c->descale], 0);
    if (c->stage) name_add(b, n, "_staged", 0);
  }
  if (c->window_left >= 0) name_add(b, n, "_wl%d", c->window_left);
  if (c->window_right >= 0) name_add(b, n, c->causal ? "_wr%d(ignored)" : "_wr%d", c->window_right);
  if (c->softcap > 0.0f) name_add(b, n, "_cap%d", (int)c->softcap);
  if (c->scale > 0.0f) name_add(b, n, "_scale%dm", (int)lroundf(c->scale * 1000.0f));
  if (c->alibi) name_add(b, n, "_alibi", 0);
  if (c->sinks) name_add(b, n, c->sink_bias > 0.0f ? "_bigsinks" : "_sinks", 0);
  if (!c->lse) name_add(b, n, "_nolse", 0);
  name_add(b, n, "_", 0);
  name_add(b, n, layout_names[c->layout], 0);
  if (!c->shuffle) name_add(b, n, "_seqpages", 0);
  if (c->extra_cols) name_add(b, n, "_wide%d", c->extra_cols);
  if (c->garbage) name_add(b, n, "_garbage", 0);
  if (c->padded) name_add(b, n, "_padded%d", c->padded);
  if (c->qpos) name_add(b, n, "_qpos", 0);
  name_add(b, n, "_", 0);
  name_add(b, n, kind_names[c->kind], 0);
}

static const anyattn_dtype all_dtypes[3] = {ANYATTN_DTYPE_F32, ANYATTN_DTYPE_F16, ANYATTN_DTYPE_BF16};

/* fp8 caches in the quick set: both formats under bf16 and fp16, each preset
 * crossing several features (decode, prefill, mixed; GQA; windows, softcap,
 * sinks, ALiBi; page sizes; odd and small head dims, and rows that end
 * inside a 32-byte block; both descale layouts; prompts staged to 16-bit). */
static int build_fp8_quick(tl_case *cases, int first) {
  static const anyattn_kv_dtype kvs[2] = {ANYATTN_KV_FP8_E4M3, ANYATTN_KV_FP8_E4M3FNUZ};
  int n = 0;
  for (int fi = 0; fi < 2; fi++) {
    for (int k = 0; k < 8; k++) {
      tl_case *c = &cases[n];
      memset(c, 0, sizeof *c);
      c->kv = kvs[fi];
      c->dtype = (k + fi) % 2 ? ANYATTN_DTYPE_F16 : ANYATTN_DTYPE_BF16;
      c->window_left = c->window_right = -1;
      c->lse = 1, c->shuffle = 1, c->small = 1, c->causal = 1, c->layout = LAYOUT_NHD0;
      switch (k) {
        case 0:
          c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G4), c->descale = 2;
          c->sinks = 1, c->alibi = 1, c->kind = KIND_DECODE;
          break;
        case 1:
          c->head_dim = 64, c->block_size = 32, case_set_group(c, GROUP_G8), c->descale = 1;
          c->window_left = 40, c->softcap = 5.0f, c->layout = LAYOUT_HND, c->kind = KIND_PREFILL;
          break;
        case 2:
          c->head_dim = 37, c->block_size = 5, case_set_group(c, GROUP_G3), c->descale = 2, c->causal = 0;
          c->window_left = 20, c->window_right = 7, c->layout = LAYOUT_PAD, c->kind = KIND_MIXED;
          break;
        case 3:
          c->head_dim = 256, c->block_size = 1, case_set_group(c, GROUP_MQA), c->descale = fi ? 0 : 2;
          c->garbage = 1, c->kind = KIND_CHUNKED;
          break;
        case 5:
          c->head_dim = fi ? 80 : 40, c->block_size = fi ? 16 : 5, case_set_group(c, fi ? GROUP_G4 : GROUP_G8);
          c->descale = 2 - fi, c->window_left = fi ? 50 : -1, c->kind = KIND_MIXED;
          break;
        case 6: /* staged: the 128-row tile's 16-bit kernels with the descales, masks and logit features */
          c->head_dim = fi ? 64 : 128, c->block_size = fi ? 32 : 16, case_set_group(c, GROUP_G4);
          c->descale = 2 - fi, c->stage = 1, c->kind = KIND_PREFILL;
          if (fi) c->alibi = 1, c->sinks = 1, c->causal = 0, c->window_right = 9;
          else c->window_left = 70, c->softcap = 5.0f;
          break;
        case 7: /* staged: odd pages, head-major pages, head dims padded or on their own tile */
          c->head_dim = fi ? 80 : 120, c->block_size = fi ? 5 : 16, case_set_group(c, fi ? GROUP_G8 : GROUP_G3);
          c->descale = fi ? 1 : 2, c->stage = 1, c->layout = LAYOUT_HND, c->kind = KIND_PREFILL;
          if (fi) c->softcap = 20.0f, c->window_left = 100;
          else c->sinks = 1, c->lse = 0;
          break;
        default:
          c->head_dim = 96, c->block_size = 64, case_set_group(c, GROUP_G1), c->descale = 1, c->scale = 0.125f;
          c->sinks = 1, c->layout = LAYOUT_MIXED, c->kind = KIND_LONG;
          break;
      }
      case_name(c, 'q', first + n);
      n++;
    }
  }
  return n;
}

/* fp8 caches in the full set (section k): random features, both formats and
 * 16-bit dtypes, every descale layout, with a few head dims the CPU takes. */
static int build_fp8_full(tl_case *cases, int first, uint64_t *r) {
  static const anyattn_kv_dtype kvs[2] = {ANYATTN_KV_FP8_E4M3, ANYATTN_KV_FP8_E4M3FNUZ};
  static const int odd_dims[] = {1, 13, 40, 72, 200};
  int n = 0;
  for (int k = 0; k < 40; k++) {
    tl_case *c = &cases[n];
    case_random(c, r, k % 4 < 2 ? ANYATTN_DTYPE_BF16 : ANYATTN_DTYPE_F16);
    c->kv = kvs[k % 2];
    c->descale = (k / 4) % 3;
    if (k % 8 == 7) c->head_dim = odd_dims[(k / 8) % 5];
    if (k % 10 == 3) c->kind = KIND_DECODE;
    if (k % 10 == 6) c->kind = KIND_PREFILL;
    case_name(c, 'k', first + n);
    n++;
  }
  return n;
}

static int add_head_dim_cases(tl_case *cases, int n, int quick);

/* Quick set: twelve presets per dtype that together touch every feature, two
 * with query positions (q_pos) per dtype, and padding rows. */
static int build_quick(tl_case *cases) {
  int n = 0;
  for (int di = 0; di < 3; di++) {
    for (int k = 0; k < 12; k++) {
      tl_case *c = &cases[n];
      memset(c, 0, sizeof *c);
      c->dtype = all_dtypes[di];
      c->window_left = c->window_right = -1;
      c->lse = 1;
      c->shuffle = 1;
      c->small = 1;
      c->layout = LAYOUT_NHD0;
      c->causal = 1;
      switch (k) {
        case 0: c->head_dim = 64, c->block_size = 16, case_set_group(c, GROUP_G4), c->kind = KIND_MIXED; break;
        case 1:
          c->head_dim = 128, c->block_size = 32, case_set_group(c, GROUP_G1), c->causal = 0;
          c->window_left = 16, c->window_right = 8, c->layout = LAYOUT_HND, c->kind = KIND_PREFILL;
          break;
        case 2:
          c->head_dim = 96, c->block_size = 1, case_set_group(c, GROUP_MQA), c->sinks = 1, c->alibi = 1;
          c->kind = KIND_DECODE;
          break;
        case 3:
          c->head_dim = 256, c->block_size = 64, case_set_group(c, GROUP_G8), c->softcap = 5.0f;
          c->layout = LAYOUT_PAD, c->kind = KIND_CHUNKED;
          break;
        case 4:
          c->head_dim = 40, c->block_size = 16, case_set_group(c, GROUP_G4), c->causal = 0, c->lse = 0;
          c->scale = 0.3f, c->kind = KIND_MIXED;
          break;
        case 5:
          c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G4), c->window_left = 100;
          c->kind = KIND_LONG;
          break;
        case 6:
          c->head_dim = 64, c->block_size = 128, case_set_group(c, GROUP_G3), c->layout = LAYOUT_MIXED;
          c->extra_cols = 3, c->garbage = 1, c->kind = KIND_SPARSE;
          break;
        case 7:
          c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G4), c->causal = 0, c->alibi = 1;
          c->sinks = 1, c->softcap = 20.0f, c->kind = KIND_DECODE;
          break;
        case 8: c->head_dim = 64, c->block_size = 5, case_set_group(c, GROUP_G4), c->kind = KIND_MIXED; break;
        case 9:
          c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G8), c->shuffle = 0;
          c->extra_cols = 2, c->kind = KIND_PREFILL;
          break;
        case 10:
          c->head_dim = 64, c->block_size = 32, case_set_group(c, GROUP_G1), c->causal = 0;
          c->window_left = 0, c->window_right = 0, c->garbage = 1, c->kind = KIND_CHUNKED;
          break;
        default:
          c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G4), c->alibi = 1, c->sinks = 1;
          c->sink_bias = 4.0f, c->softcap = 5.0f, c->window_left = 40, c->scale = 0.125f;
          c->layout = LAYOUT_PAD, c->kind = KIND_MIXED;
          break;
      }
      case_name(c, 'q', n);
      n++;
    }
  }
  /* Query positions (batch->q_pos): one causal decode-like case with a window,
   * ALiBi and sinks, one non-causal prefill-like case with both windows, per dtype. */
  for (int di = 0; di < 3; di++)
    for (int k = 0; k < 2; k++) {
      tl_case *c = &cases[n];
      memset(c, 0, sizeof *c);
      c->dtype = all_dtypes[di];
      c->lse = 1, c->shuffle = 1, c->small = 1, c->layout = LAYOUT_NHD0, c->qpos = 1;
      if (k == 0) {
        c->head_dim = 128, c->block_size = 16, case_set_group(c, GROUP_G4), c->causal = 1;
        c->window_left = 24, c->window_right = -1, c->alibi = 1, c->sinks = 1, c->kind = KIND_MIXED;
      } else {
        c->head_dim = 64, c->block_size = 5, case_set_group(c, GROUP_G1), c->causal = 0;
        c->window_left = 12, c->window_right = 7, c->softcap = 5.0f, c->layout = LAYOUT_HND, c->kind = KIND_PREFILL;
      }
      case_name(c, 'q', n);
      n++;
    }
  /* Padding rows (num_tokens > cu[num_seqs]), as graph replays at padded sizes have. */
  for (int di = 0; di < 3; di++) {
    tl_case *c = &cases[n];
    memset(c, 0, sizeof *c);
    c->dtype = all_dtypes[di];
    c->window_left = c->window_right = -1;
    c->lse = 1, c->shuffle = 1, c->small = 1, c->causal = 1, c->layout = LAYOUT_NHD0;
    c->head_dim = di == 0 ? 64 : 128, c->block_size = 16, case_set_group(c, GROUP_G4);
    c->sinks = di == 2;
    c->kind = di == 1 ? KIND_MIXED : KIND_DECODE;
    c->padded = 3 + 4 * di;
    case_name(c, 'q', n);
    n++;
  }
  n += build_fp8_quick(cases + n, n);
  return add_head_dim_cases(cases, n, 1);
}

/* Full set: one axis at a time with the other features random (sections
 * a..f), then random combinations of everything (g). */
static int build_full(tl_case *cases) {
  static const int dims[] = {64, 96, 128, 256, 40};
  static const int sizes[] = {1, 16, 32, 64, 128, 5};
  uint64_t r = 0xA11A77E5ull; /* fixed: the list does not depend on the seed */
  int n = 0;
  for (int di = 0; di < 3; di++) {
    const anyattn_dtype dt = all_dtypes[di];
    for (int k = 0; k < 5; k++)
      for (int causal = 1; causal >= 0; causal--) {
        tl_case *c = &cases[n];
        case_random(c, &r, dt);
        c->head_dim = dims[k];
        c->causal = causal;
        if (causal) c->window_right = -1;
        case_name(c, 'a', n++);
      }
    for (int k = 0; k < 6; k++) {
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      c->block_size = sizes[k];
      case_name(c, 'b', n++);
    }
    for (int g = 0; g < GROUP_COUNT; g++) {
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      case_set_group(c, g);
      case_name(c, 'c', n++);
    }
    for (int l = 0; l < LAYOUT_COUNT; l++) {
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      c->layout = l;
      case_name(c, 'd', n++);
    }
    for (int f = 0; f < 18; f++) {
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      c->window_left = c->window_right = -1;
      c->softcap = 0.0f;
      c->alibi = c->sinks = 0;
      c->garbage = 0;
      c->scale = 0.0f;
      c->lse = 1;
      switch (f) {
        case 0: c->causal = 1, c->window_left = 16; break;
        case 1: c->causal = 0, c->window_left = 24; break;
        case 2: c->causal = 0, c->window_right = 8; break;
        case 3: c->causal = 0, c->window_left = 5, c->window_right = 0; break;
        case 4: c->causal = 1, c->window_right = 3; break; /* must be ignored */
        case 5: c->causal = 1, c->window_left = 0; break;  /* the diagonal only */
        case 6: c->softcap = 3.0f; break;
        case 7: c->causal = 1, c->alibi = 1; break;
        case 8: c->causal = 0, c->alibi = 1; break;
        case 9: c->sinks = 1; break;
        case 10: c->sinks = 1, c->alibi = 1, c->softcap = 10.0f, c->window_left = 33; break;
        case 11: c->lse = 0; break;
        case 12: c->scale = 0.07f; break;
        case 13: c->shuffle = 0; break;
        case 14: c->extra_cols = 5; break;
        case 15: c->garbage = 1; break;
        case 16: c->sinks = 1, c->sink_bias = 6.0f; break;
        default: c->window_left = 5000; break; /* wider than any context */
      }
      case_name(c, 'e', n++);
    }
    for (int k = 0; k < KIND_COUNT; k++) {
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      c->kind = k;
      case_name(c, 'f', n++);
    }
    for (int k = 0; k < 3; k++) { /* padding rows past cu[num_seqs] */
      static const int kinds[3] = {KIND_DECODE, KIND_MIXED, KIND_LONG};
      tl_case *c = &cases[n];
      case_random(c, &r, dt);
      c->kind = kinds[k];
      c->padded = 1 + 9 * k;
      case_name(c, 'h', n++);
    }
  }
  /* Query positions (batch->q_pos), one feature at a time, then random ones;
   * a stream of their own so that the cases above keep their features. */
  uint64_t rq = 0x9905C0DEull;
  for (int di = 0; di < 3; di++)
    for (int f = 0; f < 14; f++) {
      static const int kinds[14] = {KIND_MIXED, KIND_PREFILL, KIND_DECODE, KIND_CHUNKED, KIND_PREFILL,
                                    KIND_LONG,  KIND_MIXED,   KIND_DECODE, KIND_SPARSE,  KIND_PREFILL,
                                    KIND_LONG,  KIND_MIXED,   KIND_MIXED,  KIND_DECODE};
      tl_case *c = &cases[n];
      case_random(c, &rq, all_dtypes[di]);
      c->qpos = 1, c->kind = kinds[f], c->garbage = f % 4 == 3;
      c->window_left = c->window_right = -1;
      c->alibi = c->sinks = 0, c->softcap = 0.0f;
      switch (f) {
        case 0: c->causal = 1; break;
        case 1: c->causal = 0; break;
        case 2: c->causal = 1, c->window_left = 20; break;
        case 3: c->causal = 0, c->window_left = 9, c->window_right = 4; break;
        case 4: c->causal = 1, c->alibi = 1; break;
        case 5: c->causal = 0, c->alibi = 1, c->window_left = 70; break;
        case 6: c->causal = 1, c->sinks = 1, c->window_left = 0; break;
        case 7: c->causal = 0, c->softcap = 10.0f, c->window_right = 0; break;
        case 8: c->causal = 1, c->sinks = 1, c->alibi = 1; break;
        case 9: c->causal = 0, c->window_left = 30, c->window_right = 30, c->sinks = 1, c->alibi = 1; break;
        case 10: c->causal = 1, c->window_left = 300, c->softcap = 5.0f; break;
        case 11: c->causal = 0, c->window_left = 3; break;
        /* windows wider than the longest context, narrower than some query's distance */
        case 12: c->causal = 0, c->window_left = 330, c->window_right = 2; break;
        default: c->causal = 1, c->window_left = 310, c->alibi = 1; break;
      }
      case_name(c, 'p', n++);
    }
  for (int k = 0; k < 150; k++) {
    tl_case *c = &cases[n];
    case_random(c, &r, all_dtypes[k % 3]);
    if (tl_rng_int(&r, 0, 9) == 0) c->head_dim = 40;
    if (c->sinks && tl_rng_int(&r, 0, 3) == 0) c->sink_bias = 5.0f;
    case_name(c, 'g', n++);
  }
  n += build_fp8_full(cases + n, n, &r);
  return add_head_dim_cases(cases, n, 0);
}

/* A quick-suite case of these shapes: causal, no window, lse, shuffled
 * pages, small contexts, the NHD layout without padding; the caller changes
 * what differs. */
static tl_case *quick_case(tl_case *c, anyattn_dtype dt, int head_dim, int kind, int block_size, int group) {
  memset(c, 0, sizeof *c);
  c->dtype = dt;
  c->head_dim = head_dim;
  c->kind = kind;
  c->block_size = block_size;
  case_set_group(c, group);
  c->window_left = c->window_right = -1;
  c->lse = 1, c->shuffle = 1, c->small = 1, c->causal = 1, c->layout = LAYOUT_NHD0;
  return c;
}

/* Head dims models use that the GPU runs padded to a compiled one (40, 72,
 * 112, 160) or on a compiled one of their own (80, 192, 512): causal, GQA,
 * odd lengths, decode and prefill (section 'm'). Quick: one case per head
 * dim, 16-bit dtypes alternating, and one fp32 case; full: a decode and a
 * prefill case per head dim and 16-bit dtype, the other features random. */
static int add_head_dim_cases(tl_case *cases, int n, int quick) {
  static const int dims[] = {40, 72, 80, 112, 160, 192, 512};
  static const int kinds[] = {KIND_DECODE, KIND_PREFILL, KIND_MIXED, KIND_LONG, KIND_CHUNKED, KIND_DECODE, KIND_PREFILL};
  static const int groups[] = {GROUP_G4, GROUP_G8, GROUP_G3, GROUP_G4, GROUP_MQA, GROUP_G4, GROUP_G8};
  static const int sizes[] = {16, 5, 32, 16, 1, 64, 16};
  const int nd = (int)(sizeof dims / sizeof dims[0]);
  if (quick) {
    for (int k = 0; k <= nd; k++) {
      tl_case *c = quick_case(&cases[n], k == nd ? ANYATTN_DTYPE_F32 : k % 2 ? ANYATTN_DTYPE_BF16 : ANYATTN_DTYPE_F16,
                              k == nd ? 72 : dims[k], k == nd ? KIND_MIXED : kinds[k], k == nd ? 16 : sizes[k],
                              k == nd ? GROUP_G4 : groups[k]);
      if (k == 3) c->layout = LAYOUT_HND, c->sinks = 1;
      if (k == 4) c->causal = 0, c->layout = LAYOUT_PAD;
      if (k == 6) c->garbage = 1;
      case_name(c, 'm', n++);
    }
    /* long prompts at 192 and at 160 (which runs on 192's kernels): the
     * 128-row tiles' rings wrap several times; pages of 16 and 32 rows
     * (TMA boxes on sm_90) and of 5 (16-byte copies) */
    for (int k = 0; k < 3; k++) {
      tl_case *c = quick_case(&cases[n], k == 1 ? ANYATTN_DTYPE_F16 : ANYATTN_DTYPE_BF16, k == 1 ? 160 : 192,
                              KIND_PROMPT, k == 0 ? 16 : k == 1 ? 32 : 5, k == 1 ? GROUP_G8 : GROUP_G4);
      if (k == 1) c->causal = 0, c->alibi = 1, c->sinks = 1, c->layout = LAYOUT_HND;
      if (k == 2) c->window_left = 200, c->softcap = 5.0f, c->lse = 0, c->garbage = 1;
      case_name(c, 'm', n++);
    }
    /* hundreds of short sequences at head dims with persistent GPU launches */
    for (int k = 0; k < 2; k++) {
      tl_case *c = quick_case(&cases[n], k == 0 ? ANYATTN_DTYPE_BF16 : ANYATTN_DTYPE_F16, k == 0 ? 128 : 64, KIND_MANY,
                              k == 0 ? 16 : 5, k == 0 ? GROUP_G4 : GROUP_G8);
      if (k == 1) c->window_left = 30, c->layout = LAYOUT_HND;
      case_name(c, 'm', n++);
    }
    return n;
  }
  uint64_t r = 0x0DD5D1A5ull; /* fixed: the list does not depend on the seed */
  for (int k = 0; k < nd; k++)
    for (int di = 1; di < 3; di++)
      for (int kind = 0; kind < 2; kind++) {
        tl_case *c = &cases[n];
        case_random(c, &r, all_dtypes[di]);
        c->head_dim = dims[k];
        c->kind = kind == 0 ? KIND_DECODE : KIND_PREFILL;
        if (tl_rng_int(&r, 0, 1)) c->causal = 1, c->window_right = -1;
        case_name(c, 'm', n++);
      }
  return n;
}

/* ---- one case -------------------------------------------------------------- */
static uint64_t tl_hash_name(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

/* Draws the ragged batch for the case's kind; returns num_seqs. Total work
 * (q_len * kv_len summed) is capped so the reference stays fast. */
static int gen_batch(const tl_case *c, uint64_t *r, int *ql, int *kl) {
  const int K = c->small ? 160 : 300;
  int n = 0;
  switch (c->kind) {
    case KIND_MIXED:
      n = tl_rng_int(r, 2, 6);
      for (int s = 0; s < n; s++) {
        const int pick = tl_rng_int(r, 0, 9);
        if (pick <= 3) kl[s] = tl_rng_int(r, 1, K), ql[s] = 1;
        else if (pick <= 5) kl[s] = ql[s] = tl_rng_int(r, 1, K / 2);
        else if (pick <= 7) kl[s] = tl_rng_int(r, 2, K), ql[s] = tl_rng_int(r, 1, kl[s] - 1 < 64 ? kl[s] - 1 : 64);
        else if (pick == 8) kl[s] = tl_rng_int(r, 0, K), ql[s] = 0;
        else kl[s] = ql[s] = 0;
      }
      break;
    case KIND_DECODE:
      n = tl_rng_int(r, 1, 8);
      for (int s = 0; s < n; s++) kl[s] = tl_rng_int(r, 1, K), ql[s] = 1;
      break;
    case KIND_PREFILL:
      n = tl_rng_int(r, 1, 3);
      for (int s = 0; s < n; s++) kl[s] = ql[s] = c->stage ? tl_rng_int(r, 64, K) : tl_rng_int(r, 1, K / 2);
      break;
    case KIND_CHUNKED:
      n = tl_rng_int(r, 1, 4);
      for (int s = 0; s < n; s++) kl[s] = tl_rng_int(r, 2, K), ql[s] = tl_rng_int(r, 1, kl[s] - 1 < 48 ? kl[s] - 1 : 48);
      break;
    case KIND_LONG: /* long contexts so multi-tile and split-KV paths run */
      n = tl_rng_int(r, 1, 2);
      for (int s = 0; s < n; s++)
        kl[s] = tl_rng_int(r, 600, 1100), ql[s] = tl_rng_int(r, 0, 1) ? 1 : tl_rng_int(r, 2, 32);
      kl[n] = tl_rng_int(r, 1, 64), ql[n] = 1;
      n++;
      break;
    case KIND_PROMPT:
      n = tl_rng_int(r, 1, 2);
      for (int s = 0; s < n; s++) kl[s] = ql[s] = tl_rng_int(r, 300, 520);
      break;
    case KIND_MANY: /* past the 256 sequences one round of the GPU's work search covers (find_work) */
      n = tl_rng_int(r, 260, 300);
      for (int s = 0; s < n; s++) {
        const int pick = tl_rng_int(r, 0, 9);
        if (pick <= 3) kl[s] = tl_rng_int(r, 1, K / 2), ql[s] = 1;
        else if (pick <= 6) kl[s] = ql[s] = tl_rng_int(r, 1, 24);
        else if (pick <= 8) kl[s] = tl_rng_int(r, 2, K / 2), ql[s] = tl_rng_int(r, 1, kl[s] - 1 < 16 ? kl[s] - 1 : 16);
        else kl[s] = tl_rng_int(r, 0, 8), ql[s] = 0;
      }
      break;
    default: /* KIND_SPARSE: mostly sequences without queries or without keys */
      n = tl_rng_int(r, 3, 8);
      for (int s = 0; s < n; s++) {
        const int pick = tl_rng_int(r, 0, 5);
        if (pick <= 1) kl[s] = ql[s] = 0;
        else if (pick <= 3) kl[s] = tl_rng_int(r, 1, K), ql[s] = 0;
        else if (pick == 4) kl[s] = tl_rng_int(r, 1, K), ql[s] = 1;
        else kl[s] = tl_rng_int(r, 2, K), ql[s] = tl_rng_int(r, 1, 8 < kl[s] ? 8 : kl[s]);
      }
      break;
  }
  int rows = 0;
  for (int s = 0; s < n; s++) rows += ql[s];
  if (rows == 0) kl[n - 1] = kl[n - 1] > 0 ? kl[n - 1] : 7, ql[n - 1] = 1;

  /* staged: room for three prompts of 64 tokens or more (the stage needs a mean q_len of 64);
   * many: for hundreds of sequences */
  const double cap = (c->kind == KIND_PROMPT              ? 4e8
                      : c->stage || c->kind == KIND_MANY ? 6.4e7
                      : c->small                         ? 8e6
                                                         : 3e7) /
                     ((double)c->num_kv_heads * c->group * c->head_dim);
  for (;;) {
    double work = 0;
    int big = 0;
    for (int s = 0; s < n; s++) {
      work += (double)ql[s] * kl[s];
      if ((double)ql[s] * kl[s] > (double)ql[big] * kl[big]) big = s;
    }
    if (work <= cap || ql[big] * kl[big] <= 1) break;
    if (ql[big] == kl[big]) ql[big] = kl[big] = kl[big] * 3 / 4;
    else if (ql[big] > 1) ql[big] /= 2;
    else kl[big] = kl[big] * 3 / 4 > 1 ? kl[big] * 3 / 4 : 1;
  }
  return n;
}

typedef struct {
  double rel_l2, atol, rtol, lse_atol;
} tl_tol;

/* Elementwise bound: atol + rtol * A, A = sum_j P_j |v_j| (absout). f32: fp32
 * accumulation only. f16/bf16 (unit roundoff u = 2^-11, 2^-8): out is rounded
 * once (<= u |out| <= u A) and GPU tensor cores round P to the dtype before
 * P.V (<= u A more), so the worst case is 2u A; rtol is 5u (f16), 4u (bf16). */
static tl_tol tol_for(anyattn_dtype dt) {
  tl_tol t;
  switch (dt) {
    case ANYATTN_DTYPE_F32: t.rel_l2 = 1e-5, t.atol = 1e-5, t.rtol = 1e-5, t.lse_atol = 1e-5; break;
    case ANYATTN_DTYPE_F16: t.rel_l2 = 2e-3, t.atol = 2e-4, t.rtol = 2.5e-3, t.lse_atol = 1e-3; break;
    default: t.rel_l2 = 1.2e-2, t.atol = 1e-3, t.rtol = 1.6e-2, t.lse_atol = 1e-3; break;
  }
  return t;
}

#define FP32_EPS 5.9604644775390625e-08 /* 2^-24 */

typedef struct {
  /* host */
  int num_seqs, num_tokens, hq;
  int32_t cu[TL_MAX_SEQS + 1], ql[TL_MAX_SEQS], kl[TL_MAX_SEQS], qp[TL_MAX_SEQS];
  int32_t *table;
  int table_stride;
  int64_t num_blocks, ks[3], vs[3], k_elems, v_elems;
  size_t es, kes, q_elems, out_elems, lse_elems; /* kes: bytes per cache element */
  void *q, *k, *v, *out_init, *out_back, *q_back, *k_back, *v_back;
  float *alibi, *sinks, *lse_init, *lse_back; /* alibi and sinks exact in bf16 and f16 */
  uint16_t *alibi16, *sinks16;                 /* the same values in vec16, read by the second run */
  anyattn_dtype vec16;
  float kds[TL_MAX_SEQS * 4], vds[TL_MAX_SEQS * 4]; /* descales, [num_seqs, num_kv_heads] (<= 4 kv heads) */
  double *ref_out, *ref_lse, *ref_abs, *ref_xmag;
  /* device */
  void *d_q, *d_k, *d_v, *d_out, *d_lse, *d_ws, *d_cu, *d_kl, *d_table, *d_alibi, *d_sinks, *d_qp, *d_kds, *d_vds;
  void *d_alibi16, *d_sinks16;
} tl_bufs;

static void bufs_free(anyattn_backend be, tl_bufs *b) {
  free(b->table), free(b->q), free(b->k), free(b->v), free(b->out_init), free(b->out_back);
  free(b->q_back), free(b->k_back), free(b->v_back), free(b->alibi), free(b->sinks);
  free(b->alibi16), free(b->sinks16);
  free(b->lse_init), free(b->lse_back), free(b->ref_out), free(b->ref_lse), free(b->ref_abs);
  free(b->ref_xmag);
  void *dev[] = {b->d_q, b->d_k, b->d_v, b->d_out, b->d_lse, b->d_ws, b->d_cu, b->d_kl, b->d_table,
                 b->d_alibi, b->d_sinks, b->d_qp, b->d_kds, b->d_vds, b->d_alibi16, b->d_sinks16};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dm_free(be, dev[i]);
}

static void layout_strides(const tl_case *c, int which_v, int64_t s[3]) {
  const int64_t d = c->head_dim, bs = c->block_size, h = c->num_kv_heads;
  int l = c->layout;
  if (l == LAYOUT_MIXED) l = which_v ? LAYOUT_HND : LAYOUT_NHD;
  switch (l) {
    case LAYOUT_NHD0: s[0] = s[1] = s[2] = 0; break;
    case LAYOUT_NHD: s[0] = bs * h * d, s[1] = h * d, s[2] = d; break;
    case LAYOUT_HND: s[0] = h * bs * d, s[1] = d, s[2] = bs * d; break;
    default: { /* padded NHD; pads of 8 elements (16 for fp8) keep rows 16-byte aligned */
      const int64_t pad = c->kv != ANYATTN_KV_AS_Q ? 16 : 8;
      s[2] = d + pad, s[1] = h * (d + pad) + pad, s[0] = bs * s[1] + 2 * pad;
      break;
    }
  }
}

static int64_t cache_span(const tl_case *c, int64_t nb, const int64_t st[3]) {
  return (nb - 1) * st[0] + (int64_t)(c->block_size - 1) * st[1] + (int64_t)(c->num_kv_heads - 1) * st[2] +
         c->head_dim;
}

/* Builds the host problem data. Returns 0, -1 on allocation failure. */
/* Query positions for a q_pos case: the default, anywhere around the keys,
 * before the first key, past the last one, or more queries than keys (keys
 * shortened), so that causal and window masks leave some rows with no key. */
static void gen_qpos(uint64_t *r, int n, int *ql, int *kl, int32_t *qp) {
  for (int s = 0; s < n; s++) {
    switch (tl_rng_int(r, 0, 5)) {
      case 0: qp[s] = kl[s] - ql[s]; break;
      case 1: qp[s] = tl_rng_int(r, -ql[s] - 4, kl[s] + 4); break;
      case 2: qp[s] = tl_rng_int(r, -ql[s] - 30, -1); break;
      case 3: qp[s] = tl_rng_int(r, kl[s], 2 * kl[s] + 40); break;
      case 4:
        if (ql[s] > 1) kl[s] = tl_rng_int(r, 0, ql[s] - 1);
        qp[s] = tl_rng_int(r, -4, kl[s] + 4);
        break;
      default: qp[s] = tl_rng_int(r, 0, kl[s]); break;
    }
  }
}

static int build_data(const tl_case *c, uint64_t *r, tl_bufs *b) {
  const int d = c->head_dim, bs = c->block_size, hkv = c->num_kv_heads;
  b->hq = hkv * c->group;
  b->es = anyattn_dtype_size(c->dtype);
  b->kes = anyattn_kv_dtype_size(c->kv, c->dtype);
  int ql[TL_MAX_SEQS + 1], kl[TL_MAX_SEQS + 1];
  b->num_seqs = gen_batch(c, r, ql, kl);
  if (c->qpos) gen_qpos(r, b->num_seqs, ql, kl, b->qp);
  b->cu[0] = 0;
  int max_pages = 0, total_pages = 0;
  for (int s = 0; s < b->num_seqs; s++) {
    b->ql[s] = ql[s], b->kl[s] = kl[s];
    b->cu[s + 1] = b->cu[s] + ql[s];
    const int pages = (kl[s] + bs - 1) / bs;
    if (pages > max_pages) max_pages = pages;
    total_pages += pages;
  }
  b->num_tokens = b->cu[b->num_seqs] + c->padded;
  b->table_stride = (max_pages > 0 ? max_pages : 1) + c->extra_cols;
  b->num_blocks = total_pages + tl_rng_int(r, 0, 3);
  if (b->num_blocks == 0) b->num_blocks = 1;

  int32_t *perm = (int32_t *)malloc(sizeof(int32_t) * (size_t)b->num_blocks);
  b->table = (int32_t *)malloc(sizeof(int32_t) * (size_t)b->num_seqs * b->table_stride);
  if (!perm || !b->table) {
    free(perm);
    return -1;
  }
  for (int64_t i = 0; i < b->num_blocks; i++) perm[i] = (int32_t)i;
  if (c->shuffle)
    for (int64_t i = b->num_blocks - 1; i > 0; i--) {
      int64_t j = (int64_t)(tl_rng_next(r) % (uint64_t)(i + 1));
      int32_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
  int next = 0;
  for (int s = 0; s < b->num_seqs; s++) {
    const int pages = (kl[s] + bs - 1) / bs;
    int32_t *row = b->table + (int64_t)s * b->table_stride;
    for (int j = 0; j < b->table_stride; j++) {
      if (j < pages) row[j] = perm[next++];
      else row[j] = c->garbage ? (j % 2 ? -1 : INT32_MAX) : tl_rng_int(r, 0, (int)b->num_blocks - 1);
    }
    /* run must not read pages of a sequence without queries (validate does not check them). */
    if (c->garbage && ql[s] == 0)
      for (int j = 0; j < pages; j++) row[j] = -1000000 - j;
  }
  free(perm);

  layout_strides(c, 0, b->ks);
  layout_strides(c, 1, b->vs);
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = b->hq, pr.num_kv_heads = hkv, pr.head_dim = d, pr.block_size = bs;
  int64_t kres[3], vres[3];
  tl_resolve_strides(&pr, b->ks[0], b->ks[1], b->ks[2], kres);
  tl_resolve_strides(&pr, b->vs[0], b->vs[1], b->vs[2], vres);
  b->k_elems = cache_span(c, b->num_blocks, kres);
  b->v_elems = cache_span(c, b->num_blocks, vres);
  b->q_elems = (size_t)b->num_tokens * b->hq * d;
  b->out_elems = b->q_elems + (size_t)b->hq * d; /* one guard row past the end */
  b->lse_elems = (size_t)b->num_tokens * b->hq + (size_t)b->hq;

  b->q = malloc(b->q_elems * b->es);
  b->k = malloc((size_t)b->k_elems * b->kes);
  b->v = malloc((size_t)b->v_elems * b->kes);
  b->out_init = malloc(b->out_elems * b->es);
  b->out_back = malloc(b->out_elems * b->es);
  b->q_back = malloc(b->q_elems * b->es + 1);
  b->k_back = malloc((size_t)b->k_elems * b->kes);
  b->v_back = malloc((size_t)b->v_elems * b->kes);
  b->alibi = (float *)malloc(sizeof(float) * (size_t)b->hq);
  b->sinks = (float *)malloc(sizeof(float) * (size_t)b->hq);
  b->alibi16 = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)b->hq);
  b->sinks16 = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)b->hq);
  b->lse_init = (float *)malloc(sizeof(float) * b->lse_elems);
  b->lse_back = (float *)malloc(sizeof(float) * b->lse_elems);
  const size_t rows = (size_t)b->num_tokens * b->hq;
  b->ref_out = (double *)malloc(sizeof(double) * (rows * d + 1));
  b->ref_abs = (double *)malloc(sizeof(double) * (rows * d + 1));
  b->ref_lse = (double *)malloc(sizeof(double) * (rows + 1));
  b->ref_xmag = (double *)malloc(sizeof(double) * (rows + 1));
  if (!b->q || !b->k || !b->v || !b->out_init || !b->out_back || !b->q_back || !b->k_back || !b->v_back ||
      !b->alibi || !b->sinks || !b->alibi16 || !b->sinks16 || !b->lse_init || !b->lse_back || !b->ref_out || !b->ref_abs || !b->ref_lse ||
      !b->ref_xmag)
    return -1;

  /* Larger q when softcapping, so the cap actually bends the logits. */
  tl_fill_normal(c->dtype, b->q, b->q_elems, c->softcap > 0.0f ? 3.0f : 1.0f, r);
  const int fp8 = c->kv != ANYATTN_KV_AS_Q;
  if (fp8) {
    /* Codes of magnitude up to 4 (a few up to the format's max), descales that
     * bring typical values to about 0.1 .. 1: as a quantised cache holds them. */
    tl_fill_fp8(c->kv, (uint8_t *)b->k, (size_t)b->k_elems, r);
    tl_fill_fp8(c->kv, (uint8_t *)b->v, (size_t)b->v_elems, r);
    if (c->garbage) { /* NaN codes wherever run must not read */
      memset(b->k, tl_fp8_nan(c->kv), (size_t)b->k_elems);
      memset(b->v, tl_fp8_nan(c->kv), (size_t)b->v_elems);
    }
    for (int i = 0; i < b->num_seqs * hkv; i++) {
      b->kds[i] = (float)(0.02 + 0.6 * tl_rng_uniform(r));
      b->vds[i] = (float)(0.02 + 2.0 * tl_rng_uniform(r));
    }
  }
  if (!c->garbage) {
    if (!fp8) {
      tl_fill_normal(c->dtype, b->k, (size_t)b->k_elems, 1.0f, r);
      tl_fill_normal(c->dtype, b->v, (size_t)b->v_elems, 1.0f, r);
    }
  } else {
    /* Everything NaN (stride padding, slots past kv_len, spare pages), then
     * the rows run may read get values: a masked key must not leak in. */
    if (!fp8) {
      tl_fill_nan(c->dtype, b->k, (size_t)b->k_elems);
      tl_fill_nan(c->dtype, b->v, (size_t)b->v_elems);
    }
    for (int s = 0; s < b->num_seqs; s++) {
      if (ql[s] == 0) continue;
      for (int j = 0; j < kl[s]; j++) {
        const int32_t page = b->table[(int64_t)s * b->table_stride + j / bs];
        for (int h = 0; h < hkv; h++) {
          const int64_t ko = page * kres[0] + (j % bs) * kres[1] + h * kres[2];
          const int64_t vo = page * vres[0] + (j % bs) * vres[1] + h * vres[2];
          if (fp8) {
            tl_fill_fp8(c->kv, (uint8_t *)b->k + ko, (size_t)d, r);
            tl_fill_fp8(c->kv, (uint8_t *)b->v + vo, (size_t)d, r);
          } else {
            for (int e = 0; e < d; e++) {
              tl_store(c->dtype, b->k, (size_t)(ko + e), (float)tl_rng_normal(r));
              tl_store(c->dtype, b->v, (size_t)(vo + e), (float)tl_rng_normal(r));
            }
          }
        }
      }
    }
  }
  /* Slopes and sinks rounded to bf16, which f16 holds too at these
   * magnitudes: the second run reads them as 16-bit values (vec16) and must
   * give the first run's bits. */
  for (int h = 0; h < b->hq; h++) {
    b->alibi[h] = tl_bf16_to_f32(tl_f32_to_bf16((float)pow(2.0, -8.0 * (h + 1) / b->hq))); /* the ALiBi paper's slopes */
    b->sinks[h] = tl_bf16_to_f32(tl_f32_to_bf16((float)(1.5 * tl_rng_normal(r)) + c->sink_bias));
  }
  b->vec16 = tl_rng_int(r, 0, 1) ? ANYATTN_DTYPE_BF16 : ANYATTN_DTYPE_F16;
  for (int h = 0; h < b->hq; h++) {
    b->alibi16[h] = b->vec16 == ANYATTN_DTYPE_BF16 ? tl_f32_to_bf16(b->alibi[h]) : tl_f32_to_f16(b->alibi[h]);
    b->sinks16[h] = b->vec16 == ANYATTN_DTYPE_BF16 ? tl_f32_to_bf16(b->sinks[h]) : tl_f32_to_f16(b->sinks[h]);
  }
  /* Poison: NaN where run must write, a fixed pattern in the guard row. */
  tl_fill_nan(c->dtype, b->out_init, b->q_elems);
  memset((char *)b->out_init + b->q_elems * b->es, 0x5A, (b->out_elems - b->q_elems) * b->es);
  for (size_t i = 0; i < b->lse_elems; i++) b->lse_init[i] = i < rows ? NAN : 12345.0f;
  return 0;
}

static void fill_structs(const tl_case *c, const tl_bufs *b, int on_device, anyattn_problem *pr,
                         anyattn_batch *bt, anyattn_tensors *t) {
  anyattn_problem_init(pr);
  pr->num_q_heads = b->hq, pr->num_kv_heads = c->num_kv_heads, pr->head_dim = c->head_dim;
  pr->dtype = c->dtype, pr->block_size = c->block_size, pr->causal = c->causal;
  pr->window_left = c->window_left, pr->window_right = c->window_right;
  pr->scale = c->scale, pr->softcap = c->softcap;
  pr->kv_dtype = c->kv;
  anyattn_batch_init(bt);
  bt->num_seqs = b->num_seqs, bt->num_tokens = b->num_tokens, bt->block_table_stride = b->table_stride;
  bt->cu_seqlens_q = on_device ? (const int32_t *)b->d_cu : b->cu;
  bt->seq_lens_k = on_device ? (const int32_t *)b->d_kl : b->kl;
  bt->block_table = on_device ? (const int32_t *)b->d_table : b->table;
  if (c->qpos) bt->q_pos = on_device ? (const int32_t *)b->d_qp : b->qp;
  anyattn_tensors_init(t);
  t->q = on_device ? b->d_q : b->q;
  t->k_cache = on_device ? b->d_k : b->k;
  t->v_cache = on_device ? b->d_v : b->v;
  t->num_blocks = b->num_blocks;
  t->k_stride_block = b->ks[0], t->k_stride_token = b->ks[1], t->k_stride_head = b->ks[2];
  t->v_stride_block = b->vs[0], t->v_stride_token = b->vs[1], t->v_stride_head = b->vs[2];
  if (c->alibi) t->alibi_slopes = on_device ? (const float *)b->d_alibi : b->alibi;
  if (c->sinks) t->sinks = on_device ? (const float *)b->d_sinks : b->sinks;
  t->out = on_device ? b->d_out : NULL;
  t->lse = (on_device && c->lse) ? (float *)b->d_lse : NULL;
  if (c->descale) {
    t->descale_layout = c->descale == 2 ? ANYATTN_DESCALE_PER_SEQ_HEAD : ANYATTN_DESCALE_PER_TENSOR;
    t->k_descale = on_device ? (const float *)b->d_kds : b->kds;
    t->v_descale = on_device ? (const float *)b->d_vds : b->vds;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { R_PASS, R_FAIL, R_SKIP, R_INTERNAL, R_DEVICE_LOST };

typedef struct {
  double max_abs, rel_l2, max_lse, worst_ratio;
  long bad_out, nan_out, bad_lse, nan_lse, bad_empty;
} tl_stats;

/* Compares one copied-back run with the reference. why gets the first reason. */
static int compare(const tl_case *c, const tl_bufs *b, const tl_check_options *opt, FILE *out,
                   tl_stats *st, char *why, size_t why_size) {
  const tl_tol tol = tol_for(c->dtype);
  const int d = c->head_dim;
  const size_t rows = (size_t)b->cu[b->num_seqs] * b->hq; /* padding rows are checked by run_case */
  double num = 0, den = 0, xmag_max = 0;
  int shown = 0;
  memset(st, 0, sizeof *st);
  why[0] = '\0';
  for (size_t row = 0; row < rows; row++) {
    const double xe = 8.0 * FP32_EPS * b->ref_xmag[row]; /* fp32 rounding of the logits */
    if (b->ref_xmag[row] > xmag_max) xmag_max = b->ref_xmag[row];
    const int empty = isinf(b->ref_lse[row]);
    for (int e = 0; e < d; e++) {
      const size_t i = row * d + e;
      const double got = tl_load(c->dtype, b->out_back, i), ref = b->ref_out[i];
      if (isnan(got)) {
        if (st->nan_out++ == 0)
          snprintf(why, why_size, "out[token %zu, head %zu, %d] is NaN (unwritten or NaN result)",
                   row / b->hq, row % b->hq, e);
        continue;
      }
      if (empty && got != 0.0) {
        if (st->bad_empty++ == 0 && !why[0])
          snprintf(why, why_size, "row token %zu head %zu has no visible key but out is %g, not 0",
                   row / b->hq, row % b->hq, got);
      }
      const double err = fabs(got - ref);
      const double bound = tol.atol + (tol.rtol + 2.0 * xe) * b->ref_abs[i];
      num += err * err, den += ref * ref;
      if (err > st->max_abs) st->max_abs = err;
      if (err / bound > st->worst_ratio) st->worst_ratio = err / bound;
      if (err > bound) {
        if (st->bad_out++ == 0 && !why[0])
          snprintf(why, why_size, "out[token %zu, head %zu, %d] = %.7g, reference %.7g, |err| %.3g > bound %.3g",
                   row / b->hq, row % b->hq, e, got, ref, err, bound);
        if (opt->verbose && shown < 8) {
          fprintf(out, "    out[token %zu, head %zu, %d] got %.9g ref %.9g err %.3g bound %.3g\n", row / b->hq,
                  row % b->hq, e, got, ref, err, bound);
          shown++;
        }
      }
    }
    if (!c->lse) continue;
    const double got = b->lse_back[row], ref = b->ref_lse[row];
    if (isnan(got)) {
      if (st->nan_lse++ == 0 && !why[0])
        snprintf(why, why_size, "lse[token %zu, head %zu] is NaN (unwritten?)", row / b->hq, row % b->hq);
      continue;
    }
    if (empty || isinf(got)) {
      if (!(empty && isinf(got) && got < 0)) {
        if (st->bad_lse++ == 0 && !why[0])
          snprintf(why, why_size, "lse[token %zu, head %zu] = %g, reference %g", row / b->hq, row % b->hq, got,
                   ref);
      }
      continue;
    }
    const double err = fabs(got - ref);
    const double bound = tol.lse_atol + xe + 4.0 * FP32_EPS * fabs(ref);
    if (err > st->max_lse) st->max_lse = err;
    if (err > bound) {
      if (st->bad_lse++ == 0 && !why[0])
        snprintf(why, why_size, "lse[token %zu, head %zu] = %.9g, reference %.9g, |err| %.3g > %.3g",
                 row / b->hq, row % b->hq, got, ref, err, bound);
    }
  }
  st->rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
  const double rel_bound = tol.rel_l2 + 4.0 * FP32_EPS * xmag_max;
  if (st->rel_l2 > rel_bound && !why[0])
    snprintf(why, why_size, "relative L2 error %.3g > %.3g", st->rel_l2, rel_bound);
  if (st->nan_out || st->bad_empty || st->bad_out || st->nan_lse || st->bad_lse) {
    size_t n = strlen(why);
    snprintf(why + n, why_size - n, "; %ld bad / %ld NaN out elements, %ld bad / %ld NaN lse", st->bad_out,
             st->nan_out, st->bad_lse, st->nan_lse);
  }
  return why[0] ? 1 : 0;
}

#define TL_DEV(ptr, bytes)                     \
  do {                                         \
    (ptr) = dm_alloc(backend, (bytes));        \
    if (!(ptr)) {                              \
      snprintf(why, sizeof why, "dm_alloc(%zu) failed", (size_t)(bytes)); \
      goto internal;                           \
    }                                          \
  } while (0)

static int run_case(anyattn_context *ctx, anyattn_backend backend, const tl_case *c, uint64_t seed,
                    const tl_check_options *opt, FILE *out) {
  const double t_start = now_s();
  uint64_t sub = seed ^ tl_hash_name(c->name);
  const uint64_t case_seed = tl_rng_next(&sub);
  uint64_t r = case_seed;
  tl_bufs b;
  memset(&b, 0, sizeof b);
  anyattn_plan *plan = NULL;
  char why[512] = "";
  int result = R_FAIL;
  const int gpu = backend != ANYATTN_BACKEND_CPU;

  if (build_data(c, &r, &b) != 0) {
    snprintf(why, sizeof why, "host allocation failed");
    goto internal;
  }
  anyattn_problem pr;
  anyattn_batch hb, db;
  anyattn_tensors ht, dt;
  fill_structs(c, &b, 0, &pr, &hb, &ht);
  /* A staged case on CUDA forces the 128-row tile, which the stage needs (the tree may pick the 64-row
   * one for short prompts); the HIP tables have no such tile, so there it checks the unstaged run. */
  const int must_stage = c->stage && backend == ANYATTN_BACKEND_CUDA;
  if (must_stage) pr.config = "m128n128w8s2";

  anyattn_limits lim;
  anyattn_limits_init(&lim);
  int max_kv = 1;
  for (int s = 0; s < b.num_seqs; s++)
    if (b.kl[s] > max_kv) max_kv = b.kl[s];
  /* Plans are sized from the limits alone: exact, a little slack, or far
   * more than this batch uses (most of a static grid then idles). */
  switch (tl_rng_int(&r, 0, c->stage ? 1 : 2)) { /* a stage of far larger limits would take much memory */
    case 0: lim.max_seqs = b.num_seqs, lim.max_tokens = b.num_tokens, lim.max_context = max_kv; break;
    case 1:
      lim.max_seqs = b.num_seqs + tl_rng_int(&r, 0, 3);
      lim.max_tokens = b.num_tokens + tl_rng_int(&r, 0, 64);
      lim.max_context = max_kv + tl_rng_int(&r, 0, 100);
      break;
    default: lim.max_seqs = b.num_seqs + 61, lim.max_tokens = 4 * b.num_tokens + 500, lim.max_context = 8192; break;
  }
  /* A stage that holds max_seqs sequences of max_context keys: the host's bound for a batch without
   * length hints (include/anyattn.h). */
  if (c->stage) lim.stage_kv_tokens = lim.max_seqs * lim.max_context;

  anyattn_status s = anyattn_plan_create(ctx, &pr, &lim, &plan);
  if (s != ANYATTN_STATUS_OK) {
    /* fp8 caches: a GPU build whose kernels do not read them refuses the plan */
    const int unsupported = s == ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM || s == ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE ||
                            s == ANYATTN_STATUS_UNSUPPORTED_DTYPE ||
                            (s == ANYATTN_STATUS_UNSUPPORTED_OPTION && c->kv != ANYATTN_KV_AS_Q);
    if (unsupported && gpu) {
      fprintf(out, "SKIP %s (unsupported by backend: %s)\n", c->name, anyattn_last_error());
      bufs_free(backend, &b);
      return R_SKIP;
    }
    snprintf(why, sizeof why, "plan_create: %s", anyattn_last_error());
    goto fail;
  }
  if (plan == NULL) {
    snprintf(why, sizeof why, "plan_create returned OK and a NULL plan");
    goto fail;
  }
  s = anyattn_validate(plan, &hb, b.num_blocks);
  if (s != ANYATTN_STATUS_OK) {
    snprintf(why, sizeof why, "validate on valid metadata: %s", anyattn_last_error());
    goto fail;
  }

  /* Backend memory: everything run reads or writes. */
  const size_t rows = (size_t)b.num_tokens * b.hq;
  const size_t ws_size = anyattn_plan_workspace_size(plan);
  TL_DEV(b.d_q, b.q_elems * b.es);
  TL_DEV(b.d_k, (size_t)b.k_elems * b.kes);
  TL_DEV(b.d_v, (size_t)b.v_elems * b.kes);
  TL_DEV(b.d_kds, sizeof b.kds);
  TL_DEV(b.d_vds, sizeof b.vds);
  TL_DEV(b.d_out, b.out_elems * b.es);
  TL_DEV(b.d_lse, b.lse_elems * sizeof(float));
  TL_DEV(b.d_ws, ws_size);
  TL_DEV(b.d_cu, sizeof(int32_t) * (size_t)(b.num_seqs + 1));
  TL_DEV(b.d_kl, sizeof(int32_t) * (size_t)(b.num_seqs + 1));
  TL_DEV(b.d_table, sizeof(int32_t) * (size_t)b.num_seqs * b.table_stride);
  TL_DEV(b.d_alibi, sizeof(float) * (size_t)b.hq);
  TL_DEV(b.d_sinks, sizeof(float) * (size_t)b.hq);
  TL_DEV(b.d_alibi16, sizeof(uint16_t) * (size_t)b.hq);
  TL_DEV(b.d_sinks16, sizeof(uint16_t) * (size_t)b.hq);
  TL_DEV(b.d_qp, sizeof(int32_t) * (size_t)(b.num_seqs + 1));
  if (dm_to_device(backend, b.d_q, b.q, b.q_elems * b.es) || dm_to_device(backend, b.d_k, b.k, (size_t)b.k_elems * b.kes) ||
      dm_to_device(backend, b.d_v, b.v, (size_t)b.v_elems * b.kes) ||
      dm_to_device(backend, b.d_kds, b.kds, sizeof b.kds) || dm_to_device(backend, b.d_vds, b.vds, sizeof b.vds) ||
      dm_to_device(backend, b.d_cu, b.cu, sizeof(int32_t) * (size_t)(b.num_seqs + 1)) ||
      dm_to_device(backend, b.d_kl, b.kl, sizeof(int32_t) * (size_t)b.num_seqs) ||
      dm_to_device(backend, b.d_table, b.table, sizeof(int32_t) * (size_t)b.num_seqs * b.table_stride) ||
      dm_to_device(backend, b.d_alibi, b.alibi, sizeof(float) * (size_t)b.hq) ||
      dm_to_device(backend, b.d_sinks, b.sinks, sizeof(float) * (size_t)b.hq) ||
      dm_to_device(backend, b.d_alibi16, b.alibi16, sizeof(uint16_t) * (size_t)b.hq) ||
      dm_to_device(backend, b.d_sinks16, b.sinks16, sizeof(uint16_t) * (size_t)b.hq) ||
      dm_to_device(backend, b.d_qp, b.qp, sizeof(int32_t) * (size_t)b.num_seqs)) {
    snprintf(why, sizeof why, "copy to device failed");
    goto internal;
  }
  fill_structs(c, &b, 1, &pr, &db, &dt);
  if (must_stage) {
    char how[256] = "";
    if (anyattn_run_describe(plan, &db, how, sizeof how) != ANYATTN_STATUS_OK || !strstr(how, "staged")) {
      snprintf(why, sizeof why, "the run does not stage: %s", how[0] ? how : anyattn_last_error());
      goto fail;
    }
  }

  if (tl_reference(&pr, &hb, &ht, b.ref_out, b.ref_lse, b.ref_abs, b.ref_xmag) != 0) {
    snprintf(why, sizeof why, "reference rejected the case");
    goto internal;
  }

  /* A workspace full of stale bytes, then prepared as the API asks: the
   * split-KV partials must not depend on what was there before. */
  if (ws_size && dm_fill_bytes(backend, b.d_ws, 0xff, ws_size)) {
    snprintf(why, sizeof why, "workspace fill failed");
    goto internal;
  }
  s = anyattn_workspace_prepare(plan, b.d_ws, ws_size, NULL);
  if (s != ANYATTN_STATUS_OK) {
    snprintf(why, sizeof why, "workspace_prepare: %s", anyattn_last_error());
    goto fail;
  }
  /* Two runs on the same workspace: the second must not depend on what the
   * first left there (split-KV counters come back to zero), and reads the
   * slopes and sinks as 16-bit values (tensors' alibi_slopes_dtype and
   * sinks_dtype), which must give the same bits. */
  tl_stats st[2];
  int bitwise_same = 1;
  void *first_out = NULL;
  for (int pass = 0; pass < 2; pass++) {
    if (dm_to_device(backend, b.d_out, b.out_init, b.out_elems * b.es) ||
        dm_to_device(backend, b.d_lse, b.lse_init, b.lse_elems * sizeof(float))) {
      snprintf(why, sizeof why, "copy to device failed");
      free(first_out);
  if (!bitwise_same) { /* every backend's merges run in a fixed order (docs/semantics.md, determinism) */
    snprintf(why, sizeof why, "two runs of the same inputs differ bitwise%s",
             c->alibi || c->sinks ? (b.vec16 == ANYATTN_DTYPE_BF16 ? " (the second read alibi_slopes and sinks as bf16)"
                                                                  : " (the second read alibi_slopes and sinks as f16)")
                                  : "");
    goto fail;
  }
      goto internal;
    }
    if (pass == 1) { /* the same slopes and sinks, as 16-bit values */
      if (c->alibi) dt.alibi_slopes = b.d_alibi16, dt.alibi_slopes_dtype = b.vec16;
      if (c->sinks) dt.sinks = b.d_sinks16, dt.sinks_dtype = b.vec16;
    }
    s = anyattn_run(plan, &db, &dt, b.d_ws, ws_size, NULL);
    if (s != ANYATTN_STATUS_OK) {
      snprintf(why, sizeof why, "run %d: %s", pass + 1, anyattn_last_error());
      free(first_out);
      goto fail;
    }
    if (dm_sync(backend) != 0) {
      fprintf(out, "FAIL %s [%d seqs, %d tokens, case seed 0x%llx] (run %d: device error after run, see stderr)\n",
              c->name, b.num_seqs, b.num_tokens, (unsigned long long)case_seed, pass + 1);
      free(first_out);
      anyattn_plan_free(plan);
      bufs_free(backend, &b);
      return R_DEVICE_LOST;
    }
    if (dm_to_host(backend, b.out_back, b.d_out, b.out_elems * b.es) ||
        dm_to_host(backend, b.lse_back, b.d_lse, b.lse_elems * sizeof(float))) {
      snprintf(why, sizeof why, "copy to host failed");
      free(first_out);
      goto internal;
    }
    if (compare(c, &b, opt, out, &st[pass], why, sizeof why)) {
      if (pass == 1) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, " (second run on a used workspace%s)",
                 c->alibi || c->sinks ? ", alibi_slopes and sinks as 16-bit values" : "");
      }
      free(first_out);
      goto fail;
    }
    /* Padding rows (past cu[num_seqs]) and the guard row must keep their poison. */
    const size_t real_rows = (size_t)b.cu[b.num_seqs] * b.hq;
    if (memcmp((char *)b.out_back + real_rows * c->head_dim * b.es, (char *)b.out_init + real_rows * c->head_dim * b.es,
               (b.out_elems - real_rows * c->head_dim) * b.es) != 0 ||
        memcmp(b.lse_back + real_rows, b.lse_init + real_rows, sizeof(float) * (rows + b.hq - real_rows)) != 0) {
      snprintf(why, sizeof why, "run wrote a padding row (past cu_seqlens_q[num_seqs]) or past the last row of out or lse");
      free(first_out);
      goto fail;
    }
    if (!c->lse && memcmp(b.lse_back, b.lse_init, b.lse_elems * sizeof(float)) != 0) {
      snprintf(why, sizeof why, "lse was NULL but the buffer changed (impossible unless run wrote elsewhere)");
      free(first_out);
      goto fail;
    }
    if (pass == 0) {
      first_out = malloc(b.q_elems * b.es + 1);
      if (!first_out) {
        snprintf(why, sizeof why, "host allocation failed");
        goto internal;
      }
      memcpy(first_out, b.out_back, b.q_elems * b.es);
    } else {
      bitwise_same = memcmp(first_out, b.out_back, b.q_elems * b.es) == 0;
    }
  }
  free(first_out);

  /* Inputs must come back untouched. */
  if (dm_to_host(backend, b.q_back, b.d_q, b.q_elems * b.es) || dm_to_host(backend, b.k_back, b.d_k, (size_t)b.k_elems * b.kes) ||
      dm_to_host(backend, b.v_back, b.d_v, (size_t)b.v_elems * b.kes)) {
    snprintf(why, sizeof why, "copy to host failed");
    goto internal;
  }
  if (memcmp(b.q_back, b.q, b.q_elems * b.es) != 0) {
    snprintf(why, sizeof why, "run modified q");
    goto fail;
  }
  if (memcmp(b.k_back, b.k, (size_t)b.k_elems * b.kes) != 0 || memcmp(b.v_back, b.v, (size_t)b.v_elems * b.kes) != 0) {
    snprintf(why, sizeof why, "run modified k_cache or v_cache");
    goto fail;
  }
  {
    int32_t meta[TL_MAX_SEQS + 1];
    float fl[64];
    int bad = 0;
    bad |= dm_to_host(backend, meta, b.d_cu, sizeof(int32_t) * (size_t)(b.num_seqs + 1)) ||
           memcmp(meta, b.cu, sizeof(int32_t) * (size_t)(b.num_seqs + 1));
    bad |= dm_to_host(backend, meta, b.d_kl, sizeof(int32_t) * (size_t)b.num_seqs) ||
           memcmp(meta, b.kl, sizeof(int32_t) * (size_t)b.num_seqs);
    bad |= dm_to_host(backend, meta, b.d_qp, sizeof(int32_t) * (size_t)b.num_seqs) ||
           memcmp(meta, b.qp, sizeof(int32_t) * (size_t)b.num_seqs);
    if (b.hq <= 64) {
      bad |= dm_to_host(backend, fl, b.d_alibi, sizeof(float) * (size_t)b.hq) ||
             memcmp(fl, b.alibi, sizeof(float) * (size_t)b.hq);
      bad |= dm_to_host(backend, fl, b.d_sinks, sizeof(float) * (size_t)b.hq) ||
             memcmp(fl, b.sinks, sizeof(float) * (size_t)b.hq);
    }
    if (bad) {
      snprintf(why, sizeof why, "run modified the metadata, alibi_slopes or sinks");
      goto fail;
    }
  }
  result = R_PASS;
  fprintf(out, "PASS %s  maxabs=%.2e rel=%.2e lse=%.2e worst=%.2f%s [%d seqs, %d tokens, kv<=%d, %.0f ms]\n",
          c->name, st[1].max_abs, st[1].rel_l2, st[1].max_lse, st[1].worst_ratio,
          bitwise_same ? "" : " (runs differ bitwise)", b.num_seqs, b.num_tokens, max_kv,
          1e3 * (now_s() - t_start));
  anyattn_plan_free(plan);
  bufs_free(backend, &b);
  return result;

fail:
  fprintf(out, "FAIL %s [%d seqs, %d tokens, case seed 0x%llx] (%s)\n", c->name, b.num_seqs, b.num_tokens,
          (unsigned long long)case_seed, why);
  anyattn_plan_free(plan);
  bufs_free(backend, &b);
  return R_FAIL;

internal:
  fprintf(out, "FAIL %s (internal error: %s)\n", c->name, why);
  anyattn_plan_free(plan);
  bufs_free(backend, &b);
  return R_INTERNAL;
}

/* ---- entry point ------------------------------------------------------------- */
int tl_check_run(anyattn_backend backend, int device, const tl_check_options *opt, FILE *out,
                 int *num_pass, int *num_fail, int *num_skip) {
  tl_check_options o = {0, NULL, 0, 0};
  if (opt) o = *opt;
  int np = 0, nf = 0, ns = 0;
  if (num_pass) *num_pass = 0;
  if (num_fail) *num_fail = 0;
  if (num_skip) *num_skip = 0;
  if (!out) return -1;

  const uint64_t seed = o.seed ? o.seed : tl_seed_from_env_or_time();
  fprintf(out, "seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed,
          (unsigned long long)seed);

  anyattn_context *ctx = NULL;
  if (!anyattn_backend_compiled(backend)) {
    fprintf(out, "SKIP all (backend '%s' is not compiled into this library)\n", anyattn_backend_name(backend));
    if (num_skip) *num_skip = 1;
    return 77;
  }
  anyattn_status s = anyattn_context_create(backend, device, &ctx);
  if (s == ANYATTN_STATUS_NO_DEVICE || s == ANYATTN_STATUS_BACKEND_UNAVAILABLE) {
    fprintf(out, "SKIP all (backend '%s' device %d: %s)\n", anyattn_backend_name(backend), device,
            anyattn_last_error());
    if (num_skip) *num_skip = 1;
    return 77;
  }
  if (s != ANYATTN_STATUS_OK) {
    fprintf(out, "FAIL context (%s)\n", anyattn_last_error());
    if (num_fail) *num_fail = 1;
    return 1;
  }
  backend = anyattn_context_backend(ctx); /* AUTO resolved */
  if (dm_set_device(backend, device) != 0) {
    anyattn_context_free(ctx);
    return -1;
  }
  char devname[160] = "";
  anyattn_device_name(backend, device, devname, sizeof devname);
  tl_case *cases = (tl_case *)calloc(TL_MAX_CASES, sizeof *cases);
  if (!cases) {
    anyattn_context_free(ctx);
    return -1;
  }
  const int n = o.quick ? build_quick(cases) : build_full(cases);
  fprintf(out, "backend %s, device %d (%s), %s suite, %d cases\n", anyattn_backend_name(backend), device, devname,
          o.quick ? "quick" : "full", n);
  fflush(out);

  const double t0 = now_s();
  int internal = 0;
  for (int i = 0; i < n; i++) {
    if (o.filter && o.filter[0] && !strstr(cases[i].name, o.filter)) continue;
    const int r = run_case(ctx, backend, &cases[i], seed, &o, out);
    if (r == R_PASS) np++;
    else if (r == R_SKIP) ns++;
    else nf++;
    if (r == R_INTERNAL) internal = 1;
    fflush(out);
    if (r == R_DEVICE_LOST) { /* a GPU fault is sticky: every later case would fail for it */
      fprintf(out, "FAIL remaining cases not run: the device is in an error state after %s\n", cases[i].name);
      break;
    }
  }
  fprintf(out, "%d passed, %d failed, %d skipped in %.1f s (seed 0x%llx)\n", np, nf, ns, now_s() - t0,
          (unsigned long long)seed);
  free(cases);
  anyattn_context_free(ctx);
  if (num_pass) *num_pass = np;
  if (num_fail) *num_fail = nf;
  if (num_skip) *num_skip = ns;
  if (internal) return -1;
  return nf ? 1 : 0;
}
