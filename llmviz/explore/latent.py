"""Explorer for chapter 17: what each attention design keeps in the cache, against context.

:func:`frontier_explorer`: key/value heads, latent width and window -> cache GiB against context
length for MHA, GQA, MQA, multi-head latent attention, sliding-window GQA and a 3:1 linear/softmax
hybrid, all on one model shape (:data:`SHAPE`: Llama 2 7B's, the defaults of transformers'
``LlamaConfig``; the tests check that). The numbers come from
:func:`llmviz.analysis.design_cache_bytes`; this module only draws them.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analysis.kv_frontier import design_cache_bytes
from ..plots import PALETTE
from ._core import Control, Explorer, Frame

__all__ = ["SHAPE", "frontier_frame", "frontier_explorer"]

#: Model shape of the explorer: layers, query heads and head width of Llama 2 7B (bf16 cache).
SHAPE = {"n_layers": 32, "n_heads": 32, "head_dim": 128}
_CONTEXTS = np.unique(np.geomspace(1024, 131072, 29).astype(int))
_STYLE = {  # design -> (label, colour, dash)
    "mha": ("MHA (32 kv heads)", PALETTE[3], "dot"),
    "gqa": ("GQA", PALETTE[0], "solid"),
    "mqa": ("MQA (1 kv head)", PALETTE[4], "dot"),
    "mla": ("MLA (latent + rope key 64)", PALETTE[1], "solid"),
    "sliding": ("GQA, sliding window", PALETTE[2], "dash"),
    "hybrid": ("GQA in 1 of 4 layers, linear in 3", PALETTE[5], "dash"),
}


def frontier_frame(n_kv_heads: int = 8, latent_dim: int = 512, window: int = 4096) -> Frame:
    """Cache GiB (one sequence, bf16) against context for the six designs."""
    traces, at_end = [], {}
    for design, (label, colour, dash) in _STYLE.items():
        gib = np.array([design_cache_bytes(design, int(c), **SHAPE, n_kv_heads=n_kv_heads,
                                           latent_dim=latent_dim, rope_dim=64, window=window)
                        for c in _CONTEXTS]) / 2**30
        at_end[design] = gib[-1]
        traces.append(go.Scatter(x=_CONTEXTS, y=gib.astype(np.float32), mode="lines", name=label,
                                 line={"color": colour, "dash": dash}))
    title = (f"at 128k tokens: GQA-{n_kv_heads} {at_end['gqa']:.1f} GiB, MLA-{latent_dim} "
             f"{at_end['mla']:.2f} GiB, window {window} {at_end['sliding']:.2f} GiB "
             f"(MHA {at_end['mha']:.0f} GiB)")
    return Frame(traces=traces, layout={"title.text": title})


def frontier_explorer() -> Explorer:
    """Key/value heads of GQA (and of the window and hybrid designs), MLA's latent width and the
    sliding window, on Llama 2 7B's shape."""
    return Explorer(
        frontier_frame,
        [
            Control("n_kv_heads", (1, 2, 4, 8, 16, 32), default=8, label="GQA key/value heads"),
            Control("latent_dim", (128, 256, 512, 1024), default=512, label="MLA latent width"),
            Control("window", (1024, 4096, 16384), default=4096, label="sliding window"),
        ],
        title="The KV-cache frontier",
        layout={
            "xaxis": {"type": "log", "title": {"text": "context (tokens)"}},
            "yaxis": {"type": "log", "title": {"text": "cache per sequence (GiB, bf16)"}},
            "legend": {"orientation": "h", "y": -0.25},
            "title": {"font": {"size": 12}},
        },
    )
