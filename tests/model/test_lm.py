"""ModelConfig validation, TransformerBlock equations, DecoderLM behaviour, generate, presets."""

from __future__ import annotations

import pytest
import torch

from llmviz.analysis import count_parameters
from llmviz.ffn import glu_hidden_size
from llmviz.model import DecoderLM, LMOutput, generate, softcap
from llmviz.model.block import TransformerBlock
from llmviz.model.config import ModelConfig
from llmviz.model.presets import PRESETS, preset

PLACEMENT_CASES = [
    ("pre", False), ("pre", True), ("post", False), ("post", True),
    ("sandwich", False), ("sandwich", True), ("deepnorm", False),
]


def _ids(gen, B=2, T=12, V=256):
    return torch.randint(0, V, (B, T), generator=gen)


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(d_model=65, n_heads=4), ValueError, r"d_model \(65\) must be divisible by n_heads \(4\)"),
        (dict(n_heads=6, n_kv_heads=4, d_model=48), ValueError, r"n_heads \(6\) must be divisible by n_kv_heads \(4\)"),
        (dict(position="rotary"), ValueError, "position='rotary' is not supported"),
        (dict(norm="batch"), ValueError, "norm='batch' is not supported"),
        (dict(placement="middle"), ValueError, "placement='middle' is not supported"),
        (dict(ffn="moe"), ValueError, "ffn='moe' is not supported"),
        (dict(activation="tanh"), ValueError, "activation='tanh' is not supported"),
        (dict(qk_norm="l2"), ValueError, "qk_norm='l2' is not supported"),
        (dict(n_layers=0), ValueError, "n_layers must be a positive int"),
        (dict(d_model=64.0), TypeError, "d_model must be an int"),
        (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
        (dict(z_loss_weight=-1.0), ValueError, "z_loss_weight must be non-negative, got -1.0"),
        (dict(attn_softcap=0.0), ValueError, "attn_softcap must be positive"),
        (dict(final_softcap=float("inf")), ValueError, "final_softcap must be finite, got inf"),
        (dict(query_pre_attn_scalar=float("nan")), ValueError, "query_pre_attn_scalar must be finite, got nan"),
        (dict(z_loss_weight=float("nan")), ValueError, "z_loss_weight must be finite, got nan"),
        (dict(n_heads=True), TypeError, "n_heads must be an int, got bool True"),
        (dict(rotary_dim=8.0), TypeError, "rotary_dim must be an int, got float 8.0"),
        (dict(global_every=2), ValueError, "global_every .* needs sliding_window"),
        (dict(rotary_dim=7), ValueError, "rotary_dim .* must be even"),
        (dict(position="alibi", rotary_dim=8), ValueError, "rotary_dim .* only applies to position='rope'"),
        (dict(placement="deepnorm", parallel=True), ValueError, "deepnorm.* serial blocks only"),
        (dict(head_dim=15, n_heads=4), ValueError, "head_dim .* must be even"),
    ],
)
def test_config_rejects_bad_values(kwargs, error, match):
    with pytest.raises(error, match=match):
        ModelConfig(**kwargs)


def test_config_resolves_derived_fields():
    c = ModelConfig(d_model=96, n_heads=6, ffn="swiglu")
    assert c.n_kv_heads == 6 and c.head_dim == 16 and c.d_ff == glu_hidden_size(96, multiple_of=8)
    assert ModelConfig(ffn="mlp").d_ff == 4 * 64
    wider = c.replace(d_model=192)
    assert wider.head_dim == 32 and wider.d_ff == glu_hidden_size(192, multiple_of=8)
    # explicit head_dim survives replace
    g = ModelConfig(d_model=64, n_heads=4, head_dim=32).replace(n_layers=3)
    assert g.head_dim == 32 and g.n_layers == 3
    with pytest.raises(AttributeError):
        c.d_model = 5  # frozen


def test_glu_hidden_matches_mlp_params():
    for d in (64, 256, 4096):
        h = glu_hidden_size(d, multiple_of=1)
        assert abs(3 * d * h - 2 * d * 4 * d) <= 3 * d  # equal up to rounding


def test_deepnorm_constants():
    c = ModelConfig(n_layers=8, placement="deepnorm")
    assert c.deepnorm_alpha == pytest.approx(16 ** 0.25)
    assert c.deepnorm_beta == pytest.approx(64 ** -0.25)


def test_window_for_alternates():
    c = ModelConfig(n_layers=4, sliding_window=8, global_every=2)
    assert [c.window_for(i) for i in range(4)] == [8, None, 8, None]


# ----------------------------------------------------------------------------- block equations
def _block(placement, parallel, **kw):
    torch.manual_seed(0)
    return TransformerBlock(32, 4, d_ff=64, norm="layer", placement=placement, parallel=parallel,
                            ffn="mlp", **kw).eval()


def test_pre_norm_serial_equation(gen):
    b = _block("pre", False)
    x = torch.randn(2, 5, 32, generator=gen)
    h = x + b.self_attn(b.attn_norm(x))
    torch.testing.assert_close(b(x), h + b.mlp(b.ffn_norm(h)))


def test_parallel_equation_keeps_attention_residual(gen):
    b = _block("pre", True)
    assert b.ffn_norm is None  # one shared norm
    x = torch.randn(2, 5, 32, generator=gen)
    h = b.attn_norm(x)
    torch.testing.assert_close(b(x), x + b.self_attn(h) + b.mlp(h))


def test_sandwich_equation(gen):
    b = _block("sandwich", False)
    x = torch.randn(2, 5, 32, generator=gen)
    h = x + b.post_attn_norm(b.self_attn(b.attn_norm(x)))
    torch.testing.assert_close(b(x), h + b.post_ffn_norm(b.mlp(b.ffn_norm(h))))


def test_post_and_deepnorm_equations(gen):
    x = torch.randn(2, 5, 32, generator=gen)
    for placement, alpha in (("post", 1.0), ("deepnorm", 2.0)):
        b = _block(placement, False, deepnorm_alpha=2.0)
        assert b.alpha == alpha
        h = b.attn_norm(alpha * x + b.self_attn(x))
        y = b.ffn_norm(alpha * h + b.mlp(h))
        torch.testing.assert_close(b(x), y)
        # a post-norm output is normalised per token (LayerNorm with unit gain, zero bias)
        out = b(x)
        torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)


def test_block_passes_softcap_and_qk_norm():
    b = TransformerBlock(32, 4, d_ff=64, qk_norm="rms", attn_softcap=5.0)
    assert b.self_attn.softcap == 5.0 and b.self_attn.q_norm is not None


def test_deepnorm_init_scales_weights():
    c = ModelConfig(n_layers=8, placement="deepnorm", ffn="mlp")
    ref = DecoderLM(c.replace(placement="post"))
    torch.manual_seed(0)
    a = DecoderLM(c)
    beta = c.deepnorm_beta
    v_std = (a.layers[0].self_attn.v_proj.weight.std() / ref.layers[0].self_attn.v_proj.weight.std()).item()
    q_std = (a.layers[0].self_attn.q_proj.weight.std() / ref.layers[0].self_attn.q_proj.weight.std()).item()
    assert v_std == pytest.approx(beta, rel=0.15)
    assert q_std == pytest.approx(1.0, rel=0.15)


# ----------------------------------------------------------------------------- model
@pytest.mark.parametrize(("placement", "parallel"), PLACEMENT_CASES)
def test_forward_shapes_and_weights(placement, parallel, gen, device):
    c = ModelConfig(placement=placement, parallel=parallel, n_kv_heads=2, n_layers=3)
    m = DecoderLM(c).to(device).eval()
    x = _ids(gen).to(device)
    out = m(x, return_weights=True, labels=x)
    assert isinstance(out, LMOutput)
    assert out.logits.shape == (2, 12, 256)
    assert len(out.weights) == 3 and out.weights[0].shape == (2, 4, 12, 12)
    torch.testing.assert_close(out.weights[1].sum(-1), torch.ones(2, 4, 12, device=device))
    assert torch.isfinite(out.loss)
    assert (m.norm is not None) == (placement in ("pre", "sandwich"))


@pytest.mark.parametrize("position", ["none", "learned", "sinusoidal", "rope", "alibi"])
def test_causal_no_future_leak(position, gen):
    m = DecoderLM(ModelConfig(position=position)).eval()
    x = _ids(gen)
    y = x.clone()
    y[:, 8:] = (y[:, 8:] + 1) % 256
    torch.testing.assert_close(m(x).logits[:, :8], m(y).logits[:, :8])


@pytest.mark.parametrize("name", list(PRESETS))
def test_kv_cache_decode_equals_full_forward(name, gen, device):
    m = DecoderLM(preset(name)).to(device).eval()
    x = _ids(gen, T=24).to(device)  # longer than the toy sliding windows (16)
    full = m(x).logits
    cache = m.new_cache()
    parts = [m(x[:, :10], cache=cache).logits]
    for t in range(10, 24):
        parts.append(m(x[:, t : t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=2e-5, rtol=1e-4)
    assert cache.length() == 24


def test_loss_is_shifted_cross_entropy_plus_z_loss(gen):
    c = ModelConfig(z_loss_weight=1e-2)
    m = DecoderLM(c).eval()
    x = _ids(gen)
    out = m(x, labels=x)
    logits = out.logits[:, :-1]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))
    z = torch.logsumexp(logits, -1).pow(2).mean()
    torch.testing.assert_close(out.loss, ce + 1e-2 * z)
    labels = x.clone()
    labels[:, :6] = -100
    partial = m(x, labels=labels).loss
    ce_part = torch.nn.functional.cross_entropy(logits[:, 5:].reshape(-1, 256), x[:, 6:].reshape(-1))
    z_part = torch.logsumexp(logits[:, 5:], -1).pow(2).mean()
    torch.testing.assert_close(partial, ce_part + 1e-2 * z_part)


def test_final_softcap_bounds_logits(gen):
    m = DecoderLM(ModelConfig(final_softcap=2.0, init_std=1.0)).eval()
    x = _ids(gen)
    logits = m(x).logits
    raw = DecoderLM(ModelConfig(init_std=1.0))
    raw.load_state_dict(m.state_dict())
    assert raw.eval()(x).logits.abs().max() > 2.0  # the cap has something to do
    assert logits.abs().max() <= 2.0
    x = torch.linspace(-100, 100, 11)
    assert torch.all(softcap(x, 3.0).abs() <= 3.0)
    assert torch.all(softcap(x, 3.0).diff() >= 0)  # monotone
    torch.testing.assert_close(softcap(torch.tensor([1e-3]), 3.0), torch.tensor([1e-3]), rtol=1e-5, atol=0)


def test_tied_embeddings_share_storage():
    m = DecoderLM(ModelConfig(tie_embeddings=True))
    assert m.lm_head.weight is m.embed_tokens.weight
    u = DecoderLM(ModelConfig(tie_embeddings=False))
    assert u.lm_head.weight is not u.embed_tokens.weight


def test_right_padding_does_not_change_real_tokens(gen):
    m = DecoderLM(ModelConfig()).eval()
    x = _ids(gen, B=1, T=8)
    padded = torch.cat([x, torch.zeros(1, 4, dtype=torch.long)], 1)
    mask = torch.tensor([[1] * 8 + [0] * 4])
    torch.testing.assert_close(m(padded, attention_mask=mask).logits[:, :8], m(x).logits)


def test_attention_mask_hides_padded_keys(gen):
    m = DecoderLM(ModelConfig()).eval()
    x = _ids(gen, B=2, T=8)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 2] = 0
    w = m(x, attention_mask=mask, return_weights=True).weights
    assert torch.all(w[0][1, :, 3:, 2] == 0) and torch.all(w[0][0, :, 3:, 2] > 0)


def test_deterministic_under_seed(gen):
    x = _ids(gen)
    torch.manual_seed(5)
    a = DecoderLM(ModelConfig())(x).logits
    torch.manual_seed(5)
    b = DecoderLM(ModelConfig())(x).logits
    assert torch.equal(a, b)


def test_forward_errors(gen):
    m = DecoderLM(ModelConfig(position="learned", max_seq_len=16))
    with pytest.raises(ValueError, match="past max_seq_len"):
        m(_ids(gen, T=20))
    with pytest.raises(TypeError, match="integer token ids"):
        m(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="must have 2 dimensions"):
        m(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 5\)"):
        m(_ids(gen, T=6), attention_mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="labels .* must match"):
        m(_ids(gen, T=6), labels=_ids(gen, T=5))
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        DecoderLM({"d_model": 64})


# ----------------------------------------------------------------------------- generate
@pytest.mark.parametrize("name", ["llama2", "gpt2", "mistral", "bloom"])
def test_generate_cached_equals_uncached(name, gen, device):
    m = DecoderLM(preset(name)).to(device)
    prompt = _ids(gen, B=2, T=5).to(device)
    kw = dict(max_new_tokens=20, temperature=0.9, top_p=0.9, top_k=50)
    a = generate(m, prompt, generator=torch.Generator().manual_seed(1), **kw)
    b = generate(m, prompt, generator=torch.Generator().manual_seed(1), use_cache=False, **kw)
    assert a.shape == (2, 25)
    assert torch.equal(a, b)
    assert torch.equal(a[:, :5], prompt)
    assert m.training  # mode restored


def test_generate_greedy_follows_argmax(gen):
    m = DecoderLM(ModelConfig()).eval()
    prompt = _ids(gen, B=1, T=4)
    out = generate(m, prompt, max_new_tokens=3, temperature=0)
    for t in range(4, 7):
        assert out[0, t] == m(out[:, :t]).logits[0, -1].argmax()
    custom = generate(m, prompt, max_new_tokens=2, sampler=lambda logits: torch.full((1,), 7))
    assert custom[0, 4:].tolist() == [7, 7]


def test_config_validates_against_the_owning_registries():
    from llmviz.attention.module import QK_NORMS
    from llmviz.ffn import FFN_ACTIVATIONS, FFN_KINDS
    from llmviz.model.block import PLACEMENTS
    from llmviz.norm import MODEL_NORMS
    from llmviz.position import POSITIONS

    assert QK_NORMS == (None, *MODEL_NORMS)  # derived, never listed twice
    for position in POSITIONS:
        assert ModelConfig(position=position).position == position
    for norm in MODEL_NORMS:
        assert ModelConfig(norm=norm, qk_norm=norm).qk_norm == norm
    for placement in PLACEMENTS:
        assert ModelConfig(placement=placement).placement == placement
    for ffn in FFN_KINDS:
        for act in FFN_ACTIVATIONS:
            assert ModelConfig(ffn=ffn, activation=act).activation == act
    with pytest.raises(ValueError, match=r"norm='batch' is not supported; choose one of \('layer'"):
        ModelConfig(norm="batch")  # a sequence norm: in the norm registry, not a model norm


def test_generate_errors(gen):
    m = DecoderLM(ModelConfig(position="learned", max_seq_len=8))
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        generate(m, _ids(gen, T=5), max_new_tokens=4)
    with pytest.raises(ValueError, match="max_new_tokens must be a non-negative int, got -1"):
        generate(m, _ids(gen, T=5), max_new_tokens=-1)


# ----------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_and_runs(name, gen):
    c = preset(name)
    m = DecoderLM(c).eval()
    x = _ids(gen)
    out = m(x, labels=x)
    assert out.logits.shape == (2, 12, c.vocab_size)
    assert abs(out.loss.item() - torch.log(torch.tensor(256.0)).item()) < 1.0  # near uniform at init
    assert count_parameters(m)["total"] == sum(p.numel() for p in m.parameters())


def test_presets_keep_their_architecture():
    assert preset("gptj").parallel and preset("palm").parallel and not preset("bloom").parallel
    assert preset("bloom").position == "alibi" and preset("gpt2").position == "learned"
    g = preset("gemma2")
    assert g.placement == "sandwich" and g.attn_softcap and g.final_softcap and g.norm == "rms_gemma"
    assert preset("mistral", "7b").n_kv_heads == 8 and preset("mistral", "7b").sliding_window == 4096
    assert preset("llama2", "7b").n_kv_heads == 32 and preset("llama2", "70b").n_kv_heads == 8
    assert preset("llama2", d_model=128).d_model == 128  # overrides apply


@pytest.mark.parametrize(
    ("name", "size", "published", "rel"),
    [("gpt2", "small", 124e6, 0.01), ("gpt2", "xl", 1.558e9, 0.01), ("llama2", "7b", 6.74e9, 0.01),
     ("llama2", "70b", 68.98e9, 0.01), ("mistral", "7b", 7.24e9, 0.01), ("gemma2", "9b", 9.24e9, 0.01),
     ("bloom", "176b", 176.2e9, 0.01), ("palm", "540b", 540.35e9, 0.01), ("gptj", "6b", 6.05e9, 0.01)],
)
def test_real_sizes_match_published_counts(name, size, published, rel):
    assert count_parameters(preset(name, size))["total"] == pytest.approx(published, rel=rel)


def test_unknown_preset_and_size():
    with pytest.raises(ValueError, match="unknown preset 'gpt5'"):
        preset("gpt5")
    with pytest.raises(ValueError, match="llama2 has no size '8b'"):
        preset("llama2", "8b")


def test_query_pre_attn_scalar_sets_the_attention_scale():
    c = ModelConfig(d_model=64, n_heads=4, query_pre_attn_scalar=144.0)
    assert c.attn_scale == pytest.approx(144 ** -0.5)
    assert ModelConfig(d_model=64, n_heads=4).attn_scale is None
    from llmviz.model import DecoderLM

    model = DecoderLM(c)
    assert model.layers[0].self_attn.scale == pytest.approx(144 ** -0.5)
    with pytest.raises(ValueError, match="query_pre_attn_scalar"):
        ModelConfig(d_model=64, n_heads=4, query_pre_attn_scalar=0.0)
