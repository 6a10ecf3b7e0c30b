"""Every registered kind declares a parameter count that equals the built module's ``numel``,
and config-derived counts equal built-model counts over the product of kinds: each registry
alone over every kind (norms x QK-norms x scopes, FFNs, positions, attention kinds x placements,
mask kinds), then drawn combinations of all of them (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz._registry import Registry
from llmviz.analysis import count_parameters, layer_params
from llmviz.ffn import FFNS
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig
from llmviz.attention.mask_kinds import MASK_KINDS
from llmviz.model.kinds import ATTENTIONS, MIXER_KINDS, PLACEMENTS
from llmviz.norm import MODEL_NORMS, NORMS
from llmviz.position import POSITION_SCHEMES

MLA = dict(attn_kind="mla", kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
#: what each attention kind needs besides its name (a new kind adds a row or fails below)
ATTN_NEEDS = {"standard": {}, "mla": MLA, "qk_norm_after_rope": dict(qk_norm="rms")}
#: what each position scheme needs (partial RoPE etc. are options of "rope", not kinds)
POSITION_NEEDS = {name: {} for name in POSITION_SCHEMES}


def numel(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _config(**kw) -> ModelConfig:
    base = dict(vocab_size=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16)
    return ModelConfig(**{**base, **kw})


def _check_counts(c: ModelConfig) -> None:
    with torch.device("meta"):
        m = DecoderLM(c)
    a, b = count_parameters(c), count_parameters(m)
    assert a == b, (c, a, b)
    assert a["total"] == numel(m)


def test_every_kind_table_names_every_registered_kind():
    # a kind registered without a row here fails, so the product below cannot skip it
    assert set(ATTN_NEEDS) == set(ATTENTIONS)
    assert set(POSITION_NEEDS) == set(POSITION_SCHEMES)


@pytest.mark.parametrize("kind", list(NORMS))
@pytest.mark.parametrize("d", [4, 24])
def test_norm_declared_count_equals_numel(kind, d):
    extra = {"n_groups": 2} if kind == "group" else {}
    assert NORMS[kind].params(d, **extra) == numel(NORMS[kind].build(d, **extra))
    if kind in ("batch", "group", "instance"):  # the sequence norms may drop their affine part
        assert NORMS[kind].params(d, affine=False, **extra) == numel(
            NORMS[kind].build(d, affine=False, **extra)) == 0


@pytest.mark.parametrize("kind", list(FFNS))
@pytest.mark.parametrize("bias", [None, True, False])
def test_ffn_declared_count_equals_numel(kind, bias):
    assert FFNS[kind].params(12, 20, bias=bias) == numel(FFNS[kind].build(12, 20, bias=bias))


@pytest.mark.parametrize("kind", list(ATTENTIONS))
@pytest.mark.parametrize("bias", [False, True])
def test_attention_declared_count_equals_numel(kind, bias):
    c = _config(attn_bias=bias, **ATTN_NEEDS[kind])
    assert ATTENTIONS[kind].params(c) == numel(ATTENTIONS[kind].build(c, 0))
    if kind == "mla":
        c = c.replace(q_lora_rank=12)
        assert ATTENTIONS[kind].params(c) == numel(ATTENTIONS[kind].build(c, 0))


@pytest.mark.parametrize("kind", list(MIXER_KINDS))
def test_mixer_declared_count_equals_numel(kind):
    c = _config(linear_layers=(0, 1) if kind == "linear" else None, linear_heads=4,
                linear_key_heads=2, linear_head_dim=6)
    assert MIXER_KINDS[kind].params(c) == numel(MIXER_KINDS[kind].build(c, 0))


@pytest.mark.parametrize("position", list(POSITION_SCHEMES))
def test_position_declared_count_equals_numel(position):
    c = _config(position=position, **POSITION_NEEDS[position])
    built = POSITION_SCHEMES[position].build(c)
    assert POSITION_SCHEMES[position].params(c) == (0 if built is None else numel(built))


# --- the product of kinds: config-derived counts equal built-model counts ----------------------
# each axis alone, over every registered kind (the others at their defaults) ...
@pytest.mark.parametrize("norm", MODEL_NORMS)
@pytest.mark.parametrize("qk_norm", (None, *MODEL_NORMS))
@pytest.mark.parametrize("scope", ["head", "all"])
def test_counts_over_norm_and_qk_norm_kinds(norm, qk_norm, scope):
    _check_counts(_config(norm=norm, qk_norm=qk_norm, qk_norm_scope=scope))


@pytest.mark.parametrize("ffn", list(FFNS))
@pytest.mark.parametrize("bias", [False, True])
def test_counts_over_ffn_kinds(ffn, bias):
    _check_counts(_config(ffn=ffn, bias=bias))


@pytest.mark.parametrize("position", list(POSITION_SCHEMES))
def test_counts_over_position_schemes(position):
    _check_counts(_config(position=position, **POSITION_NEEDS[position]))


@pytest.mark.parametrize("attn", list(ATTENTIONS))
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_counts_over_attention_kinds_and_placements(attn, placement):
    if attn == "mla" and placement == "deepnorm":
        pytest.skip("deepnorm scales v_proj, which latent attention has not (refused by the config)")
    _check_counts(_config(placement=placement, **ATTN_NEEDS[attn]))


@pytest.mark.parametrize("mask", list(MASK_KINDS))
def test_counts_over_mask_kinds(mask):
    # masks hold no parameters: the declared 0, and a model with the kind counts like its build
    local = MASK_KINDS[mask].info["local"]
    assert MASK_KINDS[mask].params() == 0
    kw = dict(local_attention=mask, sliding_window=3, global_every=2) if local else {}
    _check_counts(_config(**kw))


def test_olmo2_qk_norm_all_scope_counts_like_the_model():
    # the bug this registry fixes: H*D and G*D wide QK-norms were counted as D wide
    c = _config(d_model=64, n_heads=4, n_kv_heads=2, qk_norm="rms", qk_norm_scope="all")
    assert layer_params(c)["attention"] == numel(DecoderLM(c).layers[0].self_attn)


# ... and their combinations, drawn
@settings(max_examples=40, deadline=None)
@given(
    norm=st.sampled_from(MODEL_NORMS), qk_norm=st.sampled_from((None, *MODEL_NORMS)),
    scope=st.sampled_from(["head", "all"]), ffn=st.sampled_from(list(FFNS)),
    position=st.sampled_from(list(POSITION_SCHEMES)), attn=st.sampled_from(list(ATTENTIONS)),
    placement=st.sampled_from(PLACEMENTS), parallel=st.booleans(), bias=st.booleans(),
    local=st.sampled_from(MASK_KINDS.names(local=True) + (None,)),
    extras=st.fixed_dictionaries({"attn_sinks": st.booleans(), "attn_output_gate": st.booleans(),
                                  "embed_norm": st.booleans(), "tie_embeddings": st.booleans()}),
)
def test_counts_over_the_product_of_kinds(norm, qk_norm, scope, ffn, position, attn, placement,
                                          parallel, bias, local, extras):
    kw = dict(norm=norm, ffn=ffn, position=position, placement=placement, bias=bias,
              **POSITION_NEEDS[position])
    if attn == "mla":
        if placement == "deepnorm" or position != "rope":
            return  # refused by the config (tested there)
        kw.update(ATTN_NEEDS["mla"], embed_norm=extras["embed_norm"])
    else:
        kw.update(qk_norm=qk_norm, qk_norm_scope=scope, **extras)
        if local is not None:
            kw.update(local_attention=local, sliding_window=3, global_every=2)
    if parallel and placement not in ("deepnorm", "post_sublayer"):
        kw["parallel"] = True
    _check_counts(_config(**kw))


def test_registry_refuses_a_second_kind_of_the_same_name_and_names_the_choices():
    reg = Registry("widget kind")
    reg.register("a", build=lambda d: None, params=lambda d: 0)
    with pytest.raises(ValueError, match="'a' is already registered"):
        reg.register("a", build=lambda d: None, params=lambda d: 0)
    with pytest.raises(ValueError, match=r"widget kind='b' is not supported; choose one of \('a',\)"):
        reg.kind("b")
    with pytest.raises(TypeError, match="non-empty str"):
        reg.register("", build=lambda d: None, params=lambda d: 0)
