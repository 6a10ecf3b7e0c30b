"""Chapter 19 figures: memory curves, recall dots, a state heatmap."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmviz.plots.linear import plot_memory_vs_context, plot_recall, plot_state  # noqa: E402


def test_memory_lines_and_unit():
    ctx = [1024, 2048, 4096]
    ax = plot_memory_vs_context(ctx, {"cache": [2**30, 2**31, 2**32], "state": [2**20] * 3})
    assert len(ax.lines) == 2 and "GiB" in ax.get_ylabel()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [1, 2, 4])
    assert ax.lines[1].get_linestyle() == "--"  # a flat curve is dashed
    plt.close("all")


def test_memory_bad_input():
    with pytest.raises(ValueError, match="contexts"):
        plot_memory_vs_context([0, 5], {"a": [1, 2]})
    with pytest.raises(ValueError, match="values for"):
        plot_memory_vs_context([1, 2], {"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="empty"):
        plot_memory_vs_context([1, 2], {})


def test_recall_bars_and_seeds():
    ax = plot_recall({"a": [0.2, 0.4, 0.6], "b": [0.9, 1.0, 0.8]}, chance=0.1)
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, [0.4, 0.9])
    assert len(ax.collections) == 6
    with pytest.raises(ValueError, match="same"):
        plot_recall({"a": [0.1], "b": [0.1, 0.2]})
    plt.close("all")


def test_state_heatmap():
    ax = plot_state(torch.eye(4) - 0.5, title="S")
    img = ax.images[0]
    assert img.get_array().shape == (4, 4) and img.norm.vmin == -img.norm.vmax
    with pytest.raises(ValueError, match="one head"):
        plot_state(torch.zeros(2, 3, 4))
    plt.close("all")
