"""Tests for llmviz.explore.norms: frames are pure, constant in size, and draw the library's numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from llmviz.analysis import depth_profiles
from llmviz.explore.norms import (
    activation_explorer,
    norm_explorer,
    placement_explorer,
    placement_frame,
)
from llmviz.ffn import activation_curve
from llmviz.model import DecoderLM
from llmviz.model.config import ModelConfig


def test_norm_explorer_frames():
    ex = norm_explorer()
    sizes = {len(ex.frame(**p).traces) for p in ex.grid()[::7]}
    assert sizes == {3}  # constant number of traces
    # Per-token norms squash the other features of tokens that carry the outlier; BatchNorm does not.
    ln = ex.frame(kind="LayerNorm", outlier=100.0).traces
    bn = ex.frame(kind="BatchNorm", outlier=100.0).traces
    def spread(bar):
        c, n = np.asarray(bar.x), np.asarray(bar.y)
        return float(np.sqrt((n * c**2).sum() / n.sum()))

    assert spread(ln[2]) < 0.3 * spread(ln[1])
    assert spread(bn[2]) > 0.7 * spread(bn[1])
    fig, spec = ex.static_figure()
    assert len(spec["ranges"]) == len(ex.grid())


@pytest.mark.parametrize("kind", ["LayerNorm", "RMSNorm", "BatchNorm"])
@pytest.mark.parametrize("eps", [1e-6, 1e-1])
def test_norm_explorer_histograms_clip_nothing(kind, eps):
    """Every value after the norm lands in a bin, and the x-axis range shows every bin."""
    from llmviz.explore.norms import _activations, _normalise, _C, _OUTLIER_FEATURE

    for outlier in (0.0, 100.0):
        frame = norm_explorer().frame(kind=kind, eps=eps, outlier=outlier)
        x, carriers = _activations(outlier)
        y = _normalise(kind, x, eps)
        others = torch.ones(_C, dtype=torch.bool)
        others[_OUTLIER_FEATURE] = False
        plain, carrier = frame.traces[1], frame.traces[2]
        assert sum(plain.y) == int((~carriers).sum()) * (_C - 1)  # every value counted
        assert sum(carrier.y) == int(carriers.sum()) * (_C - 1)
        lo, hi = frame.layout["xaxis2.range"]
        extreme = float(y[0][:, others].abs().max())
        assert lo <= -extreme and hi >= extreme  # the axis reaches the largest |value|


def test_placement_explorer_draws_depth_profiles():
    ex = placement_explorer()
    frames = [ex.frame(placement=p, n_layers=4) for p in ("post", "pre")]
    assert {len(f.traces) for f in frames} == {2}
    again = ex.frame(placement="pre", n_layers=4)
    assert list(again.traces[0].y) == list(frames[1].traces[0].y)  # pure: same input, same frame
    # the frame draws exactly what llmviz.analysis.depth_profiles computes
    with torch.random.fork_rng():
        torch.manual_seed(0)
        cfg = ModelConfig(d_model=32, n_heads=4, n_layers=4, max_seq_len=32, placement="pre",
                          norm="layer", ffn="mlp", bias=True)
        model = DecoderLM(cfg)
        ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(1))
        prof = depth_profiles(model, ids)
    assert list(again.traces[0].y) == pytest.approx(prof["grad_norm"])
    assert list(again.traces[1].y) == pytest.approx(prof["residual_rms"])


def test_placement_explorer_axes_show_every_frame():
    """The fixed log axes hold every frame of the grid: no point is drawn off the axis."""
    from llmviz.explore.norms import _GRAD_RANGE, _RMS_RANGE

    ex = placement_explorer()
    layout = ex.static_figure()[0].layout
    assert layout.yaxis.type == "log" and layout.yaxis2.type == "log"
    for params in ex.grid():
        grads, rms = (np.log10(np.asarray(t.y)) for t in ex.frame(**params).traces)
        assert _GRAD_RANGE[0] <= grads.min() and grads.max() <= _GRAD_RANGE[1], params
        assert _RMS_RANGE[0] <= rms.min() and rms.max() <= _RMS_RANGE[1], params


def test_placement_explorer_embedding_scale_changes_block0_input():
    raw = placement_frame("pre", 4, "raw").traces[1].y
    scaled = placement_frame("pre", 4, "x sqrt(C)").traces[1].y
    assert scaled[0] > 3 * raw[0]  # the pre-norm stream starts at the embedding's scale
    with pytest.raises(ValueError, match="embedding"):
        placement_frame("pre", 4, "sqrt")


def test_placement_explorer_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    placement_frame("pre", 4)
    assert torch.equal(torch.rand(3), expected)


def test_activation_explorer():
    ex = activation_explorer()
    frames = [ex.frame(beta=b) for b in (0.1, 1.0, 10.0)]
    assert {len(f.traces) for f in frames} == {6}
    swish_vals = [np.asarray(f.traces[4].y) for f in frames]
    x = np.asarray(frames[0].traces[4].x)
    np.testing.assert_allclose(swish_vals[1], x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    assert np.abs(swish_vals[2] - np.maximum(x, 0)).max() < 0.03  # large beta ~ ReLU
    assert "minimum" in frames[0].layout["title.text"]
    # the derivative panel is llmviz.ffn.activation_curve's autograd slope
    _, slope = activation_curve("swish", torch.tensor(x.copy(), dtype=torch.float32), beta=10.0)
    np.testing.assert_allclose(np.asarray(frames[2].traces[5].y), slope.numpy(), rtol=1e-6)
