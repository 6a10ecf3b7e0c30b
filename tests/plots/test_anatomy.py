"""The anatomy block diagram: rows, repeats and cell texts, read back from the drawn artists."""

from __future__ import annotations

import itertools
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from llmviz.hf import anatomy
from llmviz.plots.anatomy import layer_runs, plot_anatomy, repeating_block

transformers = pytest.importorskip("transformers")

_TINY = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
         "num_key_value_heads": 2, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _texts(ax, gid: str) -> list[str]:
    return [t.get_text() for t in ax.texts if t.get_gid() == gid]


def _patches(ax, gid: str) -> list:
    return [p for p in ax.patches if p.get_gid() == gid]


def _run_counts(ax) -> list[int]:
    return [int(re.match(r"× (\d+)\n", text).group(1)) for text in _texts(ax, "run")]


def test_runs_are_maximal_and_cover_every_layer():
    a = anatomy(transformers.Gemma3TextConfig())  # 5 sliding : 1 global
    runs = layer_runs(a)
    assert sum(r.count for r in runs) == a.n_layers
    assert [r.first for r in runs] == [0] + [r.last + 1 for r in runs[:-1]]
    for r in runs:
        kinds = {(layer.attention, layer.window, layer.rope_base) for layer in a.layers[r.first:r.last + 1]}
        assert kinds == {(r.layer.attention, r.layer.window, r.layer.rope_base)}
    for left, right in itertools.pairwise(runs):
        assert (left.layer.attention, left.layer.rope_base) != (right.layer.attention, right.layer.rope_base)


def test_repeating_block_finds_the_pattern_or_none():
    gemma3 = layer_runs(anatomy(transformers.Gemma3TextConfig()))
    p, k = repeating_block(gemma3)
    assert (p, k) == (2, 4)  # (5 sliding, 1 global) x 4, then 2 sliding
    assert sum(r.count for r in gemma3[:p]) * k + sum(r.count for r in gemma3[p * k:]) == 26
    deepseek = layer_runs(anatomy(transformers.DeepseekV3Config()))  # 3 dense, 58 MoE
    assert repeating_block(deepseek) == (len(deepseek), 1)


@pytest.mark.parametrize("name", ["MistralConfig", "DeepseekV3Config", "Gemma3TextConfig",
                                  "GptOssConfig", "SmolLM3Config", "GPT2Config"])
def test_one_row_per_drawn_run_with_four_cells(name):
    a = anatomy(getattr(transformers, name)())
    runs = layer_runs(a)
    p, k = repeating_block(runs)
    ax = plot_anatomy(a)
    drawn = list(runs[:p]) + list(runs[p * k:])
    assert _run_counts(ax) == [r.count for r in drawn]
    for cell in ("attention", "position", "norm", "ffn"):
        assert len(_patches(ax, cell)) == len(drawn) == len(_texts(ax, cell))
    repeat = [t for t in _texts(ax, "repeat") if t]
    assert repeat == ([f"× {k}"] if k > 1 else [])
    counts = _run_counts(ax)
    assert sum(counts[:p]) * k + sum(counts[p:]) == a.n_layers
    assert len(_patches(ax, "embedding")) == len(_patches(ax, "final norm")) == len(_patches(ax, "head")) == 1


def test_a_uniform_stack_is_one_row():
    ax = plot_anatomy(anatomy(transformers.LlamaConfig(**_TINY, num_hidden_layers=3)))
    assert _texts(ax, "run") == ["× 3\nlayers 0-2"]
    assert _texts(ax, "attention")[0].startswith("global")


def test_sliding_rows_show_their_window_and_global_rows_none():
    a = anatomy(transformers.Gemma2Config(**_TINY, num_hidden_layers=4, head_dim=16, sliding_window=48))
    ax = plot_anatomy(a)
    attention = _texts(ax, "attention")
    assert len(attention) == 2  # the alternation is drawn once, with a bracket
    assert "sliding, window 48" in attention[0]
    assert attention[1].startswith("global") and "48" not in attention[1]
    assert "× 2" in _texts(ax, "repeat")


def test_nope_layers_are_labelled_and_rope_layers_show_their_base():
    a = anatomy(transformers.SmolLM3Config())
    nope = [layer for layer in a.layers if layer.position == "nope"]
    assert nope  # the default SmolLM3 drops RoPE in some layers
    ax = plot_anatomy(a)
    position = _texts(ax, "position")
    assert any(text.startswith("NoPE") for text in position)
    base = next(layer.rope_base for layer in a.layers if layer.position == "rope")
    assert any(f"RoPE θ {base:,.0f}" in text for text in position)


def test_mixtral_default_shows_its_experts():
    a = anatomy(transformers.MixtralConfig())  # Mixtral 8x7B
    ax = plot_anatomy(a)
    ffn = _texts(ax, "ffn")
    assert ffn and all(f"{a.experts} experts" in t and f"{a.experts_active} active" in t for t in ffn)
    assert f"d_ff {a.expert_d_ff:,}" in ffn[0]
    title = ax.get_title()
    assert f"{a.total_params / 1e9:.2f} B parameters" in title
    assert f"{a.active_params / 1e9:.2f} B active" in title


def test_deepseek_shows_shared_experts_latent_attention_and_partial_rope():
    a = anatomy(transformers.DeepseekV3Config())
    ax = plot_anatomy(a)
    dense, moe = _texts(ax, "ffn")
    assert dense.startswith("dense") and f"d_ff {a.d_ff:,}" in dense
    assert f"{a.experts_active} active + {a.shared_experts} shared" in moe
    assert all(t.startswith("latent") for t in _texts(ax, "attention"))
    rotary = a.layers[0].rotary_dim
    assert all(f"{rotary} of {a.head_dim} dims" in t for t in _texts(ax, "position"))


def test_title_gives_the_cache_per_token_and_the_head_its_tying():
    tied = anatomy(transformers.LlamaConfig(**_TINY, num_hidden_layers=2, tie_word_embeddings=True))
    untied = anatomy(transformers.LlamaConfig(**_TINY, num_hidden_layers=2))
    ax = plot_anatomy(tied)
    assert f"KV cache {tied.kv_bytes_per_token / 1024:,.1f} KiB per token" in ax.get_title()
    assert "active" not in ax.get_title()  # dense: active == total, not repeated
    assert "tied to the embedding" in _texts(ax, "head")[0]
    assert "untied" in _texts(plot_anatomy(untied), "head")[0]


def test_draws_on_the_given_axes_the_same_plot_each_time():
    a = anatomy(transformers.Qwen3Config(**_TINY, num_hidden_layers=2, head_dim=16))
    _, (left, right) = plt.subplots(1, 2)
    assert plot_anatomy(a, ax=left) is left
    assert plot_anatomy(a, ax=right) is right
    assert [t.get_text() for t in left.texts] == [t.get_text() for t in right.texts]
    assert "QK-norm" in _texts(left, "norm")[0]


def test_a_config_instead_of_an_anatomy_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"takes an Anatomy, got LlamaConfig; pass llmviz\.hf\.anatomy\(config\)"):
        plot_anatomy(transformers.LlamaConfig(**_TINY, num_hidden_layers=2))
