"""DeepSeek Sparse Attention: the lightning indexer and the latent attention it masks, against
transformers' DeepseekV32Indexer and DeepseekV32Attention (tiny random, float32), the top-k rule
(every key kept while S <= k), the cached indexer keys, and bad input."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention import LatentCache, MultiHeadLatentAttention
from llmviz.attention.indexer import IndexedLatentAttention, LightningIndexer, allowed_keys
from llmviz.position import RopeScaling

transformers = pytest.importorskip("transformers")
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as hf_ds32  # noqa: E402

DIMS = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6)
INDEX = dict(index_heads=4, index_head_dim=8, index_topk=3)
YARN = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "original_max_position_embeddings": 8,
        "mscale": 1.0, "mscale_all_dim": 1.0}


def _hf(topk=3, rope_parameters=None, attn="eager"):
    cfg = transformers.DeepseekV32Config(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12, index_n_heads=4,
        index_head_dim=8, index_topk=topk, max_position_embeddings=64, attn_implementation=attn,
        num_hidden_layers=1, rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 1e4},
        **DIMS)
    torch.manual_seed(5)
    attn_module = hf_ds32.DeepseekV32Attention(cfg, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn_module.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (0.5 if p.dim() == 1 else 0.0))  # norms: off their init
    return cfg, attn_module, hf_ds32.DeepseekV32RotaryEmbedding(cfg)


def _ours(cfg, hf, topk=3) -> IndexedLatentAttention:
    scaling = RopeScaling.from_hf(cfg) if cfg.rope_parameters["rope_type"] != "default" else None
    ours = IndexedLatentAttention(32, 4, q_lora_rank=12, rope_scaling=scaling, **DIMS,
                                  **{**INDEX, "index_topk": topk})
    ours.load_state_dict(hf.state_dict())  # the same names, strict
    return ours.eval()


def _causal(B, T, pad=None, as_bool=False):
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None].expand(B, T, T).clone()
    if pad is not None:
        allowed &= pad[:, None, :].bool()
    return allowed[:, None] if as_bool else torch.zeros(B, 1, T, T).masked_fill(~allowed[:, None], float("-inf"))


@pytest.mark.parametrize("rope", [None, YARN], ids=["default", "yarn"])
@pytest.mark.parametrize("as_bool", [False, True], ids=["float-mask", "bool-mask"])
def test_indexer_selects_what_transformers_selects(rope, as_bool, gen):
    cfg, hf, rotary = _hf(rope_parameters=rope)
    ours = _ours(cfg, hf).indexer
    B, T = 2, 11
    x, q_latent = torch.randn(B, T, 32, generator=gen), torch.randn(B, T, 12, generator=gen)
    pad = torch.ones(B, T, dtype=torch.long)
    pad[1, :2] = 0  # left padding: keys no query may pick
    pos = torch.arange(T)[None].expand(B, T)
    with torch.no_grad():
        want = hf.indexer(x, q_latent, rotary(x, pos), _causal(B, T, pad, as_bool)[:, 0], pos)  # (B, T, k)
        allowed = allowed_keys(padding_mask_of(pad), B, T, T)
        q, k = ours.project(x, q_latent, pos)
        got = ours.select(ours.scores(x, q, k), allowed)
    hf_sel = torch.zeros(B, T, T, dtype=torch.bool).scatter(-1, want.long(), True) & allowed
    assert torch.equal(got, hf_sel)
    assert (got.sum(-1) == allowed.sum(-1).clamp(max=3)).all()  # k keys once k are allowed


def padding_mask_of(pad: torch.Tensor) -> torch.Tensor:
    return pad.bool()[:, None, None, :]


def test_indexer_scores_order_keys_as_transformers_does(gen):
    """With k = S transformers returns every key sorted by its score: the same order as ours."""
    cfg, hf, rotary = _hf(topk=9)
    ours = _ours(cfg, hf, topk=9).indexer
    x, q_latent = torch.randn(1, 9, 32, generator=gen), torch.randn(1, 9, 12, generator=gen)
    pos = torch.arange(9)[None]
    with torch.no_grad():
        want = hf.indexer(x, q_latent, rotary(x, pos), torch.zeros(1, 9, 9), pos)  # no mask: all keys
        q, k = ours.project(x, q_latent, pos)
        scores = ours.scores(x, q, k)
    assert torch.equal(scores.topk(9, dim=-1).indices, want.long())
    # the formula, written out: sum_i w_i / sqrt(I) * relu(q_i . k / sqrt(E))
    w = ours.weights_proj(x) / 2.0
    formula = torch.einsum("bti,btis->bts", w, torch.einsum("btie,bse->btis", q, k).div(8**0.5).relu())
    torch.testing.assert_close(scores, formula, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("absorbed", [False, True])
def test_indexed_attention_matches_transformers_and_differs_from_dense(attn, absorbed, gen):
    cfg, hf, rotary = _hf(rope_parameters=YARN, attn=attn)
    ours = _ours(cfg, hf)
    B, T = 2, 10  # 10 keys, 3 read per query: sparse past the third token
    x = torch.randn(B, T, 32, generator=gen)
    pos = torch.arange(T)[None].expand(B, T)
    mask = _causal(B, T, as_bool=attn == "sdpa")
    dense = MultiHeadLatentAttention(32, 4, q_lora_rank=12, rope_scaling=ours.rope.scaling, **DIMS)
    dense.load_state_dict({k: v for k, v in hf.state_dict().items() if not k.startswith("indexer.")})
    with torch.no_grad():
        want, _ = hf(x, position_embeddings=rotary(x, pos), attention_mask=mask)
        got, selected = ours(x, absorbed=absorbed, return_selection=True)
        full = dense(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (selected.sum(-1) == torch.arange(1, T + 1).clamp(max=3)).all()
    assert (got[:, :3] - full[:, :3]).abs().max() < 1e-5  # at most 3 keys: every key is read
    assert (got[:, 3:] - full[:, 3:]).abs().max() > 1e-2  # past 3 keys the selection changes it


def test_index_topk_at_least_the_sequence_is_dense_attention(gen):
    cfg, hf, _ = _hf(topk=16)
    ours = _ours(cfg, hf, topk=16)
    dense = MultiHeadLatentAttention(32, 4, q_lora_rank=12, **DIMS)
    dense.load_state_dict({k: v for k, v in hf.state_dict().items() if not k.startswith("indexer.")})
    x = torch.randn(2, 12, 32, generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), dense(x), rtol=0, atol=1e-6)


def test_cached_decoding_matches_transformers_and_the_full_pass(gen):
    """The cache's rope-key slot holds [k_rope | indexer key]: decoding scores each new query
    against every earlier token's indexer key, as transformers' update_indexer does."""
    from transformers.cache_utils import DynamicCache

    cfg, hf, rotary = _hf()
    ours = _ours(cfg, hf)
    x = torch.randn(1, 9, 32, generator=gen)
    hf_cache, cache = DynamicCache(config=cfg), LatentCache()
    steps, ref = [], []
    with torch.no_grad():
        for lo, hi in ((0, 5), (5, 6), (6, 7), (7, 8), (8, 9)):
            pos = torch.arange(lo, hi)[None]
            mask = torch.zeros(1, 1, hi - lo, hi).masked_fill(
                ~torch.ones(hi - lo, hi, dtype=torch.bool).tril(lo), float("-inf"))
            ref.append(hf(x[:, lo:hi], position_embeddings=rotary(x[:, lo:hi], pos), attention_mask=mask,
                          cache=hf_cache)[0])
            steps.append(ours(x[:, lo:hi], cache=cache))
        full = ours(x)
    assert cache.rope_keys[0].shape == (1, 9, 4 + 8)  # dr rope features + E indexer features
    torch.testing.assert_close(torch.cat(steps, 1), torch.cat(ref, 1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


def test_allowed_keys_is_causal_and_padding():
    pad = torch.tensor([[0, 1, 1, 1]]).bool()[:, None, None, :]
    got = allowed_keys(pad, 1, 2, 4)  # the last 2 of 4 positions
    assert got.tolist() == [[[False, True, True, False], [False, True, True, True]]]
    assert allowed_keys(None, 1, 2, 3, causal=False).all()


@pytest.mark.parametrize(
    "call, err, match",
    [
        (lambda: IndexedLatentAttention(32, 4, **DIMS, **INDEX), ValueError, "needs q_lora_rank"),
        (lambda: LightningIndexer(32, 12, n_heads=2, head_dim=4, rope_dim=6, topk=2), ValueError,
         "rope_dim=6 must be even and at most head_dim=4"),
        (lambda: LightningIndexer(32, 12, n_heads=2, head_dim=8, rope_dim=4, topk=0), ValueError,
         "topk must be a positive int"),
        (lambda: allowed_keys(torch.ones(1, 2, 3, 3, dtype=torch.bool), 1, 3, 3), ValueError,
         "differs per head"),
        (lambda: allowed_keys(torch.ones(1, 3, 3), 1, 3, 3), TypeError, "mask must be bool"),
        (lambda: allowed_keys(None, 1, 4, 3), ValueError, "S=3 keys cannot be fewer than T=4"),
        (lambda: allowed_keys(torch.ones(2, 1, 5, dtype=torch.bool), 2, 3, 3), ValueError,
         "does not broadcast"),
    ],
)
def test_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_select_and_scores_check_their_shapes(gen):
    idx = LightningIndexer(32, 12, n_heads=2, head_dim=8, rope_dim=4, topk=2)
    with pytest.raises(ValueError, match="allowed must be bool"):
        idx.select(torch.randn(1, 3, 3), torch.ones(1, 3, 3))
    with pytest.raises(ValueError, match=r"q \(1, 3, 2, 4\) must be"):
        idx.scores(torch.randn(1, 3, 32), torch.randn(1, 3, 2, 4), torch.randn(1, 3, 8))
    with pytest.raises(ValueError, match="must agree in"):
        idx.project(torch.randn(1, 3, 32), torch.randn(1, 4, 12), torch.arange(3))
