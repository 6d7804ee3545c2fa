/* layout.c: the zigzag layout in numbers. A shard's chunks and where they sit
 * (the caller's rows, pages of a K/V buffer), the pieces a transfer cuts a
 * shard into, and the sub-plan calls of one attention step. Host-only, the
 * same on every backend; both ends of a transfer derive its pieces here. */
#include "cp.h"

void cp_shard_make(cp_shard *sh, int32_t *mem, int world, int src, int n, const int32_t *lens) {
  sh->n = n;
  sh->front = mem;
  sh->back = mem + n;
  sh->urow_f = mem + 2 * n;
  sh->urow_b = mem + 3 * n;
  sh->page0 = mem + 4 * n;
  sh->pages = mem + 5 * n;
  int fronts = 0, start;
  for (int t = 0; t < n; t++) {
    cp_chunk_of(lens[t], world, src, &start, &sh->front[t]);
    cp_chunk_of(lens[t], world, 2 * world - 1 - src, &start, &sh->back[t]);
    fronts += sh->front[t];
  }
  int rf = 0, rb = fronts, page = 0;
  for (int t = 0; t < n; t++) {
    sh->urow_f[t] = rf;
    sh->urow_b[t] = rb;
    rf += sh->front[t];
    rb += sh->back[t];
    sh->page0[t] = page;
    sh->pages[t] = cp_front_pages(sh->front[t]) + (sh->back[t] + CP_PAGE - 1) / CP_PAGE;
    page += sh->pages[t];
  }
  sh->total_pages = page;
  sh->rows = rb;
}

int cp_shard_pages(int world, int src, int n, const int32_t *lens) {
  int pages = 0, start, f, b;
  for (int t = 0; t < n; t++) {
    cp_chunk_of(lens[t], world, src, &start, &f);
    cp_chunk_of(lens[t], world, 2 * world - 1 - src, &start, &b);
    pages += cp_front_pages(f) + (b + CP_PAGE - 1) / CP_PAGE;
  }
  return pages;
}

typedef struct {
  cp_piece *out;
  int n, max;
  int64_t cut[2]; /* token positions no piece crosses (-1: none) */
} cp_piece_sink;

static int cp_is_cut(const cp_piece_sink *s, int64_t lt) { return lt == s->cut[0] || lt == s->cut[1]; }

/* Appends [lt, lt + rows) (caller's row urow, or -1), split at the cuts and
 * joined to the previous piece when contiguous on both sides. */
static void cp_emit(cp_piece_sink *s, int64_t lt, int64_t urow, int64_t rows) {
  while (rows > 0) {
    int64_t take = rows;
    for (int c = 0; c < 2; c++)
      if (s->cut[c] > lt && s->cut[c] < lt + take) take = s->cut[c] - lt;
    cp_piece *prev = s->n > 0 ? &s->out[s->n - 1] : NULL;
    if (prev && prev->lt + prev->rows == lt && !cp_is_cut(s, lt) &&
        (urow < 0 ? prev->urow < 0 : prev->urow >= 0 && prev->urow + prev->rows == urow)) {
      prev->rows += take;
    } else if (s->n < s->max) {
      s->out[s->n].lt = lt;
      s->out[s->n].urow = urow;
      s->out[s->n].rows = take;
      s->n++;
    } else {
      s->n = s->max + 1; /* overflow: reported by the caller */
      return;
    }
    lt += take;
    if (urow >= 0) urow += take;
    rows -= take;
  }
}

/* [a, a + len) clipped to [lo, hi), emitted with its caller's rows from urow. */
static void cp_emit_clipped(cp_piece_sink *s, int64_t a, int64_t len, int64_t urow, int64_t lo, int64_t hi) {
  int64_t b = a + len;
  if (a < lo) {
    if (urow >= 0) urow += lo - a;
    a = lo;
  }
  if (b > hi) b = hi;
  if (b > a) cp_emit(s, a, urow, b - a);
}

int cp_pieces(const cp_shard *sh, const cp_route *rt, cp_piece *out, int max) {
  cp_piece_sink s = {out, 0, max, {-1, -1}};
  const int64_t lo = (int64_t)rt->p0 * CP_PAGE, hi = (int64_t)rt->p1 * CP_PAGE;
  if (!rt->src_user && rt->src_c0 != CP_NO_CUT) s.cut[0] = (int64_t)rt->src_c0 * CP_PAGE;
  if (rt->dst_c0 != CP_NO_CUT) s.cut[1] = (int64_t)rt->dst_c0 * CP_PAGE;
  if (!rt->src_user) {
    /* a buffer holds whole pages: move them, padding rows included */
    cp_emit_clipped(&s, lo, hi - lo, -1, lo, hi);
  } else {
    /* the caller's rows hold real tokens only, front and back chunks apart */
    for (int t = 0; t < sh->n; t++) {
      const int64_t a = (int64_t)sh->page0[t] * CP_PAGE;
      cp_emit_clipped(&s, a, sh->front[t], sh->urow_f[t], lo, hi);
      cp_emit_clipped(&s, a + (int64_t)cp_front_pages(sh->front[t]) * CP_PAGE, sh->back[t], sh->urow_b[t], lo, hi);
    }
  }
  return s.n;
}

/* Whether some query of positions [qs, qs + q) sees some key of [ks, ks + k)
 * under the mask: the distances key - query of the block, [ks - (qs + q - 1),
 * ks + k - 1 - qs], meet the mask's [-window_left, 0 (causal) or window_right]. */
static int cp_block_visible(int64_t qs, int64_t q, int64_t ks, int64_t k, cp_mask m) {
  const int64_t dlo = ks - (qs + q - 1), dhi = ks + k - 1 - qs;
  const int64_t lo = m.wl >= 0 ? -(int64_t)m.wl : INT64_MIN;
  const int64_t hi = m.causal ? 0 : m.wr >= 0 ? (int64_t)m.wr : INT64_MAX;
  return q > 0 && k > 0 && dlo <= hi && dhi >= lo;
}

int cp_step_calls(const cp_shard *mine, const cp_shard *theirs, int rank, int src, int world, const int32_t *lens,
                  cp_mask mask, cp_entry *ent, cp_call *calls) {
  const int n = mine->n;
  int ne = 0, nc = 0;
  for (int pass = 0; pass < 2; pass++) {
    const int kc = pass ? 2 * world - 1 - src : src, first = src == rank && pass == 0;
    int open = 0;
    for (int i = 0; i < 2 * n; i++) {
      const int t = i < n ? i : i - n, back = i >= n;
      const int q = back ? mine->back[t] : mine->front[t];
      const int row = back ? mine->urow_b[t] : mine->urow_f[t];
      if (q == 0) continue; /* no rows: neither work nor a gap */
      int qs, ks, kv, tmp;
      cp_chunk_of(lens[t], world, back ? 2 * world - 1 - rank : rank, &qs, &tmp);
      cp_chunk_of(lens[t], world, kc, &ks, &kv);
      /* the own front pass keeps rows without work: its call starts every row's merge */
      if (!first && !cp_block_visible(qs, q, ks, kv, mask)) {
        open = 0; /* rows without work end a call */
        continue;
      }
      if (!open || calls[nc - 1].row0 + calls[nc - 1].rows != row) {
        calls[nc].init = first;
        calls[nc].row0 = row;
        calls[nc].rows = 0;
        calls[nc].e0 = ne;
        calls[nc].ne = 0;
        nc++;
        open = 1;
      }
      calls[nc - 1].rows += q;
      calls[nc - 1].ne++;
      cp_entry *e = &ent[ne++];
      e->q_len = q;
      e->kv_len = kv;
      e->q_pos = qs - ks;
      e->page0 = theirs->page0[t] + (pass ? cp_front_pages(theirs->front[t]) : 0);
      e->seq = t;
      e->qstart = qs;
      e->kstart = ks;
    }
  }
  return nc;
}
