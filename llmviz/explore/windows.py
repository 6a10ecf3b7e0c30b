"""Explorer for chapter 18: sliding windows, global layers and sink tokens.

* :func:`layer_pattern`: the window of each layer for a window size and a "every k-th layer is
  global" ratio (the rule of :meth:`llmviz.model.ModelConfig.window_for`).
* :func:`stack_reach`: which keys can reach each query after each layer of a stack whose layers
  have different masks (local windows, global layers, sink tokens kept visible).
* :func:`reach_span`: how far back the last query can see after each layer, in closed form (no
  matrices), for real configurations with windows of thousands of tokens.
* :func:`cache_bytes`: the key/value cache a layer pattern holds at a context length.
* :func:`windows_explorer`: window, global-every, sink tokens and the local mask kind (sliding,
  or Llama 4's chunks) -> which keys the last query reaches layer by layer, and cache bytes
  against context length.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

from .._checks import check_positive_int
from ..attention.mask_kinds import MASK_KINDS
from ..attention.mask_kinds import layer_mask as mask_of_kind
from ..attention.masks import causal_mask, global_local_mask
from ..plots import PALETTE
from ._core import Control, Explorer, Frame

#: The local mask kinds a window can mean (read from :data:`llmviz.attention.mask_kinds.MASK_KINDS`).
LOCAL_KINDS = MASK_KINDS.names(local=True)

__all__ = [
    "LOCAL_KINDS",
    "layer_pattern",
    "layer_mask",
    "stack_reach",
    "reach_span",
    "cache_bytes",
    "windows_frame",
    "windows_explorer",
]


def _check_windows(windows: Sequence[int | None]) -> tuple[int | None, ...]:
    windows = tuple(windows)
    if not windows:
        raise ValueError("windows must name at least one layer (None = global, int = window)")
    for i, w in enumerate(windows):
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise ValueError(f"windows[{i}] must be None (global) or a positive int, got {w!r}")
    return windows


def layer_pattern(n_layers: int, window: int | None, global_every: int = 0) -> tuple[int | None, ...]:
    """Window of each layer: ``None`` = global, else the sliding window.

    ``global_every=k`` makes layers ``k-1, 2k-1, ...`` global (Gemma 3: k = 6, five local then
    one global); ``0`` makes none global; ``window=None`` makes every layer global.
    """
    check_positive_int(n_layers, "n_layers")
    check_positive_int(global_every, "global_every", allow_zero=True)
    if window is None:
        return (None,) * n_layers
    check_positive_int(window, "window")
    return tuple(None if global_every and i % global_every == global_every - 1 else window
                 for i in range(n_layers))


def layer_mask(T: int, window: int | None, sink_tokens: int = 0, *, local: str = "sliding") -> torch.Tensor:
    """``(T, T)`` bool self-attention mask of one layer: causal if ``window`` is None, else the
    ``local`` mask kind (one of :data:`LOCAL_KINDS`: a sliding window, or Llama 4's chunks of
    ``window``) with the first ``sink_tokens`` keys always visible."""
    check_positive_int(T, "T")
    check_positive_int(sink_tokens, "sink_tokens", allow_zero=True)
    if window is None:
        return causal_mask(T)
    return global_local_mask(T, local=mask_of_kind(local, window), global_tokens=min(sink_tokens, T))


def stack_reach(windows: Sequence[int | None], T: int, *, sink_tokens: int = 0,
                local: str = "sliding") -> torch.Tensor:
    """Receptive field after each layer of a stack with per-layer masks.

    Args:
        windows: the window of each layer (None = global), bottom layer first.
        T: sequence length.
        sink_tokens: first keys every local layer keeps visible (StreamingLLM's sinks).
        local: what a window means, one of :data:`LOCAL_KINDS` (``"chunked"``: Llama 4).

    Returns:
        ``(L, T, T)`` bool: ``out[l, i, j]`` is True when key ``j`` can influence query ``i``
        through layers ``0..l`` (a path of one hop per layer; the residual stream lets a token
        stay put, which the mask's diagonal already allows).
    """
    windows = _check_windows(windows)
    check_positive_int(T, "T")
    reach = torch.eye(T)
    out = []
    for w in windows:
        m = layer_mask(T, w, sink_tokens, local=local).float()
        reach = ((m @ reach) > 0).float()  # (T, T): one more hop through this layer
        out.append(reach > 0)
    return torch.stack(out)


def reach_span(windows: Sequence[int | None]) -> list[float]:
    """How many positions back the newest query can see after each layer (``math.inf`` once a
    global layer is passed). Each local layer with window ``w`` adds ``w - 1`` positions; sink
    tokens are left out (they add the first few positions, not a span). Sliding windows only: a
    chunk's reach depends on where the query sits in it (use :func:`stack_reach`)."""
    windows = _check_windows(windows)
    span, out = 0.0, []
    for w in windows:
        span = math.inf if w is None else span + (w - 1)
        out.append(span)
    return out


def cache_bytes(windows: Sequence[int | None], context: int, *, n_kv_heads: int, head_dim: int,
                bytes_per_value: int = 2, sink_tokens: int = 0) -> int:
    """Bytes of keys and values a decoder holds at ``context`` tokens (one sequence).

    A global layer keeps every token; a local layer keeps ``min(context, window + sink_tokens)``
    (a rolling window plus its sinks; a chunked layer at most one chunk, the same bound)."""
    windows = _check_windows(windows)
    check_positive_int(context, "context")
    check_positive_int(n_kv_heads, "n_kv_heads")
    check_positive_int(head_dim, "head_dim")
    check_positive_int(bytes_per_value, "bytes_per_value")
    check_positive_int(sink_tokens, "sink_tokens", allow_zero=True)
    tokens = sum(context if w is None else min(context, w + sink_tokens) for w in windows)
    return 2 * tokens * n_kv_heads * head_dim * bytes_per_value


# ----------------------------------------------------------------------------- the explorer
_L, _T = 12, 128  # layers and positions drawn
_G, _D = 8, 128  # key/value heads and head size of the cache panel (bf16)
_CONTEXTS = np.unique(np.geomspace(1024, 131072, 29).astype(int))


def windows_frame(window: int = 16, global_every: int = 6, sink_tokens: int = 0,
                  local: str = "sliding") -> Frame:
    """Left: for the last of 128 positions, which keys it sees directly (dark) and through the
    layers below (light), layer by layer; right: cache GiB against context length."""
    windows = layer_pattern(_L, window, global_every)
    reach = stack_reach(windows, _T, sink_tokens=sink_tokens, local=local)[:, -1].float()  # (L, T)
    direct = torch.stack([layer_mask(_T, w, sink_tokens, local=local)[-1] for w in windows]).float()
    z = (reach + direct).numpy().astype(np.float32)  # 2 direct, 1 through the stack, 0 not
    gib = np.array([cache_bytes(windows, int(c), n_kv_heads=_G, head_dim=_D,
                                sink_tokens=sink_tokens) for c in _CONTEXTS]) / 2**30
    full = np.array([cache_bytes((None,) * _L, int(c), n_kv_heads=_G, head_dim=_D)
                     for c in _CONTEXTS]) / 2**30
    seen = int(reach[-1].sum())
    size = "c" if local == "chunked" else "w"
    labels = [f"{i}: {'global' if w is None else f'{size}={w}'}" for i, w in enumerate(windows)]
    traces = [
        go.Heatmap(z=z, y=labels, x0=0, dx=1, zmin=0, zmax=2, showscale=False,
                   colorscale=[[0, "#f4f4f4"], [0.5, PALETTE[5]], [1, PALETTE[0]]],
                   xaxis="x", yaxis="y", name="reach"),
        go.Scatter(x=_CONTEXTS, y=gib.astype(np.float32), mode="lines", name="this pattern",
                   line={"color": PALETTE[0]}, xaxis="x2", yaxis="y2"),
        go.Scatter(x=_CONTEXTS, y=full.astype(np.float32), mode="lines", name="all global",
                   line={"color": PALETTE[3], "dash": "dot"}, xaxis="x2", yaxis="y2"),
    ]
    n_global = sum(w is None for w in windows)
    what = "chunk" if local == "chunked" else "window"
    title = (f"{n_global} global of {_L} layers, {what} {window}, {sink_tokens} sinks: the last "
             f"query reaches {seen} of {_T} positions; cache at 128k: {gib[-1]:.1f} GiB "
             f"({gib[-1] / full[-1]:.0%} of all-global)")
    return Frame(traces=traces, layout={"title.text": title})


def windows_explorer() -> Explorer:
    """Window (8-64), every k-th layer global (none, 1:1, 3:1, 5:1, all), 0 or 4 sink tokens and
    the local mask kind (sliding or chunked, from the registry) over a 12-layer stack; the cache panel uses 8 key/value heads of 128 in bf16."""
    return Explorer(
        windows_frame,
        [
            Control("window", (8, 16, 32, 64), default=16, label="window"),
            Control("global_every", (0, 6, 4, 2, 1), default=6, label="every k-th layer global (0: none)"),
            Control("sink_tokens", (0, 4), default=0, label="sink tokens"),
            Control("local", LOCAL_KINDS, default="sliding", label="local mask"),
        ],
        title="Windows, global layers and sinks",
        layout={
            "xaxis": {"domain": [0.0, 0.55], "title": {"text": f"key position (query = {_T - 1})"}},
            "yaxis": {"autorange": "reversed", "title": {"text": "layer"}},
            "xaxis2": {"domain": [0.68, 1.0], "type": "log", "title": {"text": "context (tokens)"}},
            "yaxis2": {"anchor": "x2", "title": {"text": "KV cache (GiB)"}, "rangemode": "tozero"},
            "legend": {"x": 0.7, "y": 1.0},
            "title": {"font": {"size": 12}},
        },
    )
