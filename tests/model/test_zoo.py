"""The corrected model table (ERRATA 001/002/003)."""

from __future__ import annotations

import pytest

from llmviz.analysis import count_parameters
from llmviz.model.presets import preset
from llmviz.model.zoo import (
    BLOCKS,
    PARALLEL_ONE_NORM,
    PARALLEL_TWO_NORMS,
    SERIAL,
    UNSTATED,
    ZOO,
    PUBLISHED,
    ZooEntry,
    _e,
    published_config,
    zoo_table,
)


def _row(df, name):
    hit = df[df["name"] == name]
    assert len(hit) == 1, name
    return hit.iloc[0]


def test_table_shape_and_sources():
    df = zoo_table()
    assert len(df) == len(ZOO) >= 30
    assert df["name"].is_unique
    assert df["source"].str.len().min() > 10  # every row cites something
    assert (df["year"].diff().dropna() >= 0).all()  # oldest first
    assert set(df.columns) >= {"norm", "block", "extras", "placement", "position", "activation",
                               "stability", "params_b", "n_layers", "d_model", "n_heads",
                               "n_kv_heads", "aspect"}


def test_errata_corrections():
    df = zoo_table()
    gpt2 = df[df["name"].str.startswith("GPT-2")]
    assert len(gpt2) == 1 and gpt2.iloc[0]["year"] == 2019 and gpt2.iloc[0]["norm"] == "LayerNorm"
    bloom = _row(df, "BLOOM (176B)")
    assert bloom["block"] == SERIAL and bloom["params_b"] == 176.0 and bloom["position"] == "ALiBi"
    assert _row(df, "Phi-3-small (7B)")["activation"] == "GeGLU"
    neox = _row(df, "GPT-NeoX (20B)")
    assert neox["position"] == "RoPE" and neox["block"] == PARALLEL_TWO_NORMS
    gptj = _row(df, "GPT-J (6B)")
    assert gptj["position"] == "RoPE" and gptj["block"] == PARALLEL_ONE_NORM
    assert "MoE" not in _row(df, "Mistral (7B)")["activation"]
    for size, attn in (("7B", "MHA"), ("13B", "MHA"), ("34B", "GQA"), ("70B", "GQA")):
        assert _row(df, f"Llama 2 ({size})")["attention"] == attn
    assert set(df["placement"]) >= {"pre", "post", "pre+post"}  # the pre-norm column is filled


def test_attention_kind_follows_kv_heads():
    for e in ZOO:
        if e.n_kv_heads == 1:
            assert e.attention.startswith("MQA")
        elif e.n_kv_heads is not None and e.n_kv_heads < e.n_heads:
            assert e.attention.startswith("GQA")


@pytest.mark.parametrize(
    ("row", "family", "size"),
    [("Llama 2 (7B)", "llama2", "7b"), ("Llama 2 (70B)", "llama2", "70b"),
     ("Mistral (7B)", "mistral", "7b"), ("Gemma 2 (27B)", "gemma2", "27b"),
     ("GPT-J (6B)", "gptj", "6b"), ("BLOOM (176B)", "bloom", "176b"), ("PaLM (540B)", "palm", "540b")],
)
def test_presets_agree_with_zoo(row, family, size):
    e = next(e for e in ZOO if e.name == row)
    c = preset(family, size)
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads) == (e.n_layers, e.d_model, e.n_heads, e.n_kv_heads)
    assert count_parameters(c)["total"] / 1e9 == pytest.approx(e.params_b, rel=0.02)


def test_entries_are_frozen_and_subset_table():
    with pytest.raises(AttributeError):
        ZOO[0].year = 2000
    df = zoo_table(ZOO[:3])
    assert len(df) == 3 and isinstance(ZOO[0], ZooEntry)


def test_block_column_tells_the_parallel_layouts_apart():
    df = zoo_table()
    assert set(df["block"]) <= set(BLOCKS)
    by_block = df.groupby("block")["name"].apply(set)
    assert by_block[PARALLEL_ONE_NORM] == {"GPT-J (6B)", "PaLM (540B)"}
    assert by_block[PARALLEL_TWO_NORMS] == {"GPT-NeoX (20B)", "Falcon (40B)"}
    # LaMDA's paper states neither its norm nor its block layout: unknown, not "serial"
    lamda = _row(df, "LaMDA (137B)")
    assert lamda["block"] == UNSTATED and lamda["norm"] == UNSTATED


def test_qkv_bias_is_not_filed_as_a_stability_trick():
    df = zoo_table()
    assert not df["stability"].str.contains("bias").any()
    with_bias = set(df.loc[df["extras"].str.contains("QKV bias"), "name"])
    assert with_bias == {"Qwen (14B)", "Qwen2 (72B)"}  # Qwen had it before Qwen2


def test_unknown_block_layout_is_refused():
    with pytest.raises(ValueError, match="block 'parallel' of 'X' must be one of"):
        _e("X", 2020, "RMSNorm", "parallel", "pre", "RoPE", "SwiGLU", (), 1.0,
           2, 8, 2, 2, "nowhere in particular")


# ----------------------------------------------------------------------------- the 2025-26 block
def _hf_defaults():
    """Rows whose facts a transformers config class holds as its defaults (no download)."""
    transformers = pytest.importorskip("transformers")
    return {
        "DeepSeek-V3 (671B)": transformers.DeepseekV3Config(),
        "Llama 4 Scout (17B-16E)": transformers.Llama4TextConfig(),
        # these three cite their released config.json, held in llmviz.model.published
        "SmolLM3 (3B)": published_config("SmolLM3 3B"),
        "gpt-oss (120B)": published_config("gpt-oss-120b"),
        "gpt-oss (20B)": published_config("gpt-oss-20b"),
        "Qwen3-Next (80B-A3B)": published_config("Qwen3-Next 80B-A3B"),
        "OLMo 3 (7B)": transformers.Olmo3Config(),
        "Mixtral (8x7B)": transformers.MixtralConfig(),
        "Mistral (7B)": transformers.MistralConfig(),
        "Qwen3.5 (35B-A3B)": transformers.Qwen3_5MoeTextConfig(),
        "Mistral Small 4 (119B)": transformers.Mistral4Config(),
    }


def _ratio(layer_types, local, other):
    """(local, other) layers per repeat of a config's ``layer_types``."""
    n_local = sum(t == local for t in layer_types)
    n_other = sum(t == other for t in layer_types)
    assert n_local + n_other == len(layer_types)
    g = __import__("math").gcd(n_local, n_other)
    return (n_local // g, n_other // g)


@pytest.mark.parametrize("name", ["DeepSeek-V3 (671B)", "Llama 4 Scout (17B-16E)", "SmolLM3 (3B)",
                                  "gpt-oss (120B)", "gpt-oss (20B)", "Qwen3-Next (80B-A3B)",
                                  "OLMo 3 (7B)",
                                  "Mixtral (8x7B)", "Mistral (7B)", "Qwen3.5 (35B-A3B)",
                                  "Mistral Small 4 (119B)"])
def test_new_columns_agree_with_the_config_they_cite(name):
    c = _hf_defaults()[name]
    e = next(e for e in ZOO if e.name == name)
    cited = {p.zoo: p.source.split()[0] for p in PUBLISHED.values() if p.zoo}
    cited["gpt-oss (20B)"] = PUBLISHED["gpt-oss-20b"].source.split()[0]
    if name in cited and "config.json" in e.source:
        assert cited[name] in e.source  # the released file, e.g. HuggingFaceTB/SmolLM3-3B
    elif name not in ("Mistral (7B)", "Mixtral (8x7B)"):  # these cite their papers; the rest, the class
        assert type(c).__name__ in e.source
    assert (e.n_layers, e.d_model, e.n_heads) == (c.num_hidden_layers, c.hidden_size, c.num_attention_heads)
    if e.latent_kv_rank is None:
        assert e.n_kv_heads == c.num_key_value_heads
    else:
        assert e.latent_kv_rank == c.kv_lora_rank and e.n_kv_heads is None
    routed = getattr(c, "n_routed_experts", None) or getattr(c, "num_local_experts", None) \
        or getattr(c, "num_experts", None)
    assert e.experts == routed
    if routed:
        assert e.experts_active == c.num_experts_per_tok
    shared = getattr(c, "n_shared_experts", None) or (1 if getattr(c, "shared_expert_intermediate_size", 0) else 0)
    if c.model_type == "llama4_text":
        shared = 1  # Llama4TextMoe always adds one shared expert
    assert e.shared_experts == shared
    assert e.mtp == getattr(c, "num_nextn_predict_layers", e.mtp)  # Qwen3-Next's MTP is in its release notes
    types = getattr(c, "layer_types", None) or []
    if "linear_attention" in types:
        assert e.linear_softmax == _ratio(types, "linear_attention", "full_attention")
    elif "sliding_attention" in types or "chunked_attention" in types:
        local = "chunked_attention" if "chunked_attention" in types else "sliding_attention"
        assert e.local_global == _ratio(types, local, "full_attention")
        assert e.window == (c.attention_chunk_size if local == "chunked_attention" else c.sliding_window)
    elif getattr(c, "sliding_window", None):  # Mistral: every layer slides
        assert e.local_global == (1, 0) and e.window == c.sliding_window
    else:
        assert e.local_global is None
    assert e.nope_every == getattr(c, "no_rope_layer_interval", None)
    assert e.sinks == (c.model_type == "gpt_oss")


def test_published_totals_match_anatomy_where_it_reads_the_family():
    from llmviz.hf import anatomy

    for name in ("DeepSeek-V3 (671B)", "SmolLM3 (3B)", "gpt-oss (120B)", "Qwen3-Next (80B-A3B)",
                 "Mixtral (8x7B)"):
        e = next(e for e in ZOO if e.name == name)
        total = anatomy(_hf_defaults()[name]).total_params / 1e9
        assert total == pytest.approx(e.params_b, rel=0.01), name


def test_derived_columns():
    df = zoo_table()
    assert set(df["ffn_kind"]) == {"dense", "MoE"}
    assert set(df["kv_kind"]) == {"MHA", "GQA", "MQA", "MLA"}
    assert set(df["layer_mix"]) == {"all global", "all local", "local + global", "linear + softmax"}
    moe = df[df["ffn_kind"] == "MoE"]
    published = moe.dropna(subset=["active_params_b"])  # Mistral Small 4's is not given
    assert len(published) >= len(moe) - 1
    assert (published["active_params_b"] < published["params_b"]).all()
    assert (moe["experts_active"] < moe["experts"]).all()
    assert df.loc[df["ffn_kind"] == "dense", "active_params_b"].isna().all()
    assert _row(df, "DeepSeek-V3 (671B)")["moe"] == "8 of 256 + 1 shared"
    assert _row(df, "Gemma 3 (27B)")["pattern"] == "5 local (1024) : 1 global"
    assert _row(df, "Llama 4 Scout (17B-16E)")["pattern"].endswith("NoPE every 4")
    assert _row(df, "Qwen3-Next (80B-A3B)")["linear_softmax"] == "3:1"
    assert _row(df, "OLMo 2 (7B)")["qk_norm"] == "yes" and _row(df, "Llama 2 (7B)")["qk_norm"] == "no"
    assert set(df.loc[df["sinks"], "name"]) == {"gpt-oss (120B)", "gpt-oss (20B)"}
    assert set(df.loc[df["output_gate"], "name"]) == {"Qwen3-Next (80B-A3B)", "Qwen3.5 (35B-A3B)"}
    assert set(df.loc[df["mtp"] > 0, "name"]) == {"DeepSeek-V3 (671B)", "Qwen3-Next (80B-A3B)",
                                                  "Qwen3.5 (35B-A3B)"}


def test_experts_without_top_k_are_refused():
    with pytest.raises(ValueError, match="give experts and experts_active together"):
        _e("X", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 1.0, 2, 8, 2, 2,
           "nowhere in particular", experts=8)


def test_borrowed_shape_names_the_model_a_row_borrows_from():
    from llmviz.model.zoo import borrowed_shape

    table = zoo_table()
    got = {n: borrowed_shape(s) for n, s in zip(table["name"], table["source"]) if borrowed_shape(s)}
    assert got == {"Llama 2 (34B)": "Code Llama 34B"}
    assert borrowed_shape("Touvron et al. 2023b, Table 1") is None
    with pytest.raises(TypeError, match="source must be"):
        borrowed_shape(None)
