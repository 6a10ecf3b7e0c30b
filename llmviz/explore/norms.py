"""Explorers for the normalisation and feed-forward chapters.

* :func:`norm_explorer`: norm type, eps and the size of one outlier feature -> histograms of
  the activations before and after the norm, with the tokens that carry the outlier shown
  separately (their other features get squashed towards zero).
* :func:`activation_explorer`: Swish's beta -> the curve and its derivative, with ReLU and
  GELU for reference (beta -> 0 is linear, beta = 1 is SiLU, beta ~ 1.7 is close to GELU,
  beta -> inf is ReLU).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from ..analysis.profiles import depth_profiles
from ..ffn import activation_curve, gelu, relu, swish
from ..model.config import ModelConfig
from ..model.lm import DecoderLM
from ..norm import batch_norm, layer_norm, rms_norm
from ..plots import PALETTE
from .._checks import check_choice, check_positive, check_real_in
from ._core import Control, Explorer, Frame

__all__ = [
    "norm_explorer", "norm_frame", "activation_explorer", "activation_frame",
    "placement_explorer", "placement_frame",
]

_T, _C, _STD = 256, 64, 0.1  # tokens, features, input scale
_OUTLIER_FEATURE = 3
_OUTLIER_EVERY = 8  # one token in 8 carries the outlier
_N_BINS = 60


def _activations(outlier: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, _T, _C, generator=g) * _STD  # (B=1, T, C)
    carriers = torch.zeros(_T, dtype=torch.bool)
    carriers[::_OUTLIER_EVERY] = True
    x[0, carriers, _OUTLIER_FEATURE] += outlier
    return x, carriers


#: The norms the explorer draws (GroupNorm, InstanceNorm: chapter 10's static figures).
_NORM_KINDS = ("LayerNorm", "RMSNorm", "BatchNorm")


def _normalise(kind: str, x: torch.Tensor, eps: float) -> torch.Tensor:
    if kind == "LayerNorm":
        return layer_norm(x, eps=eps)
    if kind == "RMSNorm":
        return rms_norm(x, eps=eps)
    return batch_norm(x, eps=eps)  # BatchNorm: per feature over the T tokens of this batch


def _bins(*groups: torch.Tensor) -> np.ndarray:
    """Equal-width bins symmetric about 0 that reach the largest |value| of every group."""
    extent = max(float(g.abs().max()) for g in groups)
    extent = extent * 1.001 if extent > 0 else 1.0  # the largest value falls inside the last bin
    return np.linspace(-extent, extent, _N_BINS + 1)


def _bars(values: torch.Tensor, bins: np.ndarray, name: str, color: str, xaxis: str,
          yaxis: str) -> go.Bar:
    v = values.flatten().numpy()
    counts, _ = np.histogram(v, bins=bins)  # the bins span every value: nothing is clipped
    centres = 0.5 * (bins[:-1] + bins[1:])
    return go.Bar(x=centres, y=counts, name=name, marker_color=color, opacity=0.75,
                  xaxis=xaxis, yaxis=yaxis, width=bins[1] - bins[0])


def norm_frame(kind: str = "LayerNorm", eps: float = 1e-5, outlier: float = 20.0) -> Frame:
    """One explorer frame (pure): histograms before/after, outlier tokens apart."""
    check_choice(kind, "kind", _NORM_KINDS)
    check_positive(eps, "eps")
    check_real_in(outlier, "outlier", 0.0, 1e4)
    x, carriers = _activations(outlier)
    y = _normalise(kind, x, eps)
    others = torch.ones(_C, dtype=torch.bool)
    others[_OUTLIER_FEATURE] = False
    before = go.Scatter(
        x=np.arange(_C), y=x[0].abs().amax(0).numpy(), mode="markers+lines",
        name="max |x| per feature (before)", marker_color=PALETTE[7], xaxis="x", yaxis="y",
    )
    plain, carrier = y[0, ~carriers][:, others], y[0, carriers][:, others]
    bins = _bins(plain, carrier)
    after_plain = _bars(plain, bins, "after: ordinary tokens", PALETTE[0], "x2", "y2")
    after_carrier = _bars(carrier, bins, "after: tokens with the outlier (other features)",
                          PALETTE[3], "x2", "y2")
    title = (f"{kind}, eps={eps:g}, outlier={outlier:g}: std of ordinary features after = "
             f"{float(plain.std()):.2f} (ordinary tokens) vs {float(carrier.std()):.2f} "
             "(outlier tokens)")
    return Frame(traces=[before, after_plain, after_carrier],
                 layout={"title.text": title, "xaxis2.range": [float(bins[0]), float(bins[-1])]})


def norm_explorer() -> Explorer:
    """Norm type / eps / outlier size -> activations before and after normalisation.

    Input: 256 tokens x 64 features drawn with std 0.1; every 8th token carries an outlier
    of the chosen size in feature 3 (the "massive activation" pattern of real LLMs).
    Left: the largest |value| per feature before the norm (log axis, nothing clipped).
    Right: histogram of the *other* features after the norm, for ordinary tokens and for the
    tokens carrying the outlier, on a log count axis; the bins span the largest |value| of
    each frame (nothing is clipped), so the x-range changes with the frame. Per-token norms
    squash the carriers' other features; eps
    matters once it is comparable to the variance (0.01 here).
    """
    return Explorer(
        norm_frame,
        [
            Control("kind", _NORM_KINDS, default="LayerNorm", label="norm"),
            Control("eps", (1e-6, 1e-4, 1e-2, 1e-1), default=1e-6, label="eps"),
            Control("outlier", (0.0, 1.0, 5.0, 20.0, 100.0), default=20.0, label="outlier size"),
        ],
        title="Normalisation with an outlier feature",
        layout={
            "xaxis": {"domain": [0.0, 0.42], "title": {"text": "feature"}},
            "yaxis": {"type": "log", "range": [-1.3, 2.2], "title": {"text": "max |x| before"}},
            "xaxis2": {"domain": [0.52, 1.0], "title": {"text": "other features after the norm (full range)"}},
            "yaxis2": {"anchor": "x2", "type": "log", "range": [-0.1, 4.3], "title": {"text": "count (log)"}},
            "barmode": "overlay",
            "legend": {"orientation": "h", "y": 1.12},
            "title": {"font": {"size": 12}},
        },
    )


# ----------------------------------------------------------------------------- activations
_X = torch.linspace(-5.0, 5.0, 201)


def activation_frame(beta: float = 1.0) -> Frame:
    """One explorer frame (pure): Swish(beta) with ReLU and GELU, values and derivatives."""
    check_positive(beta, "beta")
    xs = _X.numpy()
    traces = []
    for name, fn, color, dash in (
        ("ReLU", relu, PALETTE[7], "dot"),
        ("GELU", gelu, PALETTE[2], "dash"),
        (f"Swish β={beta:g}", lambda x: swish(x, beta), PALETTE[3], "solid"),
    ):
        y, g = (v.numpy() for v in activation_curve(fn, _X))
        traces.append(go.Scatter(x=xs, y=y, name=name, line={"color": color, "dash": dash},
                                 xaxis="x", yaxis="y", legendgroup=name))
        traces.append(go.Scatter(x=xs, y=g, name=name, line={"color": color, "dash": dash},
                                 xaxis="x2", yaxis="y2", legendgroup=name, showlegend=False))
    min_val = float(y.min())  # y: the last curve drawn, Swish
    return Frame(traces=traces, layout={
        "title.text": f"Swish(x) = x·sigmoid({beta:g}·x): minimum {min_val:.3f}"})


def activation_explorer() -> Explorer:
    """Swish's beta -> curve (left) and derivative (right), ReLU and GELU for reference."""
    return Explorer(
        activation_frame,
        [Control("beta", (0.1, 0.5, 1.0, 1.702, 3.0, 10.0), default=1.0, label="β",
                 live=(0.1, 10.0, 0.1))],
        title="Swish: from linear to ReLU",
        layout={
            "xaxis": {"domain": [0.0, 0.45], "title": {"text": "x"}},
            "yaxis": {"range": [-1.0, 5.0], "title": {"text": "act(x)"}},
            "xaxis2": {"domain": [0.55, 1.0], "title": {"text": "x"}},
            "yaxis2": {"anchor": "x2", "range": [-0.3, 1.4], "title": {"text": "d act / dx"}},
        },
    )


# ----------------------------------------------------------------------------- placement
_PLACEMENT_COLORS = {"post": PALETTE[3], "pre": PALETTE[0], "sandwich": PALETTE[2], "deepnorm": PALETTE[4]}
_EMBEDDINGS = ("raw", "x sqrt(C)")  # GPT-2's 0.02-std embedding, or scaled by sqrt(C) (Vaswani)
# log10 ranges of the two y axes, fixed over the explorer's whole grid (tests check every frame
# fits): gradients from deep post-norm's smallest to the sandwich's largest, RMS from the raw
# pre-norm stream (~0.02) to the sandwich's grown stream.
_GRAD_RANGE = (-2.0, 2.3)  # 0.01 to 200
_RMS_RANGE = (-2.0, 1.0)  # 0.01 to 10


def placement_frame(placement: str = "pre", n_layers: int = 12, embedding: str = "raw") -> Frame:
    """One explorer frame (pure): a freshly initialised model's per-layer gradient norm and
    residual-stream RMS for one norm placement and depth (:func:`llmviz.analysis.depth_profiles`).

    ``embedding="raw"`` feeds the 0.02-std token embedding to block 0 as GPT-2 does;
    ``"x sqrt(C)"`` multiplies it by sqrt(C) first, as the original Transformer did.
    """
    check_choice(embedding, "embedding", _EMBEDDINGS)
    with torch.random.fork_rng():  # seed a copy of the RNG: the caller's state is untouched
        torch.manual_seed(0)
        cfg = ModelConfig(d_model=32, n_heads=4, n_layers=n_layers, max_seq_len=32,
                          placement=placement, norm="layer", ffn="mlp", bias=True,
                          embed_scale=embedding != "raw")
        model = DecoderLM(cfg)
        ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(1))
        prof = depth_profiles(model, ids)
    layers = np.arange(n_layers)
    color = _PLACEMENT_COLORS[placement]
    traces = [
        go.Scatter(x=layers, y=prof["grad_norm"], mode="lines+markers", name="gradient norm",
                   line={"color": color}, xaxis="x", yaxis="y"),
        go.Scatter(x=layers, y=prof["residual_rms"], mode="lines+markers", name="residual RMS",
                   line={"color": color, "dash": "dot"}, xaxis="x2", yaxis="y2"),
    ]
    grads = prof["grad_norm"]
    return Frame(traces=traces, layout={
        "title.text": (f"{placement}-norm, {n_layers} layers, embedding {embedding}: largest / "
                       f"smallest block gradient = {max(grads) / min(grads):.2g}")})


def placement_explorer() -> Explorer:
    """Norm placement x depth x embedding scale -> per-layer gradient norm and residual-stream
    RMS at initialisation.

    The model is a byte-level :class:`~llmviz.model.DecoderLM` (C = 32, 4 heads, LayerNorm,
    GELU MLP) on random tokens; each frame is one forward and backward pass. Both y axes are
    logarithmic and fixed over the whole grid (``_GRAD_RANGE``, ``_RMS_RANGE``, checked by the
    tests to contain every frame's values): the pre-norm stream at the embedding's scale
    (about 0.02) and the sandwich's large gradients are both in view.
    """
    return Explorer(
        placement_frame,
        [
            Control("placement", ("post", "pre", "sandwich", "deepnorm"), default="pre", label="placement"),
            Control("n_layers", (4, 8, 16, 24), default=8, label="layers"),
            Control("embedding", _EMBEDDINGS, default="raw", label="embedding"),
        ],
        title="Gradient norm and residual growth at initialisation",
        layout={
            "xaxis": {"domain": [0.0, 0.45], "title": {"text": "layer"}, "range": [-0.5, 23.5]},
            "yaxis": {"type": "log", "range": list(_GRAD_RANGE),
                      "title": {"text": "gradient norm of the block (log)"}},
            "xaxis2": {"domain": [0.55, 1.0], "title": {"text": "layer"}, "range": [-0.5, 23.5]},
            "yaxis2": {"anchor": "x2", "type": "log", "range": list(_RMS_RANGE),
                       "title": {"text": "RMS of the residual stream (log)"}},
            "showlegend": True,
        },
    )
