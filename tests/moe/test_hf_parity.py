"""Parity with Hugging Face transformers 5 sparse MoE blocks built from tiny random configs."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from llmviz.moe import load_balancing_loss, moe_from_hf, route  # noqa: E402


def _init(block: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return block.eval()


def _mixtral(**kw):
    from transformers.models.mixtral.modeling_mixtral import MixtralConfig, MixtralSparseMoeBlock

    cfg = MixtralConfig(hidden_size=32, intermediate_size=24, num_local_experts=6,
                        num_experts_per_tok=2, **kw)
    return _init(MixtralSparseMoeBlock(cfg), 1)


def _qwen3(norm_topk_prob: bool):
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeConfig, Qwen3MoeSparseMoeBlock

    cfg = Qwen3MoeConfig(hidden_size=32, moe_intermediate_size=16, num_experts=8,
                         num_experts_per_tok=3, norm_topk_prob=norm_topk_prob)
    return _init(Qwen3MoeSparseMoeBlock(cfg), 2)


def _deepseek(n_group: int, topk_group: int, norm: bool = True):
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Config, DeepseekV3MoE

    cfg = DeepseekV3Config(hidden_size=32, moe_intermediate_size=12, n_routed_experts=16,
                           num_experts_per_tok=4, n_group=n_group, topk_group=topk_group,
                           n_shared_experts=2, routed_scaling_factor=2.5, norm_topk_prob=norm)
    block = _init(DeepseekV3MoE(cfg), 3)
    with torch.no_grad():  # a non-zero choice bias, so the parity covers it
        block.gate.e_score_correction_bias.copy_(torch.linspace(-0.3, 0.3, 16))
    return block


BLOCKS = {
    "mixtral": lambda: _mixtral(),
    "qwen3_norm": lambda: _qwen3(True),
    "qwen3_raw": lambda: _qwen3(False),
    "deepseek_grouped": lambda: _deepseek(4, 2),
    "deepseek_ungrouped": lambda: _deepseek(1, 1),
    "deepseek_unnormalised": lambda: _deepseek(4, 3, norm=False),
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_block_output_and_router_logits_match(name, gen):
    block = BLOCKS[name]()
    ours = moe_from_hf(block)
    x = torch.randn(3, 7, 32, generator=gen)
    with torch.no_grad():
        want = block(x)
        got, info = ours(x, return_info=True)
        hf_logits, hf_weights, hf_idx = block.gate(x.reshape(-1, 32))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(info.routing.logits, hf_logits, rtol=1e-6, atol=1e-6)
    # same experts chosen (as sets: HF's DeepSeek top-k is unsorted) and same weights
    a, ia = info.routing.indices.sort(dim=-1)
    b, ib = hf_idx.sort(dim=-1)
    assert torch.equal(a, b)
    torch.testing.assert_close(info.routing.weights.gather(1, ia), hf_weights.gather(1, ib).to(x.dtype))


def test_gradients_match_mixtral(gen):
    block = _mixtral()
    ours = moe_from_hf(block)
    x = torch.randn(2, 5, 32, generator=gen)
    block(x).pow(2).sum().backward()
    ours(x).pow(2).sum().backward()
    torch.testing.assert_close(ours.experts.gate_up_proj.grad, block.experts.gate_up_proj.grad,
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours.gate.weight.grad, block.gate.weight.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_mask", [False, True])
def test_balancing_loss_matches_hf_tokens_form(with_mask, gen):
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    layers = tuple(torch.randn(12, 6, generator=gen) for _ in range(3))
    mask = (torch.rand(2, 6, generator=gen) > 0.3).long() if with_mask else None
    want = load_balancing_loss_func(layers, 6, top_k=2, attention_mask=mask)
    logits = torch.cat(layers)
    r = route(logits, 2)
    flat_mask = None if mask is None else mask.bool().reshape(-1).repeat(3)
    got = load_balancing_loss(r.probs, r.indices, mask=flat_mask, form="tokens")
    torch.testing.assert_close(got, want)
    # the default (assignments) form is the same number divided by k
    got_a = load_balancing_loss(r.probs, r.indices, mask=flat_mask)
    torch.testing.assert_close(got_a * 2, want)


def test_unsupported_block_refused():
    with pytest.raises(TypeError, match="MixtralSparseMoeBlock"):
        moe_from_hf(torch.nn.Linear(2, 2))
