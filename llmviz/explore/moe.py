"""Explorer for chapter 16: experts, top-k and shared experts -> parameters, active compute, memory.

:func:`experts_explorer` sizes the feed-forward layers of a stack (:data:`SHAPE`) made of
:class:`llmviz.moe.MoELayer`; the counts come from the layer's own ``parameter_counts``, built on
the ``meta`` device (shapes only, no memory), so this module only draws them.
"""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from ..moe import MoELayer
from ..plots import PALETTE
from ._core import Control, Explorer, Frame

__all__ = ["SHAPE", "moe_counts", "experts_frame", "experts_explorer"]

#: The stack the explorer sizes: width C, expert width F, layers (all sparse).
SHAPE = {"d_model": 2048, "d_expert": 1024, "n_layers": 24}


def moe_counts(n_experts: int, top_k: int, n_shared: int) -> dict[str, int]:
    """Total and per-token (active) parameters of one :class:`MoELayer` of :data:`SHAPE`."""
    with torch.device("meta"):
        layer = MoELayer(SHAPE["d_model"], n_experts, top_k, SHAPE["d_expert"], n_shared=n_shared)
    return layer.parameter_counts()


def experts_frame(n_experts: int = 64, top_k: int = 4, n_shared: int = 1) -> Frame:
    """Bars: feed-forward parameters of the stack, in total and used per token (billions)."""
    counts = moe_counts(n_experts, top_k, n_shared)
    L = SHAPE["n_layers"]
    total, active = counts["total"] * L / 1e9, counts["active"] * L / 1e9
    traces = [go.Bar(x=["total (memory)", "active per token (compute)"], y=[total, active],
                     marker={"color": [PALETTE[0], PALETTE[1]]}, name="parameters")]
    title = (f"{n_experts} experts, top-{top_k}, {n_shared} shared: {total:.2f} B parameters "
             f"({2 * total:.1f} GB in bf16), {active:.2f} B per token "
             f"({active / total:.0%}), about {2 * active:.1f} GFLOPs per token")
    return Frame(traces=traces, layout={"title.text": title})


def experts_explorer() -> Explorer:
    """Routed experts, experts per token and shared experts over a 24-layer, 2048-wide stack."""
    return Explorer(
        experts_frame,
        [
            Control("n_experts", (8, 16, 32, 64, 128, 256), default=64, label="routed experts"),
            Control("top_k", (1, 2, 4, 8), default=4, label="experts per token (top-k)"),
            Control("n_shared", (0, 1, 2), default=1, label="shared experts"),
        ],
        title="Experts: memory against compute",
        layout={
            "yaxis": {"type": "log", "title": {"text": "feed-forward parameters (billions)"}},
            "title": {"font": {"size": 11}},
        },
    )
