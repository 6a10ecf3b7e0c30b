"""Multi-query associative recall and the four token-mixer variants."""

from __future__ import annotations

import pytest
import torch

from llmviz.attention.deltanet import GatedDeltaNet
from llmviz.attention.linear import linear_attention, l2_normalize
from llmviz.training.recall import (
    MIXER_VARIANTS,
    PlainLinearAttention,
    hybrid_layers,
    multi_query_recall,
    recall_accuracy,
    recall_model,
)


def test_layout_keys_values_and_mask():
    g = torch.Generator().manual_seed(0)
    t = multi_query_recall(batch_size=50, n_pairs=5, n_queries=3, n_keys=8, n_values=6, generator=g)
    assert t.inputs.shape == t.targets.shape == t.mask.shape == (50, 2 * (5 + 3) - 1)
    full = torch.cat([t.inputs, t.targets[:, -1:]], 1)
    keys, values = full[:, 0:10:2], full[:, 1:10:2]
    assert (keys < 8).all() and ((values >= 8) & (values < 14)).all()
    assert all(len(set(row.tolist())) == 5 for row in keys)  # distinct keys
    assert t.mask.sum(1).eq(3).all()
    for b in range(50):  # every masked target is the value stated with the queried key
        table = dict(zip(keys[b].tolist(), values[b].tolist()))
        for pos in t.mask[b].nonzero().flatten().tolist():
            assert t.targets[b, pos].item() == table[t.inputs[b, pos].item()]


def test_same_generator_same_batch():
    a = multi_query_recall(batch_size=4, n_pairs=3, generator=torch.Generator().manual_seed(1))
    b = multi_query_recall(batch_size=4, n_pairs=3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.mask, b.mask)


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="n_keys"):
        multi_query_recall(batch_size=2, n_pairs=9, n_keys=8)
    with pytest.raises(ValueError, match="n_queries"):
        multi_query_recall(batch_size=2, n_pairs=3, n_queries=4)
    with pytest.raises(ValueError, match="variant"):
        recall_model("mamba", vocab_size=32)
    with pytest.raises(ValueError, match="ratio"):
        hybrid_layers(4, 0)


def test_hybrid_layers_put_softmax_last_in_each_group():
    assert hybrid_layers(8, 3) == (0, 1, 2, 4, 5, 6)
    assert hybrid_layers(2, 1) == (0,)
    assert hybrid_layers(4, 1) == (0, 2)


def test_plain_linear_attention_matches_the_scan():
    torch.manual_seed(0)
    gdn = GatedDeltaNet(16, 2, 4)
    plain = PlainLinearAttention.from_deltanet(gdn)
    x = torch.randn(2, 7, 16)
    y = plain(x)
    # rebuild the read-out by hand: conv, silu, unit q and k, no delta, no gate
    mixed = torch.cat([gdn.q_proj(x), gdn.k_proj(x), gdn.v_proj(x)], -1).transpose(1, 2)
    mixed = torch.nn.functional.silu(torch.nn.functional.conv1d(
        torch.nn.functional.pad(mixed, (3, 0)), gdn.conv.weight, groups=gdn.conv_dim))
    q, k, v = (t.reshape(2, 7, 2, 4).transpose(1, 2) for t in mixed.transpose(1, 2).split(8, -1))
    o, _ = linear_attention(l2_normalize(q), l2_normalize(k), v, form="recurrent")
    o = o.transpose(1, 2)
    o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + gdn.eps) * gdn.norm_weight
    o = o * torch.nn.functional.silu(gdn.z_proj(x).reshape(2, 7, 2, 4))
    torch.testing.assert_close(y, gdn.o_proj(o.reshape(2, 7, 8)), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(y, gdn(x))  # the delta rule and the gate do change the output
    with pytest.raises(ValueError, match="state"):
        plain(x, return_state=True)


@pytest.mark.parametrize("variant", MIXER_VARIANTS)
def test_variants_run_and_score(variant):
    torch.manual_seed(0)
    model = recall_model(variant, vocab_size=32, d_model=32, n_layers=2, n_heads=2)
    kinds = [type(b.linear_attn).__name__ if b.linear_attn is not None else "softmax"
             for b in model.layers]
    expected = {"softmax": ["softmax"] * 2, "linear": ["PlainLinearAttention"] * 2,
                "deltanet": ["GatedDeltaNet"] * 2, "hybrid": ["GatedDeltaNet", "softmax"]}
    assert kinds == expected[variant]
    t = multi_query_recall(batch_size=8, n_pairs=4, generator=torch.Generator().manual_seed(0))
    acc = recall_accuracy(model, t)
    per = recall_accuracy(model, t, per_sequence=True)
    assert 0.0 <= float(acc) <= 1.0 and per.shape == (8,)
    assert abs(float(per.mean()) - float(acc)) < 1e-6  # equal queries per sequence


def test_perfect_model_scores_one_and_a_wrong_one_zero():
    t = multi_query_recall(batch_size=3, n_pairs=3, generator=torch.Generator().manual_seed(2))

    class Oracle(torch.nn.Module):
        def __init__(self, shift: int) -> None:
            super().__init__()
            self.shift = shift

        def forward(self, inputs):
            return torch.nn.functional.one_hot((t.targets + self.shift) % 32, 32).float()

    assert float(recall_accuracy(Oracle(0), t)) == 1.0
    assert float(recall_accuracy(Oracle(1), t)) == 0.0


def test_init_gate_step_refuses_a_layer_without_a_gate():
    from llmviz.training.recall import init_gate_step

    with pytest.raises(TypeError, match="GatedDeltaNet"):
        init_gate_step(torch.nn.Linear(2, 2))


def test_recall_accuracy_names_bad_arguments():
    from llmviz.training.recall import recall_accuracy

    with pytest.raises(TypeError, match="torch.nn.Module"):
        recall_accuracy(torch.zeros(2), None)
    with pytest.raises(TypeError, match="multi_query_recall"):
        recall_accuracy(torch.nn.Linear(2, 2), (torch.zeros(1),))


def test_conv_projection_is_a_causal_depthwise_conv_after_the_projection():
    from llmviz.training.recall import ConvProjection

    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 5)
    proj = ConvProjection(lin, kernel=3)
    assert torch.equal(proj.weight, lin.weight) and torch.equal(proj.bias, lin.bias)
    x = torch.randn(2, 7, 6)
    y = lin(x)  # (B, T, C); reference: a loop over the 3 most recent positions
    w = proj.conv.weight[:, 0]  # (C, K), the last tap on the newest position
    ref = torch.zeros_like(y)
    for t in range(7):
        for j in range(3):
            if t - 2 + j >= 0:
                ref[:, t] += w[:, j] * y[:, t - 2 + j]
    torch.testing.assert_close(proj(x), torch.nn.functional.silu(ref))
    x2 = x.clone()
    x2[:, 4:] = 0  # the future never leaks back
    torch.testing.assert_close(proj(x2)[:, :4], proj(x)[:, :4])
    with pytest.raises(TypeError, match="must be a torch.nn.Linear"):
        ConvProjection(torch.nn.Conv1d(2, 2, 1))


def test_conv_attention_converts_only_softmax_layers():
    from llmviz.training.recall import ConvProjection, conv_attention

    torch.manual_seed(0)
    model = recall_model("hybrid", vocab_size=32, d_model=32, n_layers=2, n_heads=2)
    before = sum(p.numel() for p in model.parameters())
    conv_attention(model, kernel=4)
    attn = model.layers[1].self_attn
    assert all(isinstance(getattr(attn, n), ConvProjection) for n in ("q_proj", "k_proj", "v_proj"))
    assert model.layers[0].self_attn is None  # the Gated DeltaNet layer keeps its own conv
    assert sum(p.numel() for p in model.parameters()) == before + 3 * 32 * 4
    conv_attention(model)  # a second call changes nothing
    assert sum(p.numel() for p in model.parameters()) == before + 3 * 32 * 4
    assert model(torch.randint(0, 32, (2, 9))).logits.shape == (2, 9, 32)
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        conv_attention("model")
