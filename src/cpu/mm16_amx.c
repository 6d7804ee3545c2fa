/* mm16_amx.c: the 16-bit products of the tiled path on AMX-BF16 tiles
 * (docs/design/cpu.md, "16-bit products"; layouts in isa.h). Compiled with
 * -mamx-tile -mamx-bf16 and run only where isa.c found AMX and the kernel's
 * permission to use it. */
#include <immintrin.h>

#include "isa.h"

/* Palette 1 with all eight tiles at 16 rows x 64 bytes: the C tiles are 16x16
 * fp32, the A tiles 16 rows x 32 bf16, the B tiles 16 rows of 16 pairs. One
 * shape for every product, so a thread loads the config once per item. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((aligned(64))) aa_amx_cfg;

/* A constant: built on the stack, GCC 12 drops the stores to the config as
 * dead (it does not see that ldtilecfg reads them) and the first tile
 * instruction faults. */
static const aa_amx_cfg aa_amx_config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static void aa_amx_begin(void) { _tile_loadconfig(&aa_amx_config); }

static void aa_amx_end(void) { _tile_release(); }

/* Tiles 0-3 hold a 32x32 block of C (rows r, r+16 x columns n, n+16), 4-5
 * the two A row blocks, 6-7 the two B column blocks: 4 loads per 4 products. */
static void aa_amx_qk(const uint16_t *Q, int kd, const uint32_t *Kt, int ldk, float *S, int lds, int R32, int nkp) {
  for (int r = 0; r < R32; r += 32) {
    const uint16_t *q0 = Q + (size_t)r * kd, *q1 = q0 + (size_t)16 * kd;
    for (int n = 0; n < nkp; n += 32) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int c = 0; c < kd; c += 32) {
        const uint32_t *kt = Kt + (size_t)(c / 2) * ldk + n;
        _tile_loadd(4, q0 + c, kd * 2);
        _tile_loadd(5, q1 + c, kd * 2);
        _tile_loadd(6, kt, ldk * 4);
        _tile_loadd(7, kt + 16, ldk * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      float *s0 = S + (size_t)r * lds + n, *s1 = s0 + (size_t)16 * lds;
      _tile_stored(0, s0, lds * 4);
      _tile_stored(1, s0 + 16, lds * 4);
      _tile_stored(2, s1, lds * 4);
      _tile_stored(3, s1 + 16, lds * 4);
    }
  }
}

/* The same 2x2 blocking over (rows, dims), the accumulators loaded from O and
 * stored back once per tile of keys. */
static void aa_amx_pv(const uint16_t *P, int ldp, const uint32_t *Vp, int d, float *O, int R32, int terms, int bn,
                      int nkp) {
  for (int r = 0; r < R32; r += 32) {
    const uint16_t *p0 = P + (size_t)r * ldp, *p1 = p0 + (size_t)16 * ldp;
    for (int c = 0; c < d; c += 32) {
      float *o0 = O + (size_t)r * d + c, *o1 = o0 + (size_t)16 * d;
      _tile_loadd(0, o0, d * 4);
      _tile_loadd(1, o0 + 16, d * 4);
      _tile_loadd(2, o1, d * 4);
      _tile_loadd(3, o1 + 16, d * 4);
      for (int t = 0; t < terms; t++) {
        for (int k = t * bn; k < t * bn + nkp; k += 32) {
          const uint32_t *vp = Vp + (size_t)(k / 2) * d + c;
          _tile_loadd(4, p0 + k, ldp * 2);
          _tile_loadd(5, p1 + k, ldp * 2);
          _tile_loadd(6, vp, d * 4);
          _tile_loadd(7, vp + 16, d * 4);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, o0, d * 4);
      _tile_stored(1, o0 + 16, d * 4);
      _tile_stored(2, o1, d * 4);
      _tile_stored(3, o1 + 16, d * 4);
    }
  }
}

/* The decode scores' shapes: tile 0 the 16 keys x 4 rows of fp32 scores, 1
 * and 3 K (16 keys x 32 dims, straight from the cache rows), 2 and 4 Qt (16
 * dim pairs x 4 rows): one product per 32 dims instead of the 16
 * vdpbf16ps and the lane folds of decode.c's loop. */
static const aa_amx_cfg aa_amx_dec_config = {
    .palette = 1,
    .colsb = {16, 64, 16, 64, 16, 16, 64, 16},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static void aa_amx_dec_begin(void) { _tile_loadconfig(&aa_amx_dec_config); }

static void aa_amx_dec_qk(const char *k, int64_t ldk, const uint32_t *Qt, int kd, float *St) {
  _tile_zero(0);
  int c = 0;
  for (; c + 64 <= kd; c += 64) { /* two chunks, the second pair of tiles loading while the first multiplies */
    _tile_loadd(1, k + 2 * c, ldk);
    _tile_loadd(2, Qt + c / 2 * 4, 16);
    _tile_loadd(3, k + 2 * c + 64, ldk);
    _tile_loadd(4, Qt + c / 2 * 4 + 64, 16);
    _tile_dpbf16ps(0, 1, 2);
    _tile_dpbf16ps(0, 3, 4);
  }
  if (c < kd) {
    _tile_loadd(1, k + 2 * c, ldk);
    _tile_loadd(2, Qt + c / 2 * 4, 16);
    _tile_dpbf16ps(0, 1, 2);
  }
  _tile_stored(0, St, 16);
}

/* Two row groups at once (K at k0 and k1, Qt at q0 and q1): tiles 0 and 5
 * accumulate, so the two chains of products overlap. */
static void aa_amx_dec_qk2(const char *k0, const char *k1, int64_t ldk, const uint32_t *q0, const uint32_t *q1, int kd,
                           float *St0, float *St1) {
  _tile_zero(0);
  _tile_zero(5);
  for (int c = 0; c < kd; c += 32) {
    _tile_loadd(1, k0 + 2 * c, ldk);
    _tile_loadd(2, q0 + c / 2 * 4, 16);
    _tile_loadd(6, k1 + 2 * c, ldk);
    _tile_loadd(7, q1 + c / 2 * 4, 16);
    _tile_dpbf16ps(0, 1, 2);
    _tile_dpbf16ps(5, 6, 7);
  }
  _tile_stored(0, St0, 16);
  _tile_stored(5, St1, 16);
}

const aa_mm16_ops *aa_mm16_amx_ops(void) {
  static const aa_mm16_ops ops = {"amx",     aa_amx_begin,     aa_amx_end,   aa_amx_qk,
                                  aa_amx_pv, aa_amx_dec_begin, aa_amx_dec_qk, aa_amx_dec_qk2};
  return &ops;
}
