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
    sh->pages[t] = (sh->front[t] + sh->back[t] + CP_PAGE - 1) / CP_PAGE;
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
    pages += (f + b + CP_PAGE - 1) / CP_PAGE;
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
      cp_emit_clipped(&s, a + sh->front[t], sh->back[t], sh->urow_b[t], lo, hi);
    }
  }
  return s.n;
}

/* Keys of shard `src` that the rows of one entry see in this step (0: none),
 * by the chunk order of docs/design/context-parallel.md#steps. */
static int cp_entry_kv(const cp_shard *theirs, int rank, int src, int causal, int t, int back) {
  const int f = theirs->front[t], b = theirs->back[t];
  if (src == rank) return causal && !back ? f : f + b; /* own shard: diagonal chunks causal */
  if (!causal) return f + b;
  if (src < rank) return f; /* their front precedes both of mine; their back follows both */
  return back ? f + b : 0;  /* both of theirs precede my back; both follow my front */
}

int cp_step_calls(const cp_shard *mine, const cp_shard *theirs, int rank, int src, int causal, int32_t *q_len,
                  int32_t *kv_len, int32_t *seq, cp_call *calls) {
  const int n = mine->n, call_causal = causal && src == rank;
  int ne = 0, nc = 0, open = 0;
  for (int i = 0; i < 2 * n; i++) {
    const int t = i < n ? i : i - n, back = i >= n;
    const int q = back ? mine->back[t] : mine->front[t];
    const int row = back ? mine->urow_b[t] : mine->urow_f[t];
    if (q == 0) continue; /* no rows: neither work nor a gap */
    const int kv = cp_entry_kv(theirs, rank, src, causal, t, back);
    if (kv == 0) { /* rows without work end a call */
      open = 0;
      continue;
    }
    if (q > kv) return -1;
    if (!open || calls[nc - 1].row0 + calls[nc - 1].rows != row) {
      calls[nc].causal = call_causal;
      calls[nc].row0 = row;
      calls[nc].rows = 0;
      calls[nc].e0 = ne;
      calls[nc].ne = 0;
      nc++;
      open = 1;
    }
    calls[nc - 1].rows += q;
    calls[nc - 1].ne++;
    q_len[ne] = q;
    kv_len[ne] = kv;
    seq[ne] = t;
    ne++;
  }
  return nc;
}
