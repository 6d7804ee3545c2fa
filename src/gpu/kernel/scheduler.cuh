/* scheduler.cuh: which tile a program computes. A program is (Q block, kv
 * head, head chunk) from blockIdx.x, and one split-KV segment from blockIdx.y;
 * it finds its sequence on the device (find_work), maps its rows to (token, q
 * head), and cuts its range of KV tiles. Everything here is read from the
 * device-side metadata, so a graph captured once stays right when lengths change. */
#ifndef ANYATTN_GPU_KERNEL_SCHEDULER_CUH
#define ANYATTN_GPU_KERNEL_SCHEDULER_CUH

#include "params.cuh"

namespace aa {

/* Where a program's work lies: sequence, its query tokens and lengths. */
struct Work {
  int seq, q_len, kv_len;
  int pos0;    /* position of the sequence's first query among its keys (batch q_pos) */
  int q_first; /* first query token of the block, within the sequence */
  int tok0;    /* its global token index */
  int n_tok;   /* valid tokens in the block (>= 1) */
};

/* Q blocks are numbered as in vLLM's unified kernel: sequence s owns blocks
 * [cu[s]/bq + s, cu[s+1]/bq + s + 1), enough for its ceil(q_len/bq) blocks;
 * the grid covers num_tokens/bq + num_seqs of them, spare ones exit.
 *
 * The searching threads work together, so the metadata costs one dependent
 * memory round trip instead of a chain: the threads probe THREADS evenly
 * spaced sequences at once (key(i) = cu[i]/bq + i is non-decreasing, and
 * key(num_seqs) closes the range, so blocks past the last sequence, e.g. a
 * graph captured at padded sizes, find s = num_seqs and exit); a barrier
 * counts the probes at or below the block, which is the index of the last
 * one. One round when num_seqs < THREADS, two up to THREADS^2. In the last
 * round each probe also loads its sequence's lengths, so they arrive with the
 * search, and its first query's position (q_pos, else kv_len - q_len).
 * `meta` is 4 ints of shared memory. Every thread must call it: the block's
 * (BAR 0), or the THREADS threads of named barrier BAR (the producer
 * warpgroup of a persistent block, mainloop_ws.cuh), tid the thread's index
 * among them. */
template <int THREADS, int BAR = 0>
__device__ __forceinline__ int search_sync_count(int pred) {
  if constexpr (BAR == 0) return block_sync_count(pred);
  else return named_sync_count(BAR, THREADS, pred);
}
template <int THREADS, int BAR = 0>
__device__ __forceinline__ void search_sync() {
  if constexpr (BAR == 0) block_sync();
  else named_sync(BAR, THREADS);
}
template <int THREADS, int BAR = 0>
__device__ __forceinline__ bool find_work(const AttnParams &p, int block, Work &w, int *meta, int tid) {
  const int32_t *cu = p.cu_seqlens_q;
  const int bq = p.bq;
  int lo = 0, n = p.num_seqs + 1; /* candidates [lo, lo + n), the answer is among them */
  for (;;) {
    const int stride = (n + THREADS - 1) / THREADS;
    const int i = lo + tid * stride;
    const bool probe = tid * stride < n;
    int c0 = 0, c1 = 0, kv = 0, qp = 0;
    if (probe) {
      c0 = cu[i];
      if (stride == 1 && i < p.num_seqs) {
        c1 = cu[i + 1];
        kv = p.seq_lens_k[i];
        if (p.q_pos) qp = p.q_pos[i];
      }
    }
    const int cnt = search_sync_count<THREADS, BAR>(probe && fast_div(c0, p.bq_magic, p.bq_shift) + i <= block); /* >= 1 */
    const int s = lo + (cnt - 1) * stride;
    if (stride == 1) {
      if (i == s) {
        meta[0] = c0;
        meta[1] = c1;
        meta[2] = kv;
        meta[3] = p.q_pos ? qp : kv - (c1 - c0);
      }
      search_sync<THREADS, BAR>();
      if (s >= p.num_seqs) return false;
      w.seq = s;
      const int local = block - (fast_div(meta[0], p.bq_magic, p.bq_shift) + s);
      w.q_len = meta[1] - meta[0];
      w.q_first = local * bq;
      w.kv_len = meta[2];
      w.pos0 = meta[3];
      w.tok0 = meta[0] + w.q_first;
      w.n_tok = min(bq, w.q_len - w.q_first);
      return local >= 0 && w.q_first < w.q_len;
    }
    lo = s;
    n = min(stride, p.num_seqs + 1 - s);
  }
}

/* Fewest KV tiles a split-KV segment takes before another segment is used. */
constexpr int kSplitMinTiles = 1;

/* One program of shape S: its place in the grid, its work, its rows and its keys. */
template <class S>
struct Program {
  const AttnParams &p;
  int qblock, hprog; /* Q block and (kv head, head chunk) index from blockIdx.x */
  Work w;
  int kvh, head0, heads_here; /* kv head, first q head, q heads of the group it holds */
  int tid, warp, wm, wn;      /* thread; warp, its row band and its key slice */
  int pos_base, pos_min, pos_max; /* positions of the block's first and last tokens */
  int lo, hi;           /* keys [lo, hi) any row of the program may see (this segment's, when split) */
  int n_begin, ntiles;  /* the BLOCK_N-key tiles covering them */
  bool split, cl;       /* split-KV segment; merged in the cluster (not by the last arrival) */
  int seg;              /* segment index (blockIdx.y; the decode role: from the program index) */
  int s_eff;            /* segments that hold tiles of this program (cut_segment); the others are empty */
  int ptok0;            /* token row of the block's first token in the partials and counters (part_row) */

  /* Program bx of a grid of Q blocks: heads fastest and Q blocks in reverse:
   * under a causal mask later blocks see more keys, so the longest programs
   * start first and the last wave holds short ones. A mixed batch (qb_order
   * 1) takes them from the upper and the lower half by turns, each half in
   * reverse: a prompt's blocks between the decodes'. Reads the parameters only. */
  __device__ __forceinline__ Program(const AttnParams &p_, int bx) : p(p_) {
    const int bxq = fast_div(bx, p.hp_magic, p.hp_shift);
    hprog = bx - bxq * p.hprogs;
    const int m = bxq >> 1;
    qblock = p.qb_order == 0 ? p.num_qblocks - 1 - bxq
             : (bxq & 1)     ? (p.num_qblocks >> 1) - 1 - m /* the lower half */
                             : p.num_qblocks - 1 - m;
    seg = (int)blockIdx.y;
  }
  __device__ __forceinline__ explicit Program(const AttnParams &p_) : Program(p_, (int)blockIdx.x) {}

  /* Program i of a role launch's decode role: (sequence, kv head / head
   * chunk, segment), segments fastest; qblock holds the sequence. */
  struct DecodeRole {};
  __device__ __forceinline__ Program(const AttnParams &p_, int i, DecodeRole) : p(p_) {
    const int j = fast_div(i, p.sp_magic, p.sp_shift);
    seg = i - j * p.num_splits;
    qblock = fast_div(j, p.hp_magic, p.hp_shift);
    hprog = j - qblock * p.hprogs;
  }

  /* The work search (every thread calls it); false: the program has none.
   * A role launch's prefill role leaves sequences shorter than min_q_len to
   * the decode role. */
  template <int THREADS = S::THREADS, int BAR = 0>
  __device__ __forceinline__ bool find(int *meta, int tid = (int)threadIdx.x) {
    if (!find_work<THREADS, BAR>(p, qblock, w, meta, tid) || w.q_len < p.min_q_len) return false;
    ptok0 = w.tok0;
    return true;
  }

  /* The decode role's work: sequence qblock, when it has 1 to bq queries
   * (longer ones are the prefill role's). No search: every thread loads the
   * sequence's few words at once. Its partials sit at token row seq * bq. */
  __device__ __forceinline__ bool find_seq() {
    const int s = qblock;
    if (s >= p.num_seqs) return false;
    const int c0 = p.cu_seqlens_q[s], c1 = p.cu_seqlens_q[s + 1], kv = p.seq_lens_k[s];
    const int qp = p.q_pos ? p.q_pos[s] : kv - (c1 - c0);
    w.seq = s;
    w.q_len = c1 - c0;
    w.kv_len = kv;
    w.pos0 = qp;
    w.q_first = 0;
    w.tok0 = c0;
    w.n_tok = w.q_len;
    ptok0 = s * p.bq;
    return w.q_len >= 1 && w.q_len <= p.bq;
  }

  /* Heads, rows and the KV tiles of this program (before any split). */
  __device__ __forceinline__ void map() {
    kvh = fast_div(hprog, p.hc_magic, p.hc_shift);
    head0 = kvh * p.group + (hprog - kvh * p.n_hchunks) * p.gh;
    heads_here = min(p.gh, p.group - (head0 - kvh * p.group));
    tid = threadIdx.x;
    warp = tid / AA_WARP_SIZE;
    wm = warp % S::WM, wn = warp / S::WM;
    pos_base = w.pos0 + w.q_first;
    pos_min = pos_base, pos_max = pos_base + w.n_tok - 1;
    kv_range(p, pos_min, pos_max, w.kv_len, lo, hi);
    n_begin = (lo / S::BN) * S::BN;
    ntiles = hi > lo ? (hi - n_begin + S::BN - 1) / S::BN : 0;
    split = p.num_splits > 1;
    cl = S::CLUSTER && split && p.cluster;
  }

  /* Split-KV: segment `seg` takes its even share of the tiles. Tile-aligned
   * cuts give every key to one segment; masks still come from each row's own
   * range. Short ranges use fewer segments, each at least kSplitMinTiles
   * tiles, so a graph captured with many segments for long contexts does not
   * pay a wide merge of near-empty partials at short ones; the idle segments
   * write empty partials (cheap: a few stores, no K/V). */
  __device__ __forceinline__ void cut_segment() {
    s_eff = max(1, min(p.num_splits, (ntiles + kSplitMinTiles - 1) / kSplitMinTiles));
    /* 32-bit unsigned: ntiles * (seg + 1) <= (2^31 / BLOCK_N) * 128 segments,
     * under 2^32 for 64-key tiles; 32-key tiles (AMD's table) would need a
     * 2^30-token context (a 4 TB cache at Llama-8B shapes) to overflow */
    const int t0 = seg < s_eff ? (int)((unsigned)ntiles * seg / (unsigned)s_eff) : ntiles;
    const int t1 = seg < s_eff ? (int)((unsigned)ntiles * (seg + 1) / (unsigned)s_eff) : ntiles;
    n_begin += t0 * S::BN;
    ntiles = t1 - t0;
    lo = max(lo, n_begin);
    hi = min(hi, n_begin + ntiles * S::BN);
  }

  /* Row r of the program: token r / gh of the block, head head0 + r % gh. */
  __device__ __forceinline__ int row_tok(int r) const { return fast_div(r, p.gh_magic, p.gh_shift); }
  __device__ __forceinline__ bool row_valid(int r) const {
    const int t = row_tok(r);
    return t < w.n_tok && r - t * p.gh < heads_here;
  }
  /* Element offset of row r in q / out over head_dim; its lse offset. */
  __device__ __forceinline__ int64_t row_offset(int r) const {
    const int t = row_tok(r);
    return ((int64_t)(w.tok0 + t) * p.num_q_heads + head0 + (r - t * p.gh));
  }
  /* The q head of row r, clamped into the group for rows past it (padding rows). */
  __device__ __forceinline__ int row_head(int r) const { return head0 + min(r - row_tok(r) * p.gh, heads_here - 1); }
  /* Row of r's split-KV partial in segment sg: (sg * part_tokens + token
   * row) * num_q_heads + head; of this program's segment. */
  __device__ __forceinline__ int64_t part_row(int r, int sg) const {
    const int t = row_tok(r);
    return ((int64_t)sg * p.part_tokens + ptok0 + t) * p.num_q_heads + head0 + (r - t * p.gh);
  }
  __device__ __forceinline__ int64_t part_row(int r) const { return part_row(r, seg); }
};

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_SCHEDULER_CUH */
