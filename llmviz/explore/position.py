"""Explorers for the position chapters.

* :func:`sinusoidal_explorer`: dimension and position -> that dimension's wave over positions,
  and the whole encoding vector of the chosen position.
* :func:`rope_explorer`: base, position and pair -> the pair's "clock hand" at that position
  (with its trail from position 0) and q.k against the offset for that base.
* :func:`t5_bucket_explorer`: T5's number of buckets, max distance and direction -> which
  bucket each relative position falls in.
* :func:`alibi_explorer`: number of heads and a head -> every head's slope, and how the chosen
  head's attention spreads over distance (uniform content, only the bias differs).
* :func:`rope_scaling_explorer`: context-extension method and factor -> the wavelength of every
  rotation pair, against plain RoPE and the old and new context lengths.

Each ``*_frame`` function is pure and fast; the explorers only add the controls.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from ..attention.metrics import mass_by_distance
from ..plots import PALETTE
from ..position.alibi import alibi_bias, alibi_slopes
from ..position.relative import t5_relative_bucket
from ..position.rope import RopeScaling, rope_frequencies
from ..position.rope_decay import rope_score_bound
from ..position.sinusoidal import sinusoidal_encoding, sinusoidal_wavelengths
from .._checks import check_flag, check_int_in, check_real_in
from ._core import Control, Explorer, Frame

__all__ = [
    "sinusoidal_frame",
    "sinusoidal_explorer",
    "rope_frame",
    "rope_explorer",
    "alibi_frame",
    "alibi_explorer",
    "t5_bucket_frame",
    "t5_bucket_explorer",
    "rope_scaling_frame",
    "rope_scaling_explorer",
]



def _f32(a: np.ndarray) -> np.ndarray:
    # float32 halves what the static page stores per frame; plenty for a picture
    return np.asarray(a, dtype=np.float32)


# ----------------------------------------------------------------------------- sinusoidal
_SIN_C, _SIN_T = 64, 128


def sinusoidal_frame(dimension: int = 8, position: int = 20) -> Frame:
    """Left: column ``dimension`` of the encoding over positions; right: row ``position``."""
    check_int_in(dimension, "dimension", 0, _SIN_C - 1)
    check_int_in(position, "position", 0, _SIN_T - 1)
    pe = _f32(sinusoidal_encoding(_SIN_T, _SIN_C).numpy())  # (T, C)
    pair = dimension // 2
    wavelength = float(sinusoidal_wavelengths(_SIN_C)[pair])
    kind = "sin" if dimension % 2 == 0 else "cos"
    traces = [
        go.Scatter(x=np.arange(_SIN_T), y=pe[:, dimension], mode="lines", name=f"dim {dimension}",
                   line={"color": PALETTE[0]}, xaxis="x", yaxis="y"),
        go.Scatter(x=[position], y=[pe[position, dimension]], mode="markers", name="position",
                   marker={"color": PALETTE[3], "size": 11}, xaxis="x", yaxis="y"),
        go.Bar(x=np.arange(_SIN_C), y=pe[position], name=f"PE({position})",
               marker_color=PALETTE[5], xaxis="x2", yaxis="y2"),
        go.Scatter(x=[dimension], y=[pe[position, dimension]], mode="markers", name="this dim",
                   marker={"color": PALETTE[3], "size": 11, "symbol": "diamond"},
                   xaxis="x2", yaxis="y2"),
    ]
    title = (f"dim {dimension} = {kind} of pair {pair}: wavelength {wavelength:,.1f} positions; "
             f"PE({position}, {dimension}) = {pe[position, dimension]:+.3f}")
    return Frame(traces=traces, layout={"title.text": title})


def sinusoidal_explorer() -> Explorer:
    """Dimension and position sliders over a C=64 sinusoidal table of 128 positions."""
    return Explorer(
        sinusoidal_frame,
        [
            Control("dimension", (0, 1, 4, 8, 16, 32, 48, 63), default=8, label="dimension",
                    live=(0, _SIN_C - 1, 1)),
            Control("position", (0, 5, 10, 20, 50, 100), default=20, label="position",
                    live=(0, _SIN_T - 1, 1)),
        ],
        title="Sinusoidal encoding: one dimension, one position",
        layout={
            "xaxis": {"domain": [0.0, 0.46], "title": {"text": "position"}, "range": [0, _SIN_T]},
            "yaxis": {"range": [-1.15, 1.15], "title": {"text": "PE(position, dim)"}},
            "xaxis2": {"domain": [0.56, 1.0], "title": {"text": "dimension"},
                       "range": [-1, _SIN_C]},
            "yaxis2": {"anchor": "x2", "range": [-1.15, 1.15]},
            "showlegend": False,
            "title": {"font": {"size": 12}},
        },
    )


# ----------------------------------------------------------------------------- RoPE
_ROPE_D = 64
_ROPE_OFFSETS = 256


def _rope_scores(base: float) -> np.ndarray:
    """q_m . k_0 / sqrt(D) for m = 0 .. 255 with fixed random q, k (seeded): (256,)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(_ROPE_D, generator=g, dtype=torch.float64)
    k = torch.randn(_ROPE_D, generator=g, dtype=torch.float64)
    scores, _ = rope_score_bound(q, k, torch.arange(_ROPE_OFFSETS), base=base)  # (256,)
    return _f32(scores.numpy() / math.sqrt(_ROPE_D))


def _wavelength_text(wavelength: float) -> str:
    # short wavelengths keep a decimal (pair 0 turns once per 2π ≈ 6.28 positions, not 6)
    return f"{wavelength:,.2f}" if wavelength < 100 else f"{wavelength:,.0f}"


def rope_frame(base: float = 10000.0, position: int = 10, pair: int = 4) -> Frame:
    """Left: pair ``pair``'s hand at ``position`` (trail from 0); right: q.k vs offset."""
    check_real_in(base, "base", 2.0, 1e9)
    check_int_in(position, "position", 0, 100_000)
    check_int_in(pair, "pair", 0, _ROPE_D // 2 - 1)
    inv_freq = rope_frequencies(_ROPE_D, base=base)[0].double()
    theta = float(inv_freq[pair])
    steps = np.arange(position + 1) if position <= 60 else np.linspace(0, position, 61)
    trail = theta * steps  # at most 61 dots: keeps the static page light
    angle = theta * position
    scores = _rope_scores(base)
    wavelength = 2 * math.pi / theta
    traces = [  # the unit circle is a layout shape (drawn once, not once per frame)
        go.Scatter(x=_f32(np.cos(trail)), y=_f32(np.sin(trail)), mode="markers",
                   marker={"size": 4, "color": PALETTE[5]}, name="positions 0..m",
                   xaxis="x", yaxis="y"),
        go.Scatter(x=[0, math.cos(angle)], y=[0, math.sin(angle)], mode="lines+markers",
                   line={"color": PALETTE[3], "width": 4}, marker={"size": [1, 10]},
                   name="hand at m", xaxis="x", yaxis="y"),
        go.Scatter(x0=0, dx=1, y=scores, mode="lines",  # x = 0, 1, ...: no x array to store
                   line={"color": PALETTE[0]}, name="q_m·k_0 / √D", xaxis="x2", yaxis="y2"),
        go.Scatter(x=[position], y=[scores[position] if position < _ROPE_OFFSETS else None],
                   mode="markers", marker={"color": PALETTE[3], "size": 10}, name="offset m",
                   xaxis="x2", yaxis="y2"),
    ]
    title = (f"base {base:g}, pair {pair}: θ = {theta:.3g} rad/pos, one turn per "
             f"{_wavelength_text(wavelength)} positions; angle at m={position}: "
             f"{math.degrees(angle) % 360:.0f}°")
    return Frame(traces=traces, layout={"title.text": title})


#: The static grid: 5 bases x 6 positions x 8 pairs (240 frames, about 0.7 MB of page).
ROPE_BASES = (100.0, 1000.0, 10000.0, 100000.0, 500000.0)
ROPE_POSITIONS = (0, 1, 3, 10, 50, 200)
ROPE_PAIRS = (0, 2, 4, 8, 12, 16, 24, 31)


def rope_explorer() -> Explorer:
    """Base, position and pair sliders for RoPE with head dim 64 (32 pairs)."""
    return Explorer(
        rope_frame,
        [
            Control("base", ROPE_BASES, default=10000.0, label="base"),
            Control("position", ROPE_POSITIONS, default=10, label="position m",
                    live=(0, _ROPE_OFFSETS - 1, 1)),
            Control("pair", ROPE_PAIRS, default=4, label="pair i", live=(0, _ROPE_D // 2 - 1, 1)),
        ],
        title="RoPE: one pair's rotation, and the score it produces",
        layout={
            # constrain="domain": the aspect ratio shrinks the panel, never the ranges, so the
            # figure is the same whatever width it was first drawn at (a live face draws its
            # first figure before the page lays it out)
            "xaxis": {"domain": [0.0, 0.38], "range": [-1.25, 1.25], "title": {"text": "x_{2i}"},
                      "scaleanchor": "y", "constrain": "domain"},
            "yaxis": {"range": [-1.25, 1.25], "title": {"text": "x_{2i+1}"}, "constrain": "domain"},
            "xaxis2": {"domain": [0.5, 1.0], "range": [0, _ROPE_OFFSETS],
                       "title": {"text": "offset m - n"}},
            "yaxis2": {"anchor": "x2", "range": [-3.5, 3.5], "title": {"text": "q·k / √D"}},
            "shapes": [{"type": "circle", "xref": "x", "yref": "y", "x0": -1, "y0": -1,
                        "x1": 1, "y1": 1, "line": {"color": "#ccc"}, "layer": "below"}],
            "showlegend": False,
            "title": {"font": {"size": 12}},
        },
    )


# ----------------------------------------------------------------------------- ALiBi
_ALIBI_T = 128
_MAX_HEADS = 16


def alibi_frame(n_heads: int = 8, head: int = 0) -> Frame:
    """Left: slopes of all heads (chosen head highlighted); right: the chosen head's attention
    of the last query over distance, with equal content scores everywhere."""
    check_int_in(n_heads, "n_heads", 1, _MAX_HEADS)
    check_int_in(head, "head", 0, _MAX_HEADS - 1)
    head = min(head, n_heads - 1)
    slopes = alibi_slopes(n_heads)
    bias = alibi_bias(1, _ALIBI_T, slopes=slopes)  # (H, 1, S): the last query's row
    weights = _f32(mass_by_distance(bias.softmax(-1)).numpy())  # (H, S), distance 0 first
    mass = np.cumsum(weights[head])
    span90 = int(np.searchsorted(mass, 0.9))
    colours = [PALETTE[3] if h == head else PALETTE[0] for h in range(_MAX_HEADS)]
    slope_values = np.full(_MAX_HEADS, np.nan)
    slope_values[:n_heads] = slopes.numpy()
    traces = [
        go.Bar(x=np.arange(_MAX_HEADS), y=slope_values, marker_color=colours, name="slopes",
               xaxis="x", yaxis="y"),
        go.Scatter(x=np.arange(_ALIBI_T), y=weights[head], mode="lines",
                   line={"color": PALETTE[3]}, name="weight at distance", xaxis="x2", yaxis="y2"),
        go.Scatter(x=np.arange(_ALIBI_T), y=mass, mode="lines",
                   line={"color": PALETTE[0], "dash": "dot"}, name="mass within distance",
                   xaxis="x2", yaxis="y2"),
    ]
    title = (f"{n_heads} heads; head {head}: slope {float(slopes[head]):.4g}, 90% of its "
             f"attention within {span90} tokens (of {_ALIBI_T})")
    return Frame(traces=traces, layout={"title.text": title})


def alibi_explorer() -> Explorer:
    """Number of heads and head sliders; heads past ``n_heads - 1`` show the last head."""
    return Explorer(
        alibi_frame,
        [
            Control("n_heads", (1, 2, 3, 4, 6, 8, 12, 16), default=8, label="heads"),
            Control("head", (0, 1, 2, 3, 5, 7, 11, 15), default=0, label="head",
                    live=(0, _MAX_HEADS - 1, 1)),
        ],
        title="ALiBi: slope per head and the span it gives",
        layout={
            "xaxis": {"domain": [0.0, 0.4], "range": [-0.6, _MAX_HEADS - 0.4],
                      "title": {"text": "head"}},
            "yaxis": {"type": "log", "range": [math.log10(2**-8) - 0.2, 0.1],
                      "title": {"text": "slope (log)"}},
            "xaxis2": {"domain": [0.5, 1.0], "range": [0, _ALIBI_T],
                       "title": {"text": "distance from the last query"}},
            "yaxis2": {"anchor": "x2", "range": [0, 1.02], "title": {"text": "attention"}},
            "showlegend": False,
            "title": {"font": {"size": 12}},
        },
    )


# ----------------------------------------------------------------------------- T5 buckets
_T5_RANGE = 300


def t5_bucket_frame(num_buckets: int = 32, max_distance: int = 128,
                    bidirectional: bool = True) -> Frame:
    """Bucket of every relative position j - i in [-300, 300], and where the exact range ends."""
    bidirectional = check_flag(bidirectional, "bidirectional")
    rel = torch.arange(-_T5_RANGE, _T5_RANGE + 1)
    buckets = t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                 max_distance=max_distance)
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    n_used = int(buckets.unique().numel())
    traces = [
        go.Scatter(x=rel.numpy().astype(np.int16), y=buckets.numpy().astype(np.int16),
                   mode="lines", line={"shape": "hv", "color": PALETTE[0]}, name="bucket"),
        go.Scatter(x=[-max_distance, -exact, exact, max_distance], y=[0, 0, 0, 0],
                   mode="markers", marker={"symbol": "line-ns-open", "size": 16,
                                           "color": PALETTE[3]},
                   name="exact range / max_distance"),
    ]
    title = (f"{num_buckets} buckets, max_distance {max_distance}, "
             f"{'bidirectional' if bidirectional else 'causal'}: distances < {exact} exact, "
             f"log-spaced up to {max_distance}, {n_used} buckets in use")
    return Frame(traces=traces, layout={"title.text": title})


def t5_bucket_explorer() -> Explorer:
    """Number of buckets, max distance and direction sliders for T5's relative buckets."""
    return Explorer(
        t5_bucket_frame,
        [
            Control("num_buckets", (8, 16, 32, 64), default=32, label="buckets"),
            Control("max_distance", (40, 64, 128, 256), default=128, label="max distance"),
            Control("bidirectional", (True, False), default=True, label="bidirectional"),
        ],
        title="T5 relative-position buckets",
        layout={
            "xaxis": {"range": [-_T5_RANGE, _T5_RANGE], "title": {"text": "relative position j - i"}},
            "yaxis": {"range": [-1, 65], "title": {"text": "bucket"}},
            "showlegend": False,
            "title": {"font": {"size": 12}},
        },
    )


def rope_scaling_frame(
    kind: str = "yarn", factor: int = 8, *, head_dim: int = 16, train_len: int = 64
) -> Frame:
    """Wavelength per rotation pair: plain RoPE vs RoPE scaled by ``kind`` to ``factor`` x
    ``train_len`` (dynamic NTK is evaluated at that new length)."""
    check_int_in(factor, "factor", 1, 1024)
    check_int_in(train_len, "train_len", 1)
    plain, _ = rope_frequencies(head_dim)
    if kind == "dynamic":
        scaling = RopeScaling("dynamic", factor=1.0, original_max_position_embeddings=train_len)
        scaled, attn = rope_frequencies(head_dim, scaling=scaling, seq_len=factor * train_len)
    else:
        scaling = RopeScaling(kind, factor=float(factor), original_max_position_embeddings=train_len)
        scaled, attn = rope_frequencies(head_dim, scaling=scaling)
    pairs = list(range(len(plain)))
    last = len(plain) - 1
    traces = [
        go.Scatter(x=pairs, y=_f32((2 * math.pi / plain).numpy()), mode="lines+markers",
                   name="plain RoPE", line={"color": "#999999", "dash": "dot"}),
        go.Scatter(x=pairs, y=_f32((2 * math.pi / scaled).numpy()), mode="lines+markers",
                   name=f"{kind}, factor {factor}", line={"color": PALETTE[0], "width": 3}),
        go.Scatter(x=[0, last], y=[train_len, train_len], mode="lines",
                   name=f"training length T={train_len}", line={"color": "#444", "dash": "dash"}),
        go.Scatter(x=[0, last], y=[factor * train_len] * 2, mode="lines",
                   name=f"new length {factor}T", line={"color": PALETTE[3], "dash": "dash"}),
    ]
    title = f"{kind} scaling, factor {factor}: attention factor {attn:.3f}"
    return Frame(traces=traces, layout={"title.text": title})


def rope_scaling_explorer(*, head_dim: int = 16, train_len: int = 64) -> Explorer:
    """Method and factor sliders for RoPE context extension (linear/PI, NTK, dynamic, YaRN)."""
    rope_scaling_frame(head_dim=head_dim, train_len=train_len)  # checks both now, not on display
    return Explorer(
        rope_scaling_frame,
        [
            Control("kind", ("linear", "ntk", "dynamic", "yarn"), default="yarn", label="method"),
            Control("factor", (2, 4, 8, 16), default=8, label="factor s"),
        ],
        title="RoPE wavelengths per pair under context-extension scaling",
        layout={
            "xaxis": {"title": {"text": "rotation pair i (fast to slow)"}},
            "yaxis": {"title": {"text": "wavelength 2π/θ (tokens, log scale)"}, "type": "log",
                      "range": [0, 6]},
        },
        fixed={"head_dim": head_dim, "train_len": train_len},
    )
