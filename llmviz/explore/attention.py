"""Explorers for the attention chapters (1-4).

* :func:`temperature_explorer`: softmax temperature, head dim and the 1/sqrt(d) scale on a
  score matrix -> the attention rows and their entropy.
* :func:`heads_explorer`: number of heads at fixed d_model -> every head's map of one layer.
* :func:`weights_explorer`: layer/head picker over weights you computed (e.g. a trained model).
* :func:`kv_cache_explorer`: kv heads and context length -> KV-cache memory of Llama 2 7B's
  shape (:func:`llmviz.model.presets.llama2`) with fewer kv heads.
* :func:`tiling_explorer`: tile size and causality -> which tiles of the score matrix tiled
  (FlashAttention-style) attention computes, skips or masks, and the memory it needs.

Every frame function is pure and cheap (small matrices, fixed seeds) and keeps the number of
traces constant, as :class:`llmviz.explore.Explorer` requires.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from ..analysis.parameters import kv_cache_bytes
from ..attention.masks import query_positions
from ..attention.metrics import head_metrics, row_entropy
from ..attention.module import MultiHeadAttention, attention_weights
from ..attention.tiled import tile_map, tiled_attention
from ..model.presets import llama2
from .._checks import check_flag, check_int_in, check_positive
from ..plots import PALETTE, PLOTLY_SEQUENTIAL
from ._core import Control, Explorer, Frame

__all__ = [
    "temperature_frame",
    "temperature_explorer",
    "heads_frame",
    "heads_explorer",
    "weights_explorer",
    "kv_cache_frame",
    "kv_cache_explorer",
    "tiling_frame",
    "tiling_explorer",
]

_T = 8  # tokens in the toy score matrices


# ----------------------------------------------------------------------------- temperature
def temperature_frame(temperature: float = 1.0, d: int = 64, scaled: bool = True) -> Frame:
    """One frame (pure): random q, k of head dim ``d`` -> weights ``softmax(q k^T * s / temperature)``.

    ``s`` is ``1/sqrt(d)`` when ``scaled`` else 1. Left: the (T, T) weights; right: the last
    query's row.
    """
    scaled = check_flag(scaled, "scaled")
    check_positive(temperature, "temperature")
    check_int_in(d, "d", 1, 4096)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, _T, d, generator=g)  # (B, H, T, D)
    k = torch.randn(1, 1, _T, d, generator=g)
    s = (1.0 / math.sqrt(d) if scaled else 1.0) / temperature
    w = attention_weights(q, k, scale=s)[0, 0]  # (T, T)
    ent = row_entropy(w).mean() / math.log(_T)
    heat = go.Heatmap(z=np.round(w.numpy(), 4), zmin=0, zmax=1, colorscale=PLOTLY_SEQUENTIAL, xaxis="x", yaxis="y",
                      colorbar={"title": {"text": "weight"}, "x": 0.46})
    bar = go.Bar(x=list(range(_T)), y=w[-1].numpy(), marker_color=PALETTE[0], xaxis="x2", yaxis="y2",
                 name="last query's row")
    how = f"1/sqrt({d})" if scaled else "1 (unscaled)"
    return Frame(traces=[heat, bar], layout={
        "title.text": f"scale {how}, temperature {temperature:g}: mean row entropy {ent:.2f} of the maximum"})


def temperature_explorer() -> Explorer:
    """Temperature, head dim and scaling -> attention weights (sharp vs flat rows)."""
    return Explorer(
        temperature_frame,
        [
            Control("temperature", (0.1, 0.3, 1.0, 3.0, 10.0), default=1.0, label="temperature",
                    live=(0.05, 10.0, 0.05)),
            Control("d", (4, 16, 64, 256), default=64, label="head dim d"),
            Control("scaled", (True, False), default=True, label="divide by sqrt(d)"),
        ],
        title="Softmax temperature and the 1/sqrt(d) scale",
        layout={
            "xaxis": {"domain": [0.0, 0.4], "title": {"text": "key"}},
            "yaxis": {"autorange": "reversed", "title": {"text": "query"}},
            "xaxis2": {"domain": [0.56, 1.0], "title": {"text": "key"}},
            "yaxis2": {"anchor": "x2", "range": [0, 1.02], "title": {"text": "weight (last query)"}},
            "showlegend": False,
        },
    )


# ----------------------------------------------------------------------------- heads
_D_MODEL = 64
_HEAD_GRID = 16  # mosaic always has room for 16 heads (4 x 4)


def _toy_inputs(T: int = 10) -> torch.Tensor:
    """Token embeddings plus a smooth positional signal, fixed seed: (1, T, C)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, T, _D_MODEL, generator=g)
    pos = torch.arange(T)[:, None] / 3.0
    freqs = torch.arange(_D_MODEL // 2)[None] / (_D_MODEL // 2)
    x = x + 2.0 * torch.cat([torch.sin(pos * (1 + 3 * freqs)), torch.cos(pos * (1 + 3 * freqs))], -1)
    return x


def _mosaic(w: np.ndarray, ncols: int = 4) -> np.ndarray:
    """(H, T, S) -> one image with the heads laid out on a ncols-wide grid, NaN gaps."""
    H, T, S = w.shape
    rows = math.ceil(_HEAD_GRID / ncols)
    out = np.full((rows * (T + 1) - 1, ncols * (S + 1) - 1), np.nan)
    for h in range(H):
        r, c = divmod(h, ncols)
        out[r * (T + 1): r * (T + 1) + T, c * (S + 1): c * (S + 1) + S] = w[h]
    return out


def heads_frame(n_heads: int = 4, causal: bool = True) -> Frame:
    """One frame (pure): a seeded MultiHeadAttention with ``n_heads`` at d_model=64 on a toy input."""
    causal = check_flag(causal, "causal")
    m = MultiHeadAttention(_D_MODEL, n_heads, causal=causal).eval()
    g = torch.Generator().manual_seed(0)  # own generator: no global seeding, same maps every call
    with torch.no_grad():
        for p in m.parameters():  # (out, in) weights, std 1/sqrt(in) like the default init
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    x = _toy_inputs()
    with torch.no_grad():
        _, w = m(x, return_weights=True)  # (1, H, T, T)
    met = head_metrics(w, causal=causal)
    heat = go.Heatmap(z=np.round(_mosaic(w[0].numpy()), 3), zmin=0, zmax=1, colorscale=PLOTLY_SEQUENTIAL,
                      xaxis="x", yaxis="y", colorbar={"title": {"text": "weight"}, "x": 0.62},
                      hoverongaps=False)
    ent = np.full(_HEAD_GRID, np.nan)
    ent[:n_heads] = met["entropy"].numpy()
    bar = go.Bar(x=list(range(_HEAD_GRID)), y=ent, marker_color=PALETTE[1], xaxis="x2", yaxis="y2",
                 name="entropy")
    params = sum(p.numel() for p in m.parameters())
    return Frame(traces=[heat, bar], layout={
        "title.text": f"{n_heads} heads x head_dim {_D_MODEL // n_heads} = d_model {_D_MODEL}; "
                      f"{params} parameters whatever the head count"})


def heads_explorer() -> Explorer:
    """Number of heads at fixed d_model -> each head's attention map (untrained, seeded)."""
    return Explorer(
        heads_frame,
        [
            Control("n_heads", (1, 2, 4, 8, 16), default=4, label="heads"),
            Control("causal", (True, False), default=True, label="causal"),
        ],
        title="Splitting d_model = 64 into heads",
        layout={
            "xaxis": {"domain": [0.0, 0.6], "showticklabels": False, "constrain": "domain"},
            "yaxis": {"autorange": "reversed", "showticklabels": False, "scaleanchor": "x",
                      "constrain": "domain"},
            "xaxis2": {"domain": [0.72, 1.0], "title": {"text": "head"}, "range": [-0.5, 15.5]},
            "yaxis2": {"anchor": "x2", "range": [0, 1.02], "title": {"text": "normalised entropy"}},
            "showlegend": False,
        },
    )


def weights_explorer(
    weights_per_layer: Sequence[Any], *, tokens: Sequence[str] | None = None, batch: int = 0,
    title: str = "Attention weights by layer and head",
) -> Explorer:
    """Layer and head pickers over precomputed weights (a per-layer list of ``(B, H, T, S)``).

    One shared colour scale (0 to the largest weight) across every layer and head.
    """
    if not isinstance(weights_per_layer, (list, tuple)) or not weights_per_layer:
        raise TypeError("weights_per_layer must be a non-empty per-layer list of (B, H, T, S) weights")
    maps = [torch.as_tensor(w).detach().float().cpu()[batch] for w in weights_per_layer]  # (H, T, S)
    L, H = len(maps), maps[0].shape[0]
    if L * H > 400:
        raise ValueError(f"{L} layers x {H} heads is too many frames for the static page (max 400)")
    top = max(float(m.max()) for m in maps)
    T, S = maps[0].shape[-2:]
    x = list(range(S)) if tokens is None else [f"{i}:{t}" for i, t in enumerate(tokens)]
    y = [x[i] for i in query_positions(T, S).tolist()]  # queries: the last T keys

    def frame(layer: int, head: int) -> Frame:
        w = np.round(maps[layer][head].numpy(), 4)
        return Frame(traces=[go.Heatmap(z=w, x=x, y=y, zmin=0, zmax=top, colorscale=PLOTLY_SEQUENTIAL)],
                     layout={"title.text": f"layer {layer}, head {head}"})

    layout = {"yaxis": {"autorange": "reversed", "title": {"text": "query"}},
              "xaxis": {"title": {"text": "key"}}}
    if L == 1:  # a control needs >= 2 values: with one layer, fix it and slide over heads only
        return Explorer(frame, [Control("head", tuple(range(H)), default=0)], title=title,
                        fixed={"layer": 0}, layout=layout)
    controls = [Control("layer", tuple(range(L)), default=0), Control("head", tuple(range(H)), default=0)]
    return Explorer(frame, controls, title=title, layout=layout)


# ----------------------------------------------------------------------------- KV cache
_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768)
_LLAMA2_7B = llama2("7b")  # 32 layers, 32 query heads of head_dim 128


def kv_cache_frame(n_kv_heads: int = 32, context: int = 4096, batch: int = 1) -> Frame:
    """One frame (pure): fp16 KV cache of Llama 2 7B's shape (:func:`llmviz.model.presets.llama2`)
    with ``n_kv_heads`` kv heads, against context length."""
    shape = {"n_layers": _LLAMA2_7B.n_layers, "head_dim": _LLAMA2_7B.head_dim, "batch": batch}
    gib = 2.0 ** 30
    xs = list(_CONTEXTS)
    ours = [kv_cache_bytes(n_kv_heads=n_kv_heads, seq_len=t, **shape) / gib for t in xs]
    mha = [kv_cache_bytes(n_kv_heads=_LLAMA2_7B.n_heads, seq_len=t, **shape) / gib for t in xs]
    now = kv_cache_bytes(n_kv_heads=n_kv_heads, seq_len=context, **shape) / gib
    return Frame(
        traces=[
            go.Scatter(x=xs, y=mha, name=f"MHA ({_LLAMA2_7B.n_heads} kv heads)",
                       line={"color": PALETTE[7], "dash": "dot"}),
            go.Scatter(x=xs, y=ours, name=f"{n_kv_heads} kv heads", line={"color": PALETTE[0]}),
            go.Scatter(x=[context], y=[now], mode="markers", marker={"size": 12, "color": PALETTE[3]},
                       name="selected context"),
        ],
        layout={"title.text": f"{n_kv_heads} kv heads, {context} tokens, batch {batch}: "
                              f"{now:.2f} GiB of KV cache (fp16)"},
    )


def kv_cache_explorer() -> Explorer:
    """kv heads, context and batch -> KV-cache memory of Llama 2 7B's shape."""
    return Explorer(
        kv_cache_frame,
        [
            Control("n_kv_heads", (1, 2, 4, 8, 16, 32), default=32, label="kv heads"),
            Control("context", _CONTEXTS, default=4096, label="context (tokens)"),
            Control("batch", (1, 8), default=1, label="batch"),
        ],
        title="KV-cache memory: 2 x layers x kv_heads x head_dim x tokens x batch x 2 bytes",
        layout={
            "xaxis": {"type": "log", "title": {"text": "context length (tokens)"}},
            "yaxis": {"type": "log", "range": [-3.5, 2.2], "title": {"text": "GiB"}},
        },
    )


# ----------------------------------------------------------------------------- tiling
_T_TILE = 64


def tiling_frame(block: int = 16, causal: bool = True) -> Frame:
    """One frame (pure): the (T, T) score matrix split into ``block`` x ``block`` tiles.

    Colour: 0 = skipped (entirely above the diagonal), 1 = computed with a partial mask
    (the diagonal tiles), 2 = computed in full: :func:`llmviz.attention.tiled.tile_map`. The
    counts come from :func:`llmviz.attention.tiled.tiled_attention` run on a small input.
    """
    causal = check_flag(causal, "causal")
    check_int_in(block, "block", 1, _T_TILE)
    n = math.ceil(_T_TILE / block)
    status = tile_map(_T_TILE, block_q=block, block_k=block, causal=causal).double().numpy()
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, _T_TILE, 8, generator=g)  # (B, H, T, D)
    _, stats = tiled_attention(q, q, q, causal=causal, block_q=block, block_k=block, return_stats=True)
    edges = [i * block - 0.5 for i in range(n)]
    heat = go.Heatmap(z=np.kron(status, np.ones((block, block)))[:_T_TILE, :_T_TILE], zmin=0, zmax=2,
                      colorscale=[[0, "#f0f0f0"], [0.5, PALETTE[1]], [1, PALETTE[0]]], showscale=False)
    grid = go.Scatter(
        x=sum(([e, e, None] for e in edges), []) + sum(([-0.5, _T_TILE - 0.5, None] for e in edges), []),
        y=sum(([-0.5, _T_TILE - 0.5, None] for e in edges), []) + sum(([e, e, None] for e in edges), []),
        mode="lines", line={"color": "white", "width": 1}, hoverinfo="skip",
    )
    full = _T_TILE * _T_TILE
    return Frame(traces=[heat, grid], layout={"title.text": (
        f"tiles {block}x{block}: {stats['tiles']} computed, {stats['skipped']} skipped; "
        f"largest score buffer {block * block} numbers vs {full} for the full matrix")})


def tiling_explorer() -> Explorer:
    """Tile size and causality -> the tiles tiled attention computes (blue: full, orange:
    diagonal with a mask, grey: skipped) on a 64 x 64 score matrix."""
    return Explorer(
        tiling_frame,
        [
            Control("block", (4, 8, 16, 32, 64), default=16, label="tile size"),
            Control("causal", (True, False), default=True, label="causal"),
        ],
        title="Tiled attention: which tiles of the score matrix are computed",
        layout={
            "xaxis": {"title": {"text": "key"}, "range": [-0.5, _T_TILE - 0.5], "constrain": "domain"},
            "yaxis": {"title": {"text": "query"}, "autorange": "reversed", "scaleanchor": "x",
                      "constrain": "domain"},
            "showlegend": False,
        },
    )
