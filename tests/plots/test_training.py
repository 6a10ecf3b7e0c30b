"""Tests for llmviz.plots.training: inspect the drawn artists."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmviz.analysis import divergence_grid  # noqa: E402
from llmviz.plots._style import PALETTE  # noqa: E402
from llmviz.plots.training import (  # noqa: E402
    length_traces,
    plot_length_curves,
    plot_training_curves,
)
from llmviz.training import History, LengthEval, TrainConfig  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _history(losses, diverged=False):
    h = History(config=TrainConfig(steps=max(1, len(losses))))
    h.loss = list(losses)
    h.lr = [1e-3] * len(losses)
    h.grad_norm = [1.0] * len(losses)
    h.diverged = diverged
    h.diverged_at = len(losses) - 1 if diverged else None
    return h


def test_training_curves_one_line_per_run():
    runs = {"a": _history([3, 2, 1]), "b": _history([4, 3, 2.5, 2])}
    ax = plot_training_curves(runs)
    lines = ax.get_lines()
    assert len(lines) == 2
    assert list(lines[1].get_ydata()) == [4, 3, 2.5, 2]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert lines[0].get_color() == PALETTE[0]


def test_training_curves_mark_divergence_and_keep_finite_part():
    runs = {"ok": _history([3, 2]), "boom": _history([3, 5, math.nan], diverged=True)}
    ax = plot_training_curves(runs, log_y=True)
    lines = ax.get_lines()
    assert len(lines) == 3  # two curves + one 'x' marker
    assert list(lines[1].get_ydata()) == [3, 5]
    assert lines[2].get_marker() == "x" and list(lines[2].get_ydata()) == [5]
    assert "boom (diverged)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_yscale() == "log"


def test_training_curves_accepts_plain_sequences_and_smoothing():
    ax = plot_training_curves([torch.tensor([4.0, 2.0, 0.0, 2.0]), [1.0, 1.0]], smooth=2)
    y = ax.get_lines()[0].get_ydata()
    assert list(y) == [4.0, 3.0, 1.0, 1.0]  # moving average of window 2
    fig, axes = plt.subplots(1, 2)
    assert plot_training_curves(_history([1, 2]), metric="lr", ax=axes[1]) is axes[1]


def test_training_curves_errors():
    with pytest.raises(ValueError, match="metric='acc' is not supported"):
        plot_training_curves(_history([1]), metric="acc")
    with pytest.raises(ValueError, match=r"smooth \(a window of steps\) must be a positive int, got 0"):
        plot_training_curves(_history([1]), smooth=0)
    with pytest.raises(TypeError, match="runs must be a History"):
        plot_training_curves(3.0)


def test_length_curves_lines_ticks_and_train_marker():
    res = {
        "alibi": LengthEval((64, 128, 256), (1.0, 1.1, 1.2), (64, 64, 64)),
        "rope": {64: 2.0, 256: 30.0, 128: 7.0},
    }
    ax = plot_length_curves(res, train_len=64)
    lines = ax.get_lines()
    assert len(lines) == 3  # two schemes + the training-length marker
    assert list(lines[0].get_ydata()) == pytest.approx([math.e, math.exp(1.1), math.exp(1.2)])
    assert list(lines[1].get_xdata()) == [64, 128, 256]  # sorted
    assert list(lines[1].get_ydata()) == [2.0, 7.0, 30.0]  # plain mapping drawn as given
    assert list(lines[2].get_xdata()) == [64, 64]
    assert ax.get_xscale() == "log"
    assert [int(t) for t in ax.get_xticks()] == [64, 128, 256]
    ax2 = plot_length_curves({"x": res["alibi"]}, metric="loss")
    assert list(ax2.get_lines()[0].get_ydata()) == [1.0, 1.1, 1.2]


def test_length_curves_errors():
    with pytest.raises(ValueError, match="results is empty"):
        plot_length_curves({})
    with pytest.raises(TypeError, match="each result must be a LengthEval"):
        plot_length_curves({"a": [1, 2]})


def test_length_traces_constant_count_and_highlight():
    res = {"a": {1: 1.0, 2: 2.0}, "b": {1: 3.0, 2: 4.0}}
    traces = length_traces(res, highlight="b")
    assert len(traces) == 2
    assert list(traces[1].y) == [3.0, 4.0]
    assert traces[1].line.width > traces[0].line.width


def test_divergence_grid_feeds_the_stability_map():
    from llmviz.plots.norms import plot_stability_map

    hist = {
        (1e-3, 0): _history([2.0] * 10),
        (1e-1, 0): _history([2.0, math.nan], diverged=True),
        (1e-3, 10): _history([1.0] * 10),
        (1e-1, 10): _history([1.5] * 10),
    }
    lrs, warmups, grid = divergence_grid(hist)
    assert lrs == [1e-3, 1e-1] and warmups == [0, 10]
    assert math.isnan(grid[0, 1]) and grid[1, 0] == 1.0
    ax = plot_stability_map(grid, rows=warmups, cols=lrs, row_label="warmup steps",
                            col_label="peak learning rate")
    images = ax.get_images()
    assert len(images) == 1
    assert images[0].get_clim() == (1.0, 2.0)  # finite range, nothing clipped
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("div") == 1 and "1.50" in texts
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.001", "0.1"]
    assert ax.get_ylabel() == "warmup steps"


def test_log_axes_use_plain_numbers_and_legend_placement():
    res = {f"s{i}": {64: 5.0 + i, 128: 6.0 + 2 * i, 512: 20.0 + i} for i in range(7)}
    ax = plot_length_curves(res, log_y=True)
    fig = ax.figure
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all("10^" not in t and "times" not in t for t in labels)
    assert "10" in labels
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.bbox.x1 - 1  # 8 entries: outside
    ax2 = plot_length_curves({"a": {1: 1.0, 2: 2.0}})
    assert ax2.get_legend().get_bbox_to_anchor().x0 < ax2.bbox.x1  # few entries: inside
    with pytest.raises(ValueError, match="legend='left' is not supported"):
        plot_length_curves({"a": {1: 1.0, 2: 2.0}}, legend="left")


def test_plot_length_estimates_draws_means_bars_and_baseline():
    import matplotlib.pyplot as plt

    from llmviz.evidence import summarize
    from llmviz.plots.training import plot_length_estimates

    est = {"A": {64: summarize([2.0, 2.2, 2.1]), 128: summarize([2.5, 2.4, 2.6])},
           "B": {64: summarize([3.0]), 128: summarize([3.1])}}  # B: no interval, no bar
    fig, ax = plt.subplots()
    plot_length_estimates(est, train_len=64, baseline=2.3, baseline_label="n-gram", ax=ax,
                          colors={"A": "#123456"})
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["A", "B"] and "n-gram" in labels and "training length T=64" in labels
    line_a = ax.get_lines()[0]
    assert list(line_a.get_ydata()) == pytest.approx([2.1, 2.5])
    assert line_a.get_color() == "#123456"
    assert ax.get_xlabel() == "evaluation length (tokens)"
    assert len(ax.collections) == 1  # one set of error bars: A's; B has none
    plt.close(fig)


def test_plot_length_estimates_bad_input():
    from llmviz.plots.training import plot_length_estimates

    with pytest.raises(ValueError, match="non-empty mapping"):
        plot_length_estimates({})
    with pytest.raises(TypeError, match="pass Estimates"):
        plot_length_estimates({"A": {64: 2.0}})
    with pytest.raises(ValueError, match="baseline must be finite"):
        from llmviz.evidence import summarize
        plot_length_estimates({"A": {64: summarize([1.0, 2.0])}}, baseline=float("nan"))
