"""A DecoderLM with T5's bucketed relative bias (position="t5"): the bias it adds is the position
module's, it enters the scores, cached decoding equals the full forward, bad settings are refused."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.analysis import count_parameters
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig
from llmviz.position import POSITIONS, T5Bias, T5BiasSettings, T5RelativeBias

SMALL = dict(d_model=32, n_heads=4, n_layers=2, norm="layer", ffn="mlp")


def _model(seed: int = 0, **kw) -> DecoderLM:
    torch.manual_seed(seed)
    model = DecoderLM(ModelConfig(position="t5", **{**SMALL, **kw})).eval()
    with torch.no_grad():  # a bias far from its near-zero initialisation, so errors show
        for p in model.position_bias.parameters():
            p.normal_(0.0, 1.0)
    return model


def _captured_biases(model: DecoderLM, ids: torch.Tensor, **kw) -> list[torch.Tensor]:
    seen = []

    def grab(module, args, kwargs):
        seen.append(kwargs["score_bias"])

    hooks = [layer.self_attn.register_forward_pre_hook(grab, with_kwargs=True)
             for layer in model.layers]
    with torch.no_grad():
        model(ids, **kw)
    for h in hooks:
        h.remove()
    return seen


def test_t5_is_in_the_position_registry_with_t5_defaults():
    assert "t5" in POSITIONS
    c = ModelConfig(position="t5")
    assert c.t5_bias == T5BiasSettings(num_buckets=32, max_distance=128, per_layer=False)
    assert ModelConfig().t5_bias is None  # other schemes carry no T5 settings
    # replace keeps explicit settings, and drops the automatic ones when the scheme changes
    custom = ModelConfig(position="t5", t5_bias=T5BiasSettings(num_buckets=16, max_distance=64))
    assert custom.replace(d_model=128).t5_bias == custom.t5_bias
    assert c.replace(position="alibi").t5_bias is None


@pytest.mark.parametrize("per_layer", [False, True])
def test_model_bias_is_the_position_modules_bias(gen, per_layer):
    settings = T5BiasSettings(num_buckets=8, max_distance=20, per_layer=per_layer)
    model = _model(t5_bias=settings)
    ids = torch.randint(0, 256, (2, 30), generator=gen)
    seen = _captured_biases(model, ids)
    assert len(seen) == model.config.n_layers
    for i, bias in enumerate(seen):
        ref = T5RelativeBias(4, num_buckets=8, max_distance=20, bidirectional=False)
        ref.relative_attention_bias.weight.data.copy_(model.position_bias.table(i).relative_attention_bias.weight)
        torch.testing.assert_close(bias, ref(30).detach())  # (H, T, S)
    if per_layer:
        assert not torch.equal(seen[0], seen[1])
        assert model.position_bias.table(0) is not model.position_bias.table(1)
    else:  # T5: one table, one tensor for the whole stack
        assert seen[0] is seen[1]


def test_bias_enters_the_scores_of_the_first_layer(gen):
    model = _model()
    ids = torch.randint(0, 256, (1, 24), generator=gen)
    with torch.no_grad():
        weights = model(ids, return_weights=True).weights[0]  # (1, H, T, T)
        attn = model.layers[0].self_attn
        h = model.layers[0].attn_norm(model.embed_tokens(ids))  # pre-norm input of layer 0
        q = attn.q_proj(h).view(1, 24, 4, 8).transpose(1, 2)  # (B, H, T, D)
        k = attn.k_proj(h).view(1, 24, 4, 8).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(8) + model.position_bias(24, 24)[0]
        causal = torch.ones(24, 24, dtype=torch.bool).tril()
        expected = scores.masked_fill(~causal, float("-inf")).softmax(-1)
    torch.testing.assert_close(weights, expected)


def test_bias_depends_on_the_offset_and_saturates_past_max_distance():
    model = _model(t5_bias=T5BiasSettings(num_buckets=8, max_distance=20))
    with torch.no_grad():
        bias = model.position_bias(40, 40)[0]  # (H, T, S)
    for d in range(40):  # constant along each diagonal: a function of i - j only
        diag = torch.diagonal(bias, offset=-d, dim1=-2, dim2=-1)  # (H, 40 - d)
        assert torch.equal(diag, diag[:, :1].expand_as(diag))
    last = bias[:, -1, : 40 - 20 + 1]  # distances 20..39 from the last query
    assert torch.equal(last, last[:, :1].expand_as(last))  # all in the last bucket


@pytest.mark.parametrize("per_layer", [False, True])
def test_cached_decoding_equals_the_full_forward(gen, per_layer):
    model = _model(t5_bias=T5BiasSettings(num_buckets=8, max_distance=12, per_layer=per_layer))
    ids = torch.randint(0, 256, (2, 26), generator=gen)
    with torch.no_grad():
        full = model(ids).logits
        cache = model.new_cache()
        steps = [model(ids[:, :9], cache=cache).logits]
        steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(9, 26)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_bias_trains_and_is_counted():
    model = _model()
    model.train()
    ids = torch.randint(0, 256, (2, 16))
    model(ids, labels=ids).loss.backward()
    grad = model.position_bias.shared.relative_attention_bias.weight.grad
    assert grad is not None and grad[:16].abs().sum() > 0  # the buckets these offsets reach
    assert torch.all(grad[16:] == 0)  # distances <= 15 use only the exact buckets 0..15
    for settings in (T5BiasSettings(), T5BiasSettings(num_buckets=8, max_distance=20, per_layer=True)):
        config = ModelConfig(position="t5", t5_bias=settings, **SMALL)
        closed, counted = count_parameters(config), count_parameters(DecoderLM(config))
        assert closed["by_component"] == counted["by_component"]
        tables = SMALL["n_layers"] if settings.per_layer else 1
        assert closed["by_component"]["position"] == tables * settings.num_buckets * SMALL["n_heads"]


def test_linear_layers_take_no_bias(gen):
    model = _model(linear_layers=(0,))
    assert model.position_bias.layers == (1,)
    ids = torch.randint(0, 256, (1, 10), generator=gen)
    with torch.no_grad():
        assert model(ids).logits.shape == (1, 10, 256)
    with pytest.raises(ValueError, match=r"layer 0 takes no T5 bias; layers with one: \(1,\)"):
        model.position_bias.table(0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(position="rope", t5_bias=T5BiasSettings()), ValueError,
         r"t5_bias is set but position='rope'; it only applies to position='t5'"),
        (dict(position="t5", t5_bias=42), TypeError, "t5_bias must be a T5BiasSettings, a mapping"),
        (dict(position="t5", t5_bias={"buckets": 8}), ValueError, r"t5_bias has unknown fields \['buckets'\]"),
    ],
)
def test_config_refuses_bad_t5_settings(kwargs, error, match):
    with pytest.raises(error, match=match):
        ModelConfig(**kwargs)


def test_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="t5_bias.num_buckets must be a positive int"):
        T5BiasSettings(num_buckets=0)
    with pytest.raises(ValueError, match="num_buckets must be an integer >= 2, got 1"):
        T5BiasSettings(num_buckets=1)
    with pytest.raises(ValueError, match=r"max_distance \(8\) must exceed the 16 exact buckets"):
        T5BiasSettings(num_buckets=32, max_distance=8)
    with pytest.raises(TypeError, match="t5_bias.per_layer must be a bool, got 'yes'"):
        T5BiasSettings(per_layer="yes")
    with pytest.raises(TypeError, match="settings must be a T5BiasSettings, got dict"):
        T5Bias(4, (0,), {"num_buckets": 8})


def test_bias_matches_hugging_face_decoder_bias():
    transformers = pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    cfg = transformers.T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=8,
                                relative_attention_max_distance=20, is_decoder=True)
    hf = T5Attention(cfg, has_relative_attention_bias=True)
    model = _model(t5_bias=T5BiasSettings(num_buckets=8, max_distance=20))
    model.position_bias.shared.relative_attention_bias.weight.data.copy_(hf.relative_attention_bias.weight)
    with torch.no_grad():
        expected = hf.compute_bias(40, 40)[0]  # (H, T, S), causal buckets
        torch.testing.assert_close(model.position_bias(40, 40)[0], expected)
        torch.testing.assert_close(model.position_bias(3, 40)[1], expected[:, -3:])  # cached queries
