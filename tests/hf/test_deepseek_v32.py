"""DeepSeek-V3.2 (deepseek_v32): the sparse attention is what makes the logits match (the same
weights attending to every key are far off, in transformers too), padding and cached decoding,
what the reader refuses, and what anatomy counts."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.indexer import IndexedLatentAttention
from llmviz.hf import REFUSED, SUPPORTED, anatomy, config_from_hf, from_hf

transformers = pytest.importorskip("transformers")


def _set_topk(hf, ours, k: int) -> None:
    for layer in hf.model.layers:
        layer.self_attn.indexer.index_topk = k
    for block in ours.layers:
        block.self_attn.indexer.topk = k


def test_the_selection_changes_the_logits_and_is_reproduced(make_hf, ids):
    hf = make_hf("deepseek_v32")  # index_topk = 6, 24 tokens
    ours = from_hf(hf)
    assert [type(b.self_attn) for b in ours.layers] == [IndexedLatentAttention] * 3
    assert hf.config.index_topk == 6 < ids.shape[1]
    with torch.no_grad():
        sparse_ref, sparse = hf(ids).logits, ours(ids).logits
        _set_topk(hf, ours, ids.shape[1])  # every key kept: dense latent attention
        dense_ref, dense = hf(ids).logits, ours(ids).logits
    assert (sparse - sparse_ref).abs().max() < 1e-5 and (dense - dense_ref).abs().max() < 1e-5
    assert (dense_ref - sparse_ref).abs().max() > 0.5  # dense MLA would not reproduce the model
    # the first 6 positions see at most 6 keys: sparse and dense agree there
    assert (dense_ref[:, :6] - sparse_ref[:, :6]).abs().max() < 1e-5


def test_padding_and_cached_decoding(make_hf, gen):
    hf = make_hf("deepseek_v32")
    ours = from_hf(hf)
    x = torch.randint(3, 100, (2, 14), generator=gen)
    mask = torch.ones(2, 14, dtype=torch.long)
    mask[1, 10:] = 0  # right padding: keys no query may select
    with torch.no_grad():
        ref, got = hf(x, attention_mask=mask).logits, ours(x, attention_mask=mask).logits
        torch.testing.assert_close(got[0], ref[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(got[1, :10], ref[1, :10], atol=1e-5, rtol=0)
        cache = ours.new_cache()
        steps = [ours(x[:, :4], cache=cache).logits]
        steps += [ours(x[:, t:t + 1], cache=cache).logits for t in range(4, 14)]
    torch.testing.assert_close(torch.cat(steps, 1), ours(x).logits, atol=1e-5, rtol=0)


def test_the_reader_reads_and_refuses_by_name(make_hf):
    c = config_from_hf(make_hf("deepseek_v32").config)
    assert (c.attn_kind, c.q_lora_rank, c.moe_layers, c.moe_n_groups, c.rope_layout) == (
        "mla", 24, (1, 2), 2, "interleaved")
    # V3.2's attention always interleaves: a stray rope_interleave=False changes nothing
    assert config_from_hf(make_hf("deepseek_v32", rope_interleave=False).config).rope_layout == "interleaved"
    for field, value, match in (("q_lora_rank", None, "q_lora_rank=None; .* query latent"),
                                ("index_topk", 0, "index_topk=0; the indexer needs a positive int"),
                                ("index_head_dim", 4, "index_head_dim=4 is below qk_rope_head_dim=8"),
                                ("layer_types", ["indexed_attention", "full_attention", "indexed_attention"],
                                 "every one of the 3 layers is 'indexed_attention'")):
        config = make_hf("deepseek_v32").config
        object.__setattr__(config, field, value)  # past the strict dataclass: a config edited by hand
        with pytest.raises(ValueError, match=match):
            config_from_hf(config)
    # transformers 5.17 calls the same layer 'deepseek_sparse_attention' (its logits and greedy
    # tokens match under that release too); the reader takes either name
    config = make_hf("deepseek_v32").config
    object.__setattr__(config, "layer_types", ["deepseek_sparse_attention"] * 3)
    assert config_from_hf(config) == c
    assert "deepseek_v32" in SUPPORTED and "deepseek_v32" not in REFUSED
    for other in ("glm_moe_dsa", "axk2", "dots3_note", "dots3_note_text", "minimax_m3_vl_text", "hy_v4"):
        assert "has not been compared" in REFUSED[other]


def test_anatomy_counts_the_indexer_and_caches_its_key(make_hf):
    hf = make_hf("deepseek_v32")
    a = anatomy(hf.config)
    assert a.total_params == sum(p.numel() for p in from_hf(hf).parameters()) == sum(
        p.numel() for p in hf.parameters())
    assert [layer.kv_elements for layer in a.layers] == [16 + 8 + 16] * 3  # latent, rope key, indexer key
    # the flagship: DeepSeek-V3 plus, in each of its 61 layers, wq_b, wk, k_norm and weights_proj
    flagship, v3 = anatomy(transformers.DeepseekV32Config()), anatomy(transformers.DeepseekV3Config())
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert flagship.total_params - v3.total_params == 61 * per_layer
    assert flagship.layers[0].kv_elements == 512 + 64 + 128
