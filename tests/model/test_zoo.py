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
    ZooEntry,
    _e,
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
