"""Tests for llmviz.plots.norms: inspect the drawn artists against the library's numbers."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmviz.norm import layer_norm, reduction_mask, rms_norm  # noqa: E402
from llmviz.plots.norms import (  # noqa: E402
    plot_activations,
    plot_depth_profile,
    plot_distribution,
    plot_norm_axes,
    plot_norm_distributions,
    plot_stability_map,
)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _x(gen, *shape):
    return torch.randn(*shape, generator=gen)


def test_distribution_plot_keeps_the_outlier_in_view(gen):
    x = _x(gen, 32, 64)
    x[5, 7] = 250.0
    ax = plot_distribution(x)
    lo, hi = ax.get_xlim()
    assert lo <= float(x.min()) and hi >= 250.0
    assert ax.get_yscale() == "log"
    rug = [ln for ln in ax.lines if ln.get_marker() == "|"]
    assert len(rug) == 1 and 250.0 in rug[0].get_xdata()
    fig = plot_norm_distributions(x, {"LayerNorm": layer_norm(x), "RMSNorm": rms_norm(x)}, note="cpu")
    assert len(fig.axes) == 3
    for ax, y in zip(fig.axes, (x, layer_norm(x), rms_norm(x))):
        assert ax.get_xlim()[1] >= float(y.max()) and ax.get_xlim()[0] <= float(y.min())
    assert any(t.get_text() == "cpu" for t in fig.texts)
    with pytest.raises(ValueError, match="values is empty"):
        plot_distribution(torch.zeros(0))


def test_norm_axes_figure():
    fig = plot_norm_axes(("batch", "layer", "group"), n_groups=3)
    assert len(fig.axes) == 3
    assert (fig.axes[2].llmviz_mask == reduction_mask("group", n_groups=3).numpy()).all()
    assert "12 cells" in fig.axes[0].get_title()


def test_depth_profile_and_stability_map():
    ax = plot_depth_profile({"pre": [1.0, 2.0, 3.0], "post": torch.tensor([5.0, 1.0, 0.1])})
    assert len(ax.lines) == 2 and ax.get_yscale() == "log"
    assert list(ax.lines[1].get_ydata()) == pytest.approx([5.0, 1.0, 0.1])
    assert plot_depth_profile({"pre": [1.0, 2.0]}, log_y=False).get_yscale() == "linear"
    loss = np.array([[2.0, 2.1], [np.nan, 1.5]])
    ax = plot_stability_map(loss, rows=[1e-3, 1e-2], cols=[0, 20], vmin=1.0, vmax=3.0, value_label="spike")
    assert len(ax.images) == 1 and ax.images[0].get_clim() == (1.0, 3.0)
    assert ax.figure.axes[-1].get_ylabel() == "spike"  # the colour bar says what is shown
    assert sum(t.get_text() == "div" for t in ax.texts) == 1
    with pytest.raises(ValueError, match=r"expected \(len\(rows\), len\(cols\)\) = \(3, 2\)"):
        plot_stability_map(loss, rows=[1, 2, 3], cols=[0, 1])
    texts = [["a", "b"], ["c", "d"]]
    ax = plot_stability_map(loss, rows=["post", "pre"], cols=["x", "y"], labels=texts)
    shown = sorted(t.get_text() for t in ax.texts)
    assert shown == ["a", "b", "d", "div"]  # the diverged cell keeps its mark
    ax = plot_stability_map(loss, rows=[1, 2], cols=[0, 1], missing=[[False, True], [True, False]])
    assert sorted(t.get_text() for t in ax.texts) == ["1.50", "2.00", "not run", "not run"]
    assert ax.images[0].get_array().mask.tolist() == [[False, True], [True, False]]
    with pytest.raises(ValueError, match=r"missing has shape \(2,\)"):
        plot_stability_map(loss, rows=[1, 2], cols=[0, 1], missing=[True, False])
    with pytest.raises(ValueError, match=r"labels has shape \(1, 2\)"):
        plot_stability_map(loss, rows=[1, 2], cols=[0, 1], labels=[["a", "b"]])


def test_activation_plot_has_curves_and_derivatives():
    fig = plot_activations(("relu", "silu", "swish"), beta=2.0, x_range=(-3, 3))
    value_ax, slope_ax = fig.axes
    curves = [ln for ln in value_ax.lines if not ln.get_label().startswith("_")]
    slopes = [ln for ln in slope_ax.lines if not ln.get_label().startswith("_")]
    assert len(curves) == 3 and len(slopes) == 3
    x = curves[1].get_xdata()
    np.testing.assert_allclose(curves[1].get_ydata(), x / (1 + np.exp(-x)), rtol=1e-6)
    # derivative of ReLU is the step function
    np.testing.assert_allclose(slopes[0].get_ydata()[x > 0.01], 1.0)
    assert len(plot_activations(("gelu",), derivative=False).axes) == 1
