"""Mixture-of-experts feed-forwards and latent attention inside DecoderLM: gradients reach the
experts, cached decoding equals the full forward, the balancing terms join the loss at their
known values, the training loop uses them (and bias balancing), bad configs are named."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.model.config import ModelConfig
from llmviz.model.generation import generate
from llmviz.model.lm import DecoderLM
from llmviz.moe import MoELayer
from llmviz.moe.layer import clamped_glu
from llmviz.training import TrainConfig, train

from ._decoding import assert_cached_decoding_equals_full_forward

SMALL = dict(vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2)
MOE = dict(SMALL, n_experts=4, experts_top_k=2, expert_d_ff=16, moe_layers=(1, 2))
MLA = dict(SMALL, attn_kind="mla", kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4,
           v_head_dim=6, q_lora_rank=12, rope_layout="interleaved")
DEEPSEEK = dict(MLA, n_experts=8, experts_top_k=2, expert_d_ff=16, n_shared_experts=1,
                moe_score="sigmoid", moe_scaling=2.5, moe_n_groups=2, moe_topk_groups=1,
                moe_bias_balancing=True, moe_layers=(1, 2))
GPT_OSS = dict(MOE, router_bias=True, expert_bias=True, expert_glu="clamped", attn_sinks=True)
QWEN_NEXT = dict(MOE, n_layers=4, moe_layers=None, linear_layers=(0, 1, 2), linear_heads=4,
                 linear_key_heads=2, linear_head_dim=8, attn_output_gate=True,
                 n_shared_experts=1, shared_expert_gate=True)


def _model(**kw) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(ModelConfig(**kw))


def _ids(B=2, T=12, seed=1):
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


def test_sparse_layers_hold_experts_with_hf_names():
    model = _model(**MOE)
    assert [b.is_moe for b in model.layers] == [False, True, True]
    names = set(model.state_dict())
    assert {"layers.1.mlp.gate.weight", "layers.1.mlp.experts.gate_up_proj",
            "layers.1.mlp.experts.down_proj", "layers.0.mlp.gate_proj.weight"} <= names
    ds = _model(**DEEPSEEK)
    assert "layers.1.mlp.shared_experts.down_proj.weight" in ds.state_dict()
    assert "layers.1.mlp.gate.e_score_correction_bias" in ds.state_dict()
    assert "layers.0.self_attn.kv_a_proj_with_mqa.weight" in ds.state_dict()


@pytest.mark.parametrize("kw", [MOE, DEEPSEEK, GPT_OSS, QWEN_NEXT], ids=["moe", "deepseek", "gpt-oss", "qwen3-next"])
def test_forward_backward_reaches_experts_and_router(kw):
    model = _model(**dict(kw, router_aux_loss_coef=0.01))
    out = model(_ids(), labels=_ids())
    assert torch.isfinite(out.loss) and out.aux_loss is not None
    out.loss.backward()
    sparse = next(b for b in model.layers if b.is_moe)
    for p in (sparse.mlp.gate.weight, sparse.mlp.experts.gate_up_proj, sparse.mlp.experts.down_proj):
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert len(out.moe) == sum(b.is_moe for b in model.layers)


@pytest.mark.parametrize("kw", [MOE, MLA, DEEPSEEK, GPT_OSS, QWEN_NEXT],
                         ids=["moe", "mla", "deepseek", "gpt-oss", "qwen3-next"])
def test_cached_decoding_equals_the_full_forward(kw):
    assert_cached_decoding_equals_full_forward(_model(**kw).double().eval(), _ids(T=15), prefill=4)


def test_mla_cache_holds_latents_only():
    model = _model(**MLA).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(_ids(B=1, T=5), cache=cache)
    c = model.config
    per_token = (c.kv_lora_rank + c.qk_rope_head_dim) * 4 * c.n_layers  # float32, every layer
    assert cache.nbytes() == 5 * per_token


def test_generate_with_latent_attention_and_experts():
    model = _model(**DEEPSEEK).eval()
    prompt = _ids(B=1, T=4)
    a = generate(model, prompt, max_new_tokens=6, temperature=0)
    b = generate(model, prompt, max_new_tokens=6, temperature=0, use_cache=False)
    assert a.shape == (1, 10) and torch.equal(a, b)


def test_aux_loss_at_uniform_routing_and_in_the_loss():
    """Zero router weights: every expert equally likely, so E * sum f P = 1 whatever the top-k
    picks, and logsumexp of E zero logits is log E."""
    a, z = 0.02, 0.001
    model = _model(**dict(MOE, router_aux_loss_coef=a, router_z_loss_coef=z))
    with torch.no_grad():
        for b in model.layers:
            if b.is_moe:
                b.mlp.gate.weight.zero_()
    ids = _ids()
    out = model(ids, labels=ids)
    expected = a * 1.0 + z * math.log(4) ** 2
    assert out.aux_loss.item() == pytest.approx(expected, rel=1e-6)
    ce = model.loss(out.logits, ids)
    assert (out.loss - ce).item() == pytest.approx(expected, rel=1e-5)
    assert _model(**MOE)(ids).aux_loss is None  # zero coefficients: no term
    assert _model(**SMALL)(ids).moe is None  # a dense model routes nothing


def test_aux_loss_ignores_padding():
    model = _model(**dict(MOE, router_aux_loss_coef=1.0))
    ids = _ids(B=1, T=8)
    mask = torch.ones(1, 8, dtype=torch.long)
    mask[0, 6:] = 0
    padded = model(ids, attention_mask=mask).aux_loss
    infos = model(ids).moe
    keep = mask[0].bool()
    from llmviz.moe import load_balancing_loss

    by_hand = sum(load_balancing_loss(i.routing.probs[keep], i.routing.indices[keep]) for i in infos) / 2
    assert padded.item() == pytest.approx(by_hand.item(), rel=1e-6)


def test_train_adds_the_aux_loss_and_updates_router_biases():
    stream = torch.randint(0, 64, (4000,), generator=torch.Generator().manual_seed(0))
    cfg = TrainConfig(steps=3, batch_size=4, seq_len=16, warmup=0)
    model = _model(**dict(MOE, router_aux_loss_coef=0.5))
    h = train(model, stream, config=cfg, progress=False)
    assert all(loss - ce > 0.4 for loss, ce in zip(h.loss, h.cross_entropy))  # 0.5 * (>= ~1)
    dense = train(_model(**SMALL), stream, config=cfg, progress=False)
    assert dense.loss == dense.cross_entropy
    ds = _model(**DEEPSEEK)
    before = ds.layers[1].mlp.gate.e_score_correction_bias.clone()
    train(ds, stream, config=cfg, progress=False)
    moved = ds.layers[1].mlp.gate.e_score_correction_bias - before
    assert moved.abs().sum() > 0  # the balancing bias learned, without any gradient
    assert torch.all(moved.abs() <= 3 * 1e-3 + 1e-7)  # at most one step of the rate per update


def test_clamped_glu_and_gated_shared_expert():
    gate = torch.tensor([-2.0, 0.5, 9.0])
    up = torch.tensor([10.0, -0.5, -9.0])
    out = clamped_glu(gate, up, alpha=1.702, limit=7.0)
    g = torch.tensor([-2.0, 0.5, 7.0])  # gate clamped from above only
    u = torch.tensor([7.0, -0.5, -7.0])  # up clamped both ways
    torch.testing.assert_close(out, (u + 1) * g * torch.sigmoid(1.702 * g))
    torch.manual_seed(0)
    layer = MoELayer(16, 4, 2, 8, n_shared=1, shared_gate=True)
    x = torch.randn(5, 16)
    plain = MoELayer(16, 4, 2, 8, n_shared=1)
    plain.load_state_dict({k: v for k, v in layer.state_dict().items() if "shared_expert_gate" not in k})
    shared = layer.shared_experts(x)
    expected = plain(x) - shared + torch.sigmoid(layer.shared_expert_gate(x)) * shared
    torch.testing.assert_close(layer(x), expected)
    counts = layer.parameter_counts()
    assert counts["shared"] == sum(p.numel() for p in layer.shared_experts.parameters()) + 16


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(SMALL, n_experts=2, experts_top_k=3), r"experts_top_k \(3\) must be <= n_experts \(2\)"),
        (dict(SMALL, n_experts=4, moe_layers=(5,)), r"moe_layers must hold layer indices in \[0, 3\)"),
        (dict(SMALL, moe_layers=(1,)), "moe_layers .* needs n_experts"),
        (dict(SMALL, n_experts=4, moe_score="relu"), "moe_score"),
        (dict(SMALL, n_experts=4, shared_expert_gate=True), "shared_expert_gate=True needs a shared expert"),
        (dict(SMALL, n_experts=4, moe_n_groups=3, moe_topk_groups=1), r"n_experts \(4\) must be divisible by n_groups \(3\)"),
        (dict(SMALL, router_aux_loss_coef=-1.0), "router_aux_loss_coef"),
        (dict(SMALL, attn_kind="mla"), r"attn_kind='mla' needs \['kv_lora_rank'"),
        (dict(MLA, attn_sinks=True), r"none of \['attn_sinks'\]"),
        (dict(SMALL, kv_lora_rank=8), r"\['kv_lora_rank'\] only apply to attn_kind='mla'"),
        (dict(SMALL, attn_kind="latent"), "attn_kind"),
        (dict(MLA, placement="deepnorm"), "placement='deepnorm' scales v_proj"),
    ],
)
def test_bad_configs_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**kw)


def test_replace_keeps_moe_and_mla_fields():
    c = ModelConfig(**DEEPSEEK).replace(d_model=64)
    assert (c.n_experts, c.attn_kind, c.moe_layers, c.expert_d_ff) == (8, "mla", (1, 2), 16)
    auto = ModelConfig(**dict(SMALL, n_experts=4)).replace(d_model=64)
    assert auto.expert_d_ff == auto.d_ff  # followed the dense width


def test_bad_calls_are_named():
    model = _model(**dict(DEEPSEEK))
    with pytest.raises(ValueError, match="update_router_biases needs a forward pass first"):
        model.update_router_biases()
    with pytest.raises(ValueError, match="moe_aux_loss needs the MoEInfo of at least one sparse layer"):
        model.moe_aux_loss([])
    assert _model(**SMALL).update_router_biases() == 0
    with pytest.raises(ValueError, match="latent attention .* takes no score_bias"):
        model.layers[0](torch.randn(1, 3, 32), score_bias=torch.zeros(1, 4, 3, 3))
