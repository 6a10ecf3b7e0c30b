"""Explorer for chapter 19: the memory a hybrid of linear and softmax layers holds per sequence.

* :func:`hybrid_memory_bytes`: bytes one sequence keeps at a context length in a stack where
  some layers are linear attention (a fixed state, :func:`llmviz.attention.linear.state_bytes`)
  and the rest softmax attention (a key/value cache that grows with every token).
* :func:`linear_frame` / :func:`linear_explorer`: linear heads, head width and the
  linear : softmax ratio -> memory against context length, beside an all-softmax stack.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .._checks import check_positive_int
from ..attention.linear import state_bytes
from ..plots import PALETTE
from ._core import Control, Explorer, Frame

__all__ = ["hybrid_memory_bytes", "linear_frame", "linear_explorer"]


def hybrid_memory_bytes(context: int, *, n_layers: int, ratio: int | None, n_kv_heads: int,
                        head_dim: int, linear_heads: int, linear_head_dim: int,
                        bytes_per_value: int = 2) -> int:
    """Bytes one sequence holds at ``context`` tokens.

    ``ratio`` linear layers per softmax layer (every ``ratio + 1``-th layer is softmax, as in
    Qwen3-Next at 3); ``ratio=0`` is all softmax, ``ratio=None`` all linear. A softmax layer
    keeps ``2 * n_kv_heads * head_dim`` values per token; a linear layer keeps
    ``linear_heads * linear_head_dim ** 2`` values whatever the context (the short convolution's
    few inputs are left out).
    """
    for name, value in (("context", context), ("n_layers", n_layers), ("n_kv_heads", n_kv_heads),
                        ("head_dim", head_dim), ("linear_heads", linear_heads),
                        ("linear_head_dim", linear_head_dim),
                        ("bytes_per_value", bytes_per_value)):
        check_positive_int(value, name)
    if ratio is None:
        n_softmax = 0
    else:
        check_positive_int(ratio, "ratio", allow_zero=True)
        n_softmax = n_layers // (ratio + 1)
    n_linear = n_layers - n_softmax
    kv = n_softmax * 2 * n_kv_heads * head_dim * context * bytes_per_value
    state = n_linear * state_bytes(linear_heads, linear_head_dim, linear_head_dim,
                                   bytes_per_value=bytes_per_value)
    return kv + state


# ----------------------------------------------------------------------------- the explorer
_L, _G, _D = 48, 2, 256  # layers, key/value heads and head size of the softmax layers (Qwen3-Next)
_CONTEXTS = np.unique(np.geomspace(256, 262144, 31).astype(int))
_RATIOS = (0, 1, 3, 7, None)


def _ratio_text(ratio: int | None) -> str:
    return "all linear" if ratio is None else ("all softmax" if ratio == 0 else f"{ratio}:1")


def linear_frame(ratio: int | None = 3, linear_heads: int = 32, linear_head_dim: int = 128) -> Frame:
    """Memory per sequence (GiB, bf16) against context for a 48-layer stack with the given
    linear : softmax ratio, beside the all-softmax stack."""
    kw = dict(n_layers=_L, n_kv_heads=_G, head_dim=_D, linear_heads=linear_heads,
              linear_head_dim=linear_head_dim)
    mine = np.array([hybrid_memory_bytes(int(c), ratio=ratio, **kw) for c in _CONTEXTS]) / 2**30
    soft = np.array([hybrid_memory_bytes(int(c), ratio=0, **kw) for c in _CONTEXTS]) / 2**30
    state = hybrid_memory_bytes(1, ratio=None, **kw) / 2**30  # all linear: the state alone
    traces = [
        go.Scatter(x=_CONTEXTS, y=mine.astype(np.float32), mode="lines", name=_ratio_text(ratio),
                   line={"color": PALETTE[0], "width": 3}),
        go.Scatter(x=_CONTEXTS, y=soft.astype(np.float32), mode="lines", name="all softmax",
                   line={"color": PALETTE[3], "dash": "dot"}),
        go.Scatter(x=_CONTEXTS, y=np.full(len(_CONTEXTS), state, dtype=np.float32), mode="lines",
                   name="all linear (state only)", line={"color": PALETTE[5], "dash": "dash"}),
    ]
    cross = soft >= state  # where an all-softmax cache outgrows an all-linear state
    where = f"{int(_CONTEXTS[cross.argmax()]):,}" if cross.any() else "beyond 262,144"
    title = (f"{_ratio_text(ratio)}, linear heads {linear_heads} x {linear_head_dim}: at 256k "
             f"{mine[-1]:.2f} GiB ({mine[-1] / soft[-1]:.0%} of all softmax); the all-softmax "
             f"cache passes the all-linear state at {where} tokens")
    return Frame(traces=traces, layout={"title.text": title})


def linear_explorer() -> Explorer:
    """Linear : softmax ratio, linear heads and their width over a 48-layer stack whose softmax
    layers keep 2 key/value heads of 256 (Qwen3-Next's shapes), bf16, one sequence."""
    return Explorer(
        linear_frame,
        [
            Control("ratio", _RATIOS, default=3, label="linear : softmax layers"),
            Control("linear_heads", (8, 16, 32, 64), default=32, label="linear heads"),
            Control("linear_head_dim", (64, 128, 256), default=128, label="linear head width"),
        ],
        title="State against cache",
        layout={
            "xaxis": {"type": "log", "title": {"text": "context (tokens)"}},
            "yaxis": {"type": "log", "title": {"text": "memory per sequence (GiB)"}},
            "legend": {"x": 0.02, "y": 0.98},
            "title": {"font": {"size": 12}},
        },
    )
