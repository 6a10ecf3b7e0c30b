"""RoPE: rotation properties, layouts, partial rotary, scaling, and parity with Hugging Face.

The parity tests target transformers 5.x (the project requires >= 5.0; 4.x is not supported here):
the rotary classes take no ``device=``, ``ROPE_INIT_FUNCTIONS`` has no ``"default"`` (each model's
``<Model>RotaryEmbedding.compute_default_rope_parameters`` computes it), the base lives in
``config.rope_parameters["rope_theta"]``, and a config stores (and fills in) the very dict passed as
``rope_scaling``, so every dict is copied before it reaches a config.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.position.rope import (
    LAYOUTS,
    RopeScaling,
    apply_rope,
    apply_rotary,
    interleaved_to_half_permutation,
    rope_cos_sin,
    rope_frequencies,
)
from llmviz.position.rope_scaling import HF_ROPE_TYPES
from llmviz.position.rotary import RotaryEmbedding

transformers = pytest.importorskip("transformers")
from transformers import GPTNeoXConfig, LlamaConfig, Phi3Config  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.phi3 import modeling_phi3  # noqa: E402


def _qk(gen, shape=(2, 3, 16, 32), dtype=torch.float64):
    return torch.randn(*shape, generator=gen, dtype=dtype), torch.randn(*shape, generator=gen, dtype=dtype)


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 16])
def test_rope_preserves_norms(gen, layout, rotary_dim):
    x = torch.randn(2, 4, 50, 32, generator=gen, dtype=torch.float64)
    pos = torch.arange(50) * 37  # large, irregular positions
    y = apply_rope(x, pos, layout=layout, rotary_dim=rotary_dim)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    assert not torch.allclose(y, x)  # something did rotate


def test_rope_is_identity_at_position_zero(gen):
    x = torch.randn(1, 2, 1, 16, generator=gen)
    torch.testing.assert_close(apply_rope(x, torch.tensor([0])), x)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(-3000, 3000),
    layout=st.sampled_from(LAYOUTS),
    base=st.sampled_from([100.0, 10000.0, 500000.0]),
    seed=st.integers(0, 2**16),
)
def test_score_depends_only_on_offset(m, n, shift, layout, base, seed):
    if min(m, n) + shift < 0:
        shift = -min(m, n)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 1, 16, generator=g, dtype=torch.float64)

    inv_freq = rope_frequencies(16, base=base)[0].double()  # float64 angles: exact check

    def score(a: int, b: int) -> float:
        qa = apply_rotary(q, *rope_cos_sin(torch.tensor([a]), inv_freq, layout=layout), layout=layout)
        kb = apply_rotary(k, *rope_cos_sin(torch.tensor([b]), inv_freq, layout=layout), layout=layout)
        return float((qa * kb).sum())

    assert math.isclose(score(m, n), score(m + shift, n + shift), rel_tol=1e-9, abs_tol=1e-9)
    # the float32 default path agrees to float32 angle precision
    q32 = apply_rope(q.float(), torch.tensor([m]), base=base, layout=layout)
    k32 = apply_rope(k.float(), torch.tensor([n]), base=base, layout=layout)
    assert math.isclose(float((q32 * k32).sum()), score(m, n), abs_tol=5e-2)


def test_score_is_not_preserved_across_offsets(gen):
    """RoPE preserves norms, not inner products: q.k changes with the offset."""
    q, k = _qk(gen, (1, 1, 1, 64))
    raw = float((q * k).sum())
    rotated = [
        float((apply_rope(q, torch.tensor([d])) * apply_rope(k, torch.tensor([0]))).sum())
        for d in range(1, 6)
    ]
    assert all(abs(r - raw) > 1e-3 for r in rotated)


@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_layouts_agree_after_permutation(gen, rotary_dim):
    x = torch.randn(2, 3, 20, 24, generator=gen, dtype=torch.float64)
    pos = torch.arange(100, 120)
    perm = interleaved_to_half_permutation(24, rotary_dim=rotary_dim)
    inter = apply_rope(x, pos, layout="interleaved", rotary_dim=rotary_dim)
    half = apply_rope(x[..., perm], pos, layout="half", rotary_dim=rotary_dim)
    torch.testing.assert_close(half, inter[..., perm])
    assert sorted(perm.tolist()) == list(range(24))


def test_layouts_differ_without_permutation(gen):
    x = torch.randn(1, 1, 5, 16, generator=gen)
    pos = torch.arange(1, 6)
    assert not torch.allclose(apply_rope(x, pos, layout="half"), apply_rope(x, pos, layout="interleaved"))


def test_interleaved_equals_complex_multiplication(gen):
    x = torch.randn(7, 16, generator=gen, dtype=torch.float64)
    pos = torch.arange(7) * 3
    inv_freq, _ = rope_frequencies(16)
    z = torch.view_as_complex(x.reshape(7, 8, 2).contiguous())
    rotated = z * torch.polar(torch.ones(7, 8, dtype=torch.float64), pos[:, None] * inv_freq.double())
    expected = torch.view_as_real(rotated).reshape(7, 16)
    torch.testing.assert_close(apply_rope(x, pos, layout="interleaved"), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_partial_rotary_passes_tail_through(gen, layout):
    x = torch.randn(1, 2, 9, 32, generator=gen)
    y = apply_rope(x, torch.arange(9) + 5, layout=layout, rotary_dim=8)
    torch.testing.assert_close(y[..., 8:], x[..., 8:])
    assert not torch.allclose(y[..., :8], x[..., :8])


def test_offsets_match_full_sequence(gen):
    """Rotating the last 4 tokens at positions 12..15 equals slicing a full rotation (KV cache)."""
    x = torch.randn(2, 2, 16, 16, generator=gen)
    full = apply_rope(x)
    tail = apply_rope(x[:, :, 12:], torch.arange(12, 16))
    torch.testing.assert_close(tail, full[:, :, 12:])


def test_per_sequence_positions(gen):
    x = torch.randn(2, 3, 4, 16, generator=gen)
    pos = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    y = apply_rope(x, pos)
    torch.testing.assert_close(y[1:], apply_rope(x[1:], pos[1]))
    torch.testing.assert_close(y[:1], apply_rope(x[:1], pos[0]))


def test_rotary_embedding_module(gen):
    rope = RotaryEmbedding(16, base=500000.0, layout="interleaved")
    q = torch.randn(2, 4, 6, 16, generator=gen)
    k = torch.randn(2, 2, 6, 16, generator=gen)
    pos = torch.arange(3, 9)
    q2, k2 = rope(q, k, pos)
    torch.testing.assert_close(q2, apply_rope(q, pos, base=500000.0, layout="interleaved"))
    torch.testing.assert_close(k2, apply_rope(k, pos, base=500000.0, layout="interleaved"))
    assert "inv_freq" not in rope.state_dict()


def test_rope_keeps_dtype_and_gradients(gen):
    x = torch.randn(1, 1, 4, 8, generator=gen, dtype=torch.bfloat16)
    assert apply_rope(x).dtype == torch.bfloat16
    y = torch.randn(1, 1, 4, 8, generator=gen, requires_grad=True)
    apply_rope(y, torch.arange(4) + 3).square().sum().backward()
    # the rotation is orthogonal: d|Ry|^2/dy = 2y
    torch.testing.assert_close(y.grad, 2 * y.detach())


# ----------------------------------------------------------------------------- HF parity
def _hf_family(family: str, D: int, partial: float):
    """(rotary module, apply_rotary_pos_emb) of one Hugging Face family, base 10000, head dim D.

    Llama rotates whole heads (its transformers 5 default ignores partial_rotary_factor); Phi-3
    and GPT-NeoX rotate the first ``partial * D`` features and pass the rest through.
    """
    if family == "llama":
        assert partial == 1.0
        cfg = LlamaConfig(hidden_size=4 * D, num_attention_heads=4, head_dim=D, rope_theta=10000.0)
        return modeling_llama.LlamaRotaryEmbedding(cfg), modeling_llama.apply_rotary_pos_emb
    if family == "phi3":
        cfg = Phi3Config(hidden_size=4 * D, num_attention_heads=4, rope_theta=10000.0,
                         partial_rotary_factor=partial)
        return modeling_phi3.Phi3RotaryEmbedding(cfg), modeling_phi3.apply_rotary_pos_emb
    cfg = GPTNeoXConfig(hidden_size=4 * D, num_attention_heads=4, rope_theta=10000.0,
                        rotary_pct=partial)
    return modeling_gpt_neox.GPTNeoXRotaryEmbedding(cfg), modeling_gpt_neox.apply_rotary_pos_emb


@pytest.mark.parametrize("family,partial", [("llama", 1.0), ("phi3", 1.0), ("phi3", 0.5),
                                            ("gpt_neox", 0.25)])
def test_apply_rotary_matches_hf(device, gen, family, partial):
    D = 64
    R = int(D * partial)
    q, k = _qk(gen, (2, 4, 10, D), dtype=torch.float32)
    q, k = q.to(device), k.to(device)
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [7, 8, 9, 10, 11, 12, 13, 14, 15, 16]],
                       device=device)
    hf_rope, hf_apply = _hf_family(family, D, partial)
    cos, sin = hf_rope.to(device)(q, pos)  # (B, T, R)
    assert cos.shape == (2, 10, R)
    hq, hk = hf_apply(q, k, cos, sin)  # rotates the first R features, passes D - R through
    ours = RotaryEmbedding(D, rotary_dim=R).to(device)
    oq, ok = ours(q, k, pos)
    torch.testing.assert_close(oq, hq)
    torch.testing.assert_close(ok, hk)
    # and the pure rotation with HF's own cos/sin tables
    torch.testing.assert_close(apply_rotary(q, cos, sin), hq)
    torch.testing.assert_close(apply_rotary(k, cos, sin), hk)


_HF_SCALINGS = {
    "default": None,
    "linear": dict(rope_type="linear", factor=4.0),
    "dynamic": dict(rope_type="dynamic", factor=2.0),
    "yarn": dict(rope_type="yarn", factor=8.0, original_max_position_embeddings=128),
    "yarn_mscale": dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128,
                        mscale=0.707, mscale_all_dim=1.0, beta_fast=16.0, beta_slow=2.0),
    "yarn_untruncated": dict(rope_type="yarn", factor=16.0, original_max_position_embeddings=128,
                             truncate=False, attention_factor=1.3),
    "llama3": dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=128),
    # partial_rotary_factor: the config's (parametrized) or, as Gemma 4 writes it, the dict's own
    "proportional": dict(rope_type="proportional", factor=2.0),
    "proportional_gemma4": dict(rope_type="proportional", partial_rotary_factor=0.25),
}
# transformers 5 rope types RopeScaling does not compute; from_hf must refuse them by name
_HF_REFUSED = {
    "longrope": dict(rope_type="longrope", long_factor=[1.0] * 32, short_factor=[1.0] * 32,
                     original_max_position_embeddings=64),
}


def _scaling_dict(name: str) -> dict | None:
    """A fresh copy: a transformers 5 config writes rope_theta (and more) into the dict it gets."""
    rs = _HF_SCALINGS[name]
    return None if rs is None else dict(rs)


def _hf_inv_freq(cfg, kind: str, device, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """Hugging Face's (inv_freq, attention_factor) for ``cfg``.

    transformers 5 has no ``ROPE_INIT_FUNCTIONS["default"]``: the unscaled frequencies come from
    each model's rotary class. Llama's ignores ``partial_rotary_factor``, so a partial config
    is checked against Phi-3's, which honours it.
    """
    if kind != "default":
        return ROPE_INIT_FUNCTIONS[kind](cfg, device, seq_len=seq_len)
    if cfg.rope_parameters.get("partial_rotary_factor", 1.0) == 1.0:
        inv, factor = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    else:
        inv, factor = modeling_phi3.Phi3RotaryEmbedding.compute_default_rope_parameters(cfg)
    return inv.to(device), factor


def _our_scaling(rs: dict | None, max_pos: int, partial: float = 1.0) -> RopeScaling | None:
    if rs is None:
        return None
    if rs["rope_type"] == "proportional":  # its partial_rotary_factor is the turning share
        return RopeScaling("proportional", factor=rs.get("factor", 1.0),
                           rotated_fraction=rs.get("partial_rotary_factor", partial))
    kw = {k: v for k, v in rs.items() if k != "rope_type"}
    kw.setdefault("original_max_position_embeddings", max_pos)
    return RopeScaling(rs["rope_type"], **kw)


@pytest.mark.parametrize("name", list(_HF_SCALINGS))
@pytest.mark.parametrize("partial", [1.0, 0.5])
@pytest.mark.parametrize("seq_len", [None, 100, 1000])
def test_frequencies_match_every_hf_rope_type(device, name, partial, seq_len):
    rs = _scaling_dict(name)
    max_pos = 128
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, rope_theta=20000.0,
                      max_position_embeddings=max_pos, rope_scaling=None if rs is None else dict(rs),
                      partial_rotary_factor=partial)
    assert cfg.rope_parameters["rope_theta"] == 20000.0
    assert cfg.rope_parameters["partial_rotary_factor"] == (rs or {}).get("partial_rotary_factor",
                                                                           partial)
    kind = "default" if rs is None else rs["rope_type"]
    hf_inv, hf_factor = _hf_inv_freq(cfg, kind, device, seq_len)
    # proportional keeps the whole head and stops pairs instead of passing features through
    rotary_dim = 64 if kind == "proportional" else int(64 * partial)
    assert hf_inv.shape == (rotary_dim // 2,)
    scaling = _our_scaling(rs, max_pos, partial)
    inv, factor = rope_frequencies(64, base=20000.0, rotary_dim=rotary_dim,
                                   scaling=scaling, seq_len=seq_len, device=device)
    assert inv.device.type == torch.device(device).type
    torch.testing.assert_close(inv, hf_inv, rtol=1e-6, atol=0)
    assert factor == pytest.approx(hf_factor)
    if scaling is not None:
        assert scaling.to_hf()["rope_type"] == kind
    if kind == "proportional":
        turning = int(scaling.rotated_fraction * 64 // 2)
        assert torch.all(inv[:turning] > 0) and torch.all(inv[turning:] == 0)


@pytest.mark.parametrize("name", list(_HF_SCALINGS) + ["yarn_no_original", "yarn_no_factor",
                                                       "legacy_type_key"])
@pytest.mark.parametrize("source", ["config", "dict"])
def test_from_hf_reproduces_hf_frequencies(name, source):
    rs = {"yarn_no_original": dict(rope_type="yarn", factor=4.0),
          "yarn_no_factor": dict(rope_type="yarn", factor=None, original_max_position_embeddings=32),
          "legacy_type_key": dict(type="linear", factor=2.0)}.get(name) or _scaling_dict(name)
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, rope_theta=30000.0,
                      max_position_embeddings=96, rope_scaling=None if rs is None else dict(rs))
    kind = cfg.rope_parameters["rope_type"]
    assert kind == ("default" if rs is None else rs.get("rope_type", rs.get("type")))
    hf_inv, hf_factor = _hf_inv_freq(cfg, kind, "cpu", 500)
    before = dict(cfg.rope_parameters)
    if source == "config":
        scaling, base = RopeScaling.from_hf(cfg), RopeScaling.base_from_hf(cfg)
    else:
        params = cfg.rope_parameters
        scaling = RopeScaling.from_hf(params, max_position_embeddings=96)
        base = RopeScaling.base_from_hf(params)
    assert cfg.rope_parameters == before  # read, never written
    assert base == 30000.0
    assert (scaling is None) == (rs is None)
    inv, factor = rope_frequencies(64, base=base, scaling=scaling, seq_len=500)
    torch.testing.assert_close(inv, hf_inv, rtol=1e-6, atol=0)
    assert factor == pytest.approx(hf_factor)


def test_from_hf_keeps_llama3_base_and_matches_hf_module():
    """Llama 3.1: base 500 000 sits in rope_parameters next to the llama3 scaling; it must not
    fall back to 10 000 anywhere on the way."""
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, rope_theta=500000.0,
                      max_position_embeddings=1024, rope_scaling=_scaling_dict("llama3"))
    assert "rope_theta" not in _HF_SCALINGS["llama3"]  # the shared dict stayed untouched
    base, scaling = RopeScaling.base_from_hf(cfg), RopeScaling.from_hf(cfg)
    assert base == 500000.0
    assert RopeScaling.base_from_hf(cfg.rope_parameters) == 500000.0
    assert scaling == RopeScaling("llama3", factor=8.0, original_max_position_embeddings=128)
    hf_rope = modeling_llama.LlamaRotaryEmbedding(cfg)
    ours = RotaryEmbedding(64, base=base, scaling=scaling)
    torch.testing.assert_close(ours.inv_freq, hf_rope.inv_freq, rtol=1e-6, atol=0)
    x = torch.randn(1, 4, 6, 64, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(6)[None] * 150
    cos, sin = hf_rope(x, pos)
    hq, _ = modeling_llama.apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(ours(x, x, pos)[0], hq)
    # the default base would rotate differently: the check above is not vacuous
    assert not torch.allclose(RotaryEmbedding(64, scaling=scaling).inv_freq, hf_rope.inv_freq)


def test_proportional_matches_gemma4_rotary_module(gen):
    """Gemma 4's full-attention layers: base 1e6, a 64-wide global head, a quarter of the pairs
    turning, read from the nested per-layer-type rope_parameters."""
    from transformers.models.gemma4 import modeling_gemma4
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig

    cfg = Gemma4TextConfig(
        hidden_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        global_head_dim=64, num_hidden_layers=2, vocab_size=64, max_position_embeddings=256,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                               "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
    )
    with pytest.raises(ValueError, match=r"nested by layer type"):
        RopeScaling.from_hf(cfg)
    params = cfg.rope_parameters["full_attention"]
    scaling = RopeScaling.from_hf(params, max_position_embeddings=256)
    assert scaling == RopeScaling("proportional", rotated_fraction=0.25)
    assert scaling.to_hf() == {"rope_type": "proportional", "factor": 1.0,
                               "partial_rotary_factor": 0.25}
    base = RopeScaling.base_from_hf(params)
    assert base == 1_000_000.0
    hf_rope = modeling_gemma4.Gemma4TextRotaryEmbedding(cfg)
    ours = RotaryEmbedding(64, base=base, scaling=scaling)
    torch.testing.assert_close(ours.inv_freq, hf_rope.full_attention_inv_freq, rtol=1e-6, atol=0)
    q = torch.randn(2, 2, 7, 64, generator=gen)
    pos = torch.arange(7)[None].expand(2, 7) * 31
    cos, sin = hf_rope(q, pos, "full_attention")  # (B, T, D): the whole head
    hq = modeling_gemma4.apply_rotary_pos_emb(q, cos, sin)
    torch.testing.assert_close(ours(q, q, pos)[0], hq)
    # the 24 stopped pairs (features 8..31 and 40..63 in the half layout) are left as they were
    still = torch.cat((torch.arange(8, 32), torch.arange(40, 64)))
    torch.testing.assert_close(hq[..., still], q[..., still])


def test_from_hf_reads_transformers4_style_configs():
    """A config object without rope_parameters: rope_theta and rope_scaling are attributes."""
    from types import SimpleNamespace

    old = SimpleNamespace(rope_theta=500000.0, max_position_embeddings=64,
                          rope_scaling={"type": "dynamic", "factor": 2.0})
    assert RopeScaling.base_from_hf(old) == 500000.0
    assert RopeScaling.from_hf(old) == RopeScaling("dynamic", factor=2.0,
                                                   original_max_position_embeddings=64)
    assert RopeScaling.from_hf(SimpleNamespace(rope_scaling=None)) is None
    assert RopeScaling.from_hf(None) is None and RopeScaling.from_hf({}) is None


@pytest.mark.parametrize("kind", list(_HF_REFUSED))
def test_from_hf_refuses_rope_types_it_does_not_compute(kind):
    rs = dict(_HF_REFUSED[kind])
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=64, rope_theta=10000.0,
                      max_position_embeddings=128, rope_scaling=dict(rs))
    # transformers 5 computes these: they are real types, not typos
    inv, _ = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu")
    assert inv.shape == (32,)
    for source in (cfg, rs):
        with pytest.raises(ValueError, match=rf"rope_type '{kind}' is not supported: \w"):
            RopeScaling.from_hf(source, max_position_embeddings=128)
    with pytest.raises(ValueError, match=rf"RopeScaling.kind='{kind}' is not supported"):
        RopeScaling(kind, factor=2.0)


def test_every_hf_rope_type_is_covered_or_refused():
    covered = {v["rope_type"] if v else "default" for v in _HF_SCALINGS.values()}
    assert covered == {"default", *HF_ROPE_TYPES}
    hf_types = set(ROPE_INIT_FUNCTIONS) | {"default"}
    assert hf_types - covered == set(_HF_REFUSED)


def test_from_hf_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"rope_type 'ntk' is not supported"):
        RopeScaling.from_hf({"rope_type": "ntk", "factor": 2.0})
    with pytest.raises(ValueError, match=r"rope_type 'dynamic' needs max_position_embeddings"):
        RopeScaling.from_hf({"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(ValueError, match=r"rope_type 'linear' needs a factor"):
        RopeScaling.from_hf({"rope_type": "linear"})
    with pytest.raises(ValueError, match=r"nested by layer type \(\['full_attention', "
                                         r"'sliding_attention'\]\)"):
        RopeScaling.from_hf({"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    with pytest.raises(ValueError, match=r"rope_theta is missing .*pass the config itself"):
        RopeScaling.base_from_hf({"rope_type": "llama3", "factor": 8.0})
    with pytest.raises(ValueError, match=r"rotated_fraction must be in \[0, 1\], got 1.5"):
        RopeScaling("proportional", rotated_fraction=1.5)
    with pytest.raises(ValueError, match=r"only applies to kind='proportional'.*rotary_dim"):
        RopeScaling("linear", factor=2.0, rotated_fraction=0.5)


def test_yarn_attention_factor_scales_cos_sin(gen):
    s = RopeScaling("yarn", factor=8.0, original_max_position_embeddings=64)
    inv, af = rope_frequencies(16, scaling=s)
    assert af > 1.0
    cos, sin = rope_cos_sin(torch.arange(5), inv, attention_factor=af)
    torch.testing.assert_close(cos**2 + sin**2, torch.full_like(cos, af**2))


def test_dynamic_ntk_changes_only_beyond_original():
    s = RopeScaling("dynamic", factor=4.0, original_max_position_embeddings=256)
    plain, _ = rope_frequencies(64)
    same, _ = rope_frequencies(64, scaling=s, seq_len=200)
    torch.testing.assert_close(same, plain)
    longer, _ = rope_frequencies(64, scaling=s, seq_len=1024)
    longest, _ = rope_frequencies(64, scaling=s, seq_len=4096)
    assert longer[0] == plain[0]  # the fastest pair never changes
    assert torch.all(longer[1:] < plain[1:]) and torch.all(longest[1:] < longer[1:])
    # the new base follows the closed form base * (f * L / L0 - (f - 1)) ** (R / (R - 2))
    new_base = 10000.0 * (4.0 * 1024 / 256 - 3.0) ** (64 / 62)
    torch.testing.assert_close(longer, rope_frequencies(64, base=new_base)[0])


def test_dynamic_module_recomputes_past_trained_length(gen):
    s = RopeScaling("dynamic", factor=2.0, original_max_position_embeddings=32)
    rope = RotaryEmbedding(16, scaling=s)
    q = torch.randn(1, 1, 4, 16, generator=gen)
    short, _ = rope(q, q, torch.arange(4))
    torch.testing.assert_close(short, apply_rope(q, torch.arange(4)))
    far = torch.arange(60, 64)
    long_q, _ = rope(q, q, far)
    torch.testing.assert_close(long_q, apply_rope(q, far, scaling=s))
    assert not torch.allclose(long_q, apply_rope(q, far))


def test_ntk_equals_dynamic_at_matching_length():
    """Static NTK with factor a is dynamic NTK at the length where its stretch equals a."""
    a, L0 = 4.0, 512
    L = int(L0 * (2 * a - 1) / a)  # a * L / L0 - (a - 1) == a
    ntk, _ = rope_frequencies(64, scaling=RopeScaling("ntk", factor=a))
    dyn, _ = rope_frequencies(64, scaling=RopeScaling("dynamic", factor=a,
                                                     original_max_position_embeddings=L0), seq_len=L)
    torch.testing.assert_close(ntk, dyn)
    assert ntk[-1] < rope_frequencies(64)[0][-1]


def test_linear_scaling_is_position_interpolation(gen):
    x = torch.randn(1, 1, 8, 16, generator=gen)
    pos = torch.arange(8) * 4
    scaled = apply_rope(x, pos, scaling=RopeScaling("linear", factor=4.0))
    torch.testing.assert_close(scaled, apply_rope(x, torch.arange(8)))


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors(gen):
    x = torch.randn(1, 1, 4, 8, generator=gen)
    with pytest.raises(ValueError, match=r"head_dim must be an even int.*got 7"):
        rope_frequencies(7)
    with pytest.raises(ValueError, match=r"head_dim must be an even int .*got 15"):
        RotaryEmbedding(15)
    with pytest.raises(ValueError, match=r"rotary_dim \(16\) must be <= head_dim \(8\)"):
        apply_rope(x, rotary_dim=16)
    with pytest.raises(ValueError, match=r"rotary_dim must be an even int, got 3"):
        RotaryEmbedding(8, rotary_dim=3)
    with pytest.raises(ValueError, match=r"x must have 2 or 3 or 4 dimensions, got shape \(8,\)"):
        apply_rope(torch.randn(8))
    with pytest.raises(ValueError, match=r"q must have 4 dimensions"):
        RotaryEmbedding(8)(x[0], x[0])
    with pytest.raises(ValueError, match=r"layout='complex' is not supported; choose one of \('half', 'interleaved'\)"):
        apply_rope(x, layout="complex")
    with pytest.raises(ValueError, match=r"RopeScaling.kind='longrope' is not supported"):
        RopeScaling("longrope", factor=2.0)
    with pytest.raises(ValueError, match=r"needs original_max_position_embeddings"):
        RopeScaling("yarn", factor=2.0)
    with pytest.raises(ValueError, match=r"RopeScaling.factor must be positive, got -1"):
        RopeScaling("linear", factor=-1)
    with pytest.raises(ValueError, match=r"high_freq_factor \(1.0\) > low_freq_factor \(2.0\)"):
        RopeScaling("llama3", factor=8.0, original_max_position_embeddings=64,
                    low_freq_factor=2.0, high_freq_factor=1.0)
    with pytest.raises(TypeError, match=r"scaling must be a RopeScaling or None, got dict"):
        rope_frequencies(8, scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match=r"positions has length 3 but x has T=4"):
        apply_rope(x, torch.arange(3))
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        apply_rope(torch.ones(1, 1, 4, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"cos/sin width R \(16\) must be even and <= head dim D \(8\)"):
        cos, sin = rope_cos_sin(torch.arange(4), rope_frequencies(16)[0])
        apply_rotary(x, cos, sin)
    with pytest.raises(ValueError, match=r"q has T=4 but k has T=2"):
        RotaryEmbedding(8)(x, x[:, :, :2])
    with pytest.raises(ValueError, match=r"has no Hugging Face rope_type"):
        RopeScaling("ntk", factor=2.0).to_hf()
    with pytest.raises(ValueError, match=r"base must be > 1, got 1"):
        rope_frequencies(8, base=1)


# ----------------------------------------------------------------------------- long-term decay
@pytest.mark.parametrize("layout", LAYOUTS)
def test_score_bound_holds_and_actual_matches_rotation(gen, layout):
    from llmviz.position.rope_decay import rope_decay_curve, rope_score_bound

    q = torch.randn(32, generator=gen, dtype=torch.float64)
    k = torch.randn(32, generator=gen, dtype=torch.float64)
    offsets = torch.arange(0, 3000, 7)
    actual, bound = rope_score_bound(q, k, offsets, layout=layout)
    assert torch.all(actual.abs() <= bound + 1e-9)
    n = 11
    inv = rope_frequencies(32)[0].double()
    for r in (0, 7, 700):
        qm = apply_rotary(q[None], *rope_cos_sin(torch.tensor([n + r]), inv, layout=layout), layout=layout)
        kn = apply_rotary(k[None], *rope_cos_sin(torch.tensor([n]), inv, layout=layout), layout=layout)
        assert float((qm * kn).sum()) == pytest.approx(float(actual[offsets.tolist().index(r)]))
    # the bound curve decays overall but the actual score does not follow it monotonically
    curve = rope_decay_curve(offsets, 32)
    assert curve[0] > 2.5 * curve[-50:].mean()
    assert (torch.diff(actual) > 0).any() and (torch.diff(actual) < 0).any()


def test_rotary_embedding_has_one_home():
    import llmviz.position as position
    import llmviz.position.rope as rope

    assert RotaryEmbedding is position.RotaryEmbedding
    assert RotaryEmbedding.__module__ == "llmviz.position.rotary"
    assert not hasattr(rope, "RotaryEmbedding")  # the functional core holds no module


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotary_under_autograd_equals_the_in_place_path_and_its_gradient_rotates_back(layout, gen):
    inv_freq, _ = rope_frequencies(32)
    cos, sin = rope_cos_sin(torch.arange(12), inv_freq, layout=layout)
    x = torch.randn(2, 3, 12, 32, generator=gen, requires_grad=True)
    upstream = torch.randn(2, 3, 12, 32, generator=gen)
    with torch.no_grad():  # the in-place path
        expected = apply_rotary(x, cos, sin, layout=layout)
    y = apply_rotary(x, cos, sin, layout=layout)  # the out-of-place path autograd takes
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-6)
    y.backward(upstream)
    # a rotation is orthogonal: the gradient is the upstream gradient rotated by -angle
    torch.testing.assert_close(x.grad, apply_rotary(upstream, cos, -sin, layout=layout), rtol=1e-6, atol=1e-6)
