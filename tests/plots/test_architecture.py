"""Architecture figures: inspect what is drawn."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from llmviz.analysis import count_parameters, kv_cache_bytes_for  # noqa: E402
from llmviz.model import DecoderLM  # noqa: E402
from llmviz.model.presets import preset  # noqa: E402
from llmviz.model.zoo import zoo_table  # noqa: E402
from llmviz.plots.architecture import (  # noqa: E402
    plot_adoption,
    plot_adoption_grid,
    plot_aspect_ratios,
    plot_kv_cache,
    plot_param_breakdown,
    plot_wide_vs_deep,
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_param_breakdown_stacks_to_totals():
    models = {"gpt2": DecoderLM(preset("gpt2")), "llama2 7b": preset("llama2", "7b")}
    ax = plot_param_breakdown(models)
    patches = ax.patches
    assert len(patches) == 2 * 6  # one bar per model per component
    for i, m in enumerate(models.values()):
        tops = max(p.get_y() + p.get_height() for p in patches[i::2])
        assert tops == pytest.approx(count_parameters(m)["total"])
    frac = plot_param_breakdown(models, fraction=True)
    assert max(p.get_y() + p.get_height() for p in frac.patches) == pytest.approx(1.0)


def test_kv_cache_lines_match_formula():
    cfgs = {"7b MHA": preset("llama2", "7b"), "70b GQA": preset("llama2", "70b"),
            "mistral": preset("mistral", "7b")}
    ax = plot_kv_cache(cfgs, seq_lens=[1024, 8192, 65536])
    lines = ax.get_lines()
    assert len(lines) == 3
    assert lines[0].get_ydata()[1] == pytest.approx(kv_cache_bytes_for(cfgs["7b MHA"], 8192) / 2**30)
    # the sliding window flattens Mistral's line past 4096 tokens
    assert lines[2].get_ydata()[1] == pytest.approx(lines[2].get_ydata()[2])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_aspect_ratio_scatter_has_every_model():
    df = zoo_table()
    ax = plot_aspect_ratios(df)
    offsets = ax.collections[0].get_offsets()
    assert len(offsets) == df.dropna(subset=["n_layers", "d_model"]).shape[0]
    shapes = df.dropna(subset=["n_layers", "d_model"]).groupby(["n_layers", "d_model"]).ngroups
    labels = [t for t in ax.texts if "C/L" not in t.get_text()]
    assert len(labels) == shapes  # one label per distinct shape
    assert any("+" in t.get_text() for t in labels)  # shared shapes are counted


def test_aspect_ratio_labels_do_not_overlap():
    from matplotlib.text import Text

    ax = plot_aspect_ratios(zoo_table())
    fig = ax.figure
    fig.canvas.draw()  # the final layout: labels must still be apart after it
    r = fig.canvas.get_renderer()
    frame = ax.get_window_extent(r)
    boxes = []
    for t in ax.texts:
        if "C/L" in t.get_text():
            continue
        t.update_positions(r)
        boxes.append((t.get_text(), Text.get_window_extent(t, r)))
    clashes = [(a, b) for i, (a, x) in enumerate(boxes) for b, y in boxes[i + 1:] if x.overlaps(y)]
    assert clashes == []
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
               for _, b in boxes)


def test_place_labels_spreads_a_crowd_and_checks_lengths():
    from matplotlib.text import Text

    from llmviz.plots.architecture import place_labels

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    xy = [(5 + 0.02 * i, 5) for i in range(8)]  # eight points on top of each other
    texts = place_labels(ax, xy, [f"label number {i}" for i in range(8)])
    r = fig.canvas.get_renderer()
    for t in texts:
        t.update_positions(r)
    boxes = [Text.get_window_extent(t, r) for t in texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert any(t.arrow_patch is not None for t in texts)  # the far ones get leader lines
    with pytest.raises(ValueError, match="xy has 2 points but labels has 1"):
        place_labels(ax, [(1, 1), (2, 2)], ["one"])


def test_plot_adoption_grid_every_model():
    df = zoo_table()
    ax = plot_adoption(df, column="position")
    assert sum(p.get_height() for p in ax.patches) == len(df)
    fig = plot_adoption_grid(df)
    assert len([a for a in fig.axes if a.get_visible()]) == 4
    with pytest.raises(ValueError, match="column 'colour' is not in the table"):
        plot_adoption(df, column="colour")


def test_adoption_of_the_2025_columns_has_headroom_and_titles():
    df = zoo_table()
    ax = plot_adoption(df, column="ffn_kind")
    tallest = df.groupby("year").size().max()
    assert ax.get_ylim()[1] > tallest  # the tallest stack is not cut by the frame
    assert "mixture of experts" in ax.get_title()
    moe = sum(p.get_height() for p in ax.patches if p.get_label() == "MoE" or
              p.get_facecolor() == ax.patches[-1].get_facecolor())
    assert moe == (df["ffn_kind"] == "MoE").sum()


def test_wide_vs_deep_and_errors():
    ax = plot_wide_vs_deep([{"label": "wide", "time_s": [1, 2], "loss": [3, 2]},
                            {"label": "deep", "time_s": [1, 3], "loss": [3, 1.5]}])
    assert len(ax.get_lines()) == 2
    with pytest.raises(ValueError, match="results is empty"):
        plot_wide_vs_deep([])
    with pytest.raises(ValueError, match="models is empty"):
        plot_param_breakdown({})
    with pytest.raises(ValueError, match="configs is empty"):
        plot_kv_cache({})
