"""Architecture and sampling explorers: pure, fast, constant trace count, honest numbers."""

from __future__ import annotations


import pytest
import torch

from llmviz.analysis import count_parameters
from llmviz.explore.architecture import (
    architecture_explorer,
    architecture_frame,
    sampling_explorer,
    sampling_frame,
)
from llmviz.model.presets import preset
from llmviz.model.sampling import filtered_probs


def test_architecture_frame_numbers():
    f = architecture_frame(n_layers=32, d_model=4096, n_heads=32, kv="MHA")
    total = sum(f.traces[0].y) * 1e9
    ref = count_parameters(preset("llama2", "7b", d_ff=None))["total"]
    assert total == pytest.approx(ref)
    gqa = architecture_frame(n_layers=32, d_model=4096, n_heads=32, kv="GQA-8")
    assert gqa.traces[1].y[0] == pytest.approx(f.traces[1].y[0] / 4)  # 32 -> 8 kv heads


def test_architecture_explorer_grid():
    # (its update latency is measured in benchmarks/bench_explorers.py, not asserted here)
    ex = architecture_explorer()
    counts = {len(ex.frame(**p).traces) for p in ex.grid()[::17]}
    assert counts == {3}


def test_architecture_explorer_reaches_llama2_7b_and_fits_a_phone():
    from llmviz.explore._render import unflatten

    ex = architecture_explorer()
    llama = {"n_layers": 32, "d_model": 4096, "n_heads": 32, "kv": "MHA"}
    assert llama in [{k: p[k] for k in llama} for p in ex.grid()]  # reachable on the static face
    fig, spec = ex.static_figure()
    assert len(spec["ranges"]) == 6 * 5 * 4 * 3
    # the title comes in short lines (no line wider than a phone-width figure can show)
    title = unflatten(ex.frame(**llama).layout)["title"]["text"]
    lines = title.split("<br>")
    assert len(lines) == 3 and max(len(line) for line in lines) <= 48, lines
    # the two panels are stacked without overlap, each spanning the full width
    lay = fig.layout
    assert tuple(lay.xaxis.domain) == (0, 1) and tuple(lay.xaxis2.domain) == (0, 1)
    assert lay.yaxis2.domain[1] < lay.yaxis.domain[0]


def test_sampling_frame_matches_library():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    f = sampling_frame(temperature=0.5, top_k=0, top_p=0.8, min_p=0.0, logits=logits)
    expected = filtered_probs(logits, temperature=0.5, top_p=0.8)
    assert f.traces[1].y == pytest.approx(expected.tolist())
    assert "kept" in f.layout["title.text"]


def test_sampling_explorer_grid_and_labels():
    ex = sampling_explorer(torch.randn(12), labels=[chr(97 + i) for i in range(12)])
    assert {len(ex.frame(**p).traces) for p in ex.grid()[::23]} == {2}
    f = ex.frame(top_k=3)
    assert sum(v > 0 for v in f.traces[1].y) == 3
    with pytest.raises(ValueError, match="logits must be one row"):
        sampling_explorer(torch.randn(2, 5))
    with pytest.raises(ValueError, match="labels has 2 entries"):
        sampling_explorer(torch.randn(5), labels=["a", "b"])


def test_static_faces_build():
    fig, spec = sampling_explorer().static_figure()
    assert len(spec["ranges"]) == 5 * 3 * 5 * 4
    assert spec["n_traces"] == 2 * len(spec["ranges"])


def test_zoo_explorer_counts_models():
    from llmviz.explore.architecture import zoo_explorer, zoo_frame
    from llmviz.model.zoo import ZOO

    f = zoo_frame(column="position", year=max(e.year for e in ZOO))
    assert sum(f.traces[0].y) == len(ZOO)
    assert dict(zip(f.traces[0].x, f.traces[0].y))["RoPE"] == sum(e.position == "RoPE" for e in ZOO)
    ex = zoo_explorer()
    assert {len(ex.frame(**p).traces) for p in ex.grid()} == {2}
    early = zoo_frame(column="norm", year=2019)
    assert sum(early.traces[0].y) == sum(e.year <= 2019 for e in ZOO)


def test_sampling_frame_shows_top_tokens_but_filters_all():
    logits = torch.linspace(3, -3, 100)
    f = sampling_frame(top_p=0.99, logits=logits, show=10)
    assert len(f.traces[0].x) == 10
    kept = int(f.layout["title.text"].split(" of ")[0])
    assert kept > 10  # counted over the whole vocabulary


def test_zoo_explorer_counts_the_2025_columns():
    from llmviz.explore.architecture import zoo_explorer, zoo_frame
    from llmviz.model.zoo import ZOO

    last = max(e.year for e in ZOO)
    moe = dict(zip(*(zoo_frame(column="ffn_kind", year=last).traces[0][k] for k in ("x", "y"))))
    assert moe["MoE"] == sum(e.experts is not None for e in ZOO)
    kv = dict(zip(*(zoo_frame(column="kv_kind", year=last).traces[0][k] for k in ("x", "y"))))
    assert kv["MLA"] == sum(e.latent_kv_rank is not None for e in ZOO)
    assert dict(zip(*(zoo_frame(column="ffn_kind", year=2022).traces[0][k] for k in ("x", "y")))) \
        == {"dense": sum(e.year <= 2022 for e in ZOO), "MoE": 0}
    columns = next(c for c in zoo_explorer().controls if c.name == "column").values
    assert {"ffn_kind", "kv_kind", "layer_mix", "qk_norm"} <= set(columns)
