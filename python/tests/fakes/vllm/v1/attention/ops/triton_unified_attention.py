"""Fake vLLM Triton unified_attention: vLLM's positional arguments, the split-KV buffers checked
against the shapes vLLM's Triton backend allocates; see tests/fakes/README.md."""

from _paged import attend, pages_of


def unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k, softmax_scale, causal,
                      window_size, block_table, softcap, q_descale, k_descale, v_descale, seq_threshold_3D=None,
                      num_par_softmax_segments=None, softmax_segm_output=None, softmax_segm_max=None,
                      softmax_segm_expsum=None, alibi_slopes=None, output_scale=None, qq_bias=None, sinks=None):
    assert causal, "Only causal attention is supported"
    assert q_descale is None, "Q scales not supported"
    assert tuple(window_size) == (-1, -1) and softcap == 0
    num_seqs, hkv = len(seqused_k), k.shape[2]
    assert tuple(k_descale.shape) == (num_seqs, hkv), k_descale.shape
    if seq_threshold_3D is not None:
        d_pad = 1 << (q.shape[2] - 1).bit_length()
        assert softmax_segm_output.shape == (seq_threshold_3D, q.shape[1], num_par_softmax_segments, d_pad)
        assert softmax_segm_max.shape == softmax_segm_expsum.shape == softmax_segm_output.shape[:3]
    cu, lens, bs = cu_seqlens_q.tolist(), seqused_k.tolist(), k.shape[1]
    assert max(cu[s + 1] - cu[s] for s in range(num_seqs)) <= max_seqlen_q and max(lens) <= max_seqlen_k
    for s in range(num_seqs):
        pages = block_table[s, :-(-lens[s] // bs)].tolist()
        out[cu[s]:cu[s + 1]] = attend(q[cu[s]:cu[s + 1]], pages_of(k, pages, lens[s]), pages_of(v, pages, lens[s]),
                                      softmax_scale)
