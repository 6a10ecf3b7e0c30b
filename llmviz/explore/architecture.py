"""Explorers for the architecture chapters (13-15).

* :func:`architecture_explorer`: depth, width, heads and kv heads -> parameters by component,
  FLOPs per token and KV-cache memory against context, for a Llama-style decoder.
* :func:`zoo_explorer`: a column of the model table and a year -> how many models used each
  choice that year and up to it (data from :mod:`llmviz.model.zoo`).
* :func:`sampling_explorer`: temperature, top-k, top-p and min-p -> which tokens survive and
  the distribution a sample is drawn from (computed by :mod:`llmviz.model.sampling`).

Frame functions are pure and fast (closed-form counts; one softmax over a short vocabulary)
and always return the same number of traces.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import torch

from ..analysis.parameters import count_parameters, flops_per_token, kv_cache_bytes_for
from ..attention.metrics import row_entropy
from .._checks import check_choice, check_int_in, check_positive_int, check_real_in
from ..model.config import ModelConfig
from ..model.presets import llama2
from ..model.sampling import filtered_probs
from ..plots import PALETTE
from ._core import Control, Explorer, Frame

__all__ = [
    "architecture_frame", "architecture_explorer", "sampling_frame", "sampling_explorer",
    "zoo_frame", "zoo_explorer",
]

_COMPONENTS = ("embedding", "attention", "ffn", "norms", "lm_head")
_KV = {"MHA": None, "GQA-8": 8, "MQA": 1}
_CONTEXTS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]


def _config(n_layers: int, d_model: int, n_heads: int, kv: str, vocab_size: int) -> ModelConfig:
    check_choice(kv, "kv", tuple(_KV))
    check_positive_int(vocab_size, "vocab_size")
    g = _KV[kv]
    n_kv = n_heads if g is None else min(g, n_heads)
    return ModelConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                       n_kv_heads=n_kv, ffn="swiglu", tie_embeddings=False, max_seq_len=4096)


def architecture_frame(
    n_layers: int = 32, d_model: int = 4096, n_heads: int = 32, kv: str = "MHA",
    vocab_size: int = 32000,
) -> Frame:
    """Parameters by component (left) and KV-cache GiB vs context (right) of one shape."""
    c = _config(n_layers, d_model, n_heads, kv, vocab_size)
    counts = count_parameters(c)
    by = counts["by_component"]
    bars = go.Bar(x=list(_COMPONENTS), y=[by[k] / 1e9 for k in _COMPONENTS],
                  marker={"color": PALETTE[: len(_COMPONENTS)]}, xaxis="x", yaxis="y",
                  name="parameters (B)", showlegend=False)
    gib = [kv_cache_bytes_for(c, t) / 2**30 for t in _CONTEXTS]
    line = go.Scatter(x=_CONTEXTS, y=gib, mode="lines+markers", xaxis="x2", yaxis="y2",
                      line={"color": PALETTE[3]}, name=f"{kv}, G={c.n_kv_heads}")
    ref = llama2("7b")
    ref_line = go.Scatter(x=_CONTEXTS, y=[kv_cache_bytes_for(ref, t) / 2**30 for t in _CONTEXTS],
                          mode="lines", xaxis="x2", yaxis="y2", name="Llama-2-7B shape (MHA)",
                          line={"color": "#999", "dash": "dot"})
    flops = flops_per_token(c, seq_len=4096)
    # three short lines: a phone-width figure (about 420 px) shows each line whole
    title = (f"{counts['total'] / 1e9:.2f} B params · head dim {c.head_dim} · C/L "
             f"{d_model / n_layers:.0f}<br>training {flops / 1e9:.1f} GFLOP/token at T=4096"
             f"<br>KV cache {kv_cache_bytes_for(c, 4096) / 2**30:.2f} GiB at T=4096")
    return Frame(traces=[bars, line, ref_line], layout={"title.text": title})


#: Depths on the static grid: 32 is the Llama 2 7B (and Mistral 7B) shape.
_LAYERS = (6, 12, 24, 32, 48, 96)


def architecture_explorer(*, vocab_size: int = 32000) -> Explorer:
    """Sliders: layers, d_model, heads, kv heads (MHA / GQA-8 / MQA); bf16 cache, batch 1.

    The static grid reaches the Llama 2 7B shape (32 layers, width 4096, 32 heads).
    """
    check_positive_int(vocab_size, "vocab_size")
    # the two panels are stacked, not side by side, so that neither squeezes the other's axis
    # titles at phone width; the title has its own band above the top panel
    layout = {
        "xaxis": {"domain": [0, 1], "anchor": "y", "title": {"text": "component"}},
        "yaxis": {"domain": [0.6, 1], "type": "log", "range": [-4, 3],
                  "title": {"text": "params (B)"}},
        "xaxis2": {"domain": [0, 1], "anchor": "y2", "type": "log",
                   "title": {"text": "context T (tokens); bf16 cache, batch 1"}},
        "yaxis2": {"domain": [0, 0.38], "type": "log", "range": [-4, 3.5], "anchor": "x2",
                   "title": {"text": "KV cache (GiB)"}},
        "legend": {"x": 0.01, "y": 0.38, "yanchor": "top", "bgcolor": "rgba(255,255,255,0.6)"},
        # below the plotly toolbar (about 35 px), above the top panel
        "title": {"font": {"size": 12}, "y": 1 - 40 / 960, "yanchor": "top"},
        "height": 960,
        "margin": {"t": 110, "b": 70 + 70 * 4, "l": 60, "r": 20},
    }
    return Explorer(
        architecture_frame,
        [
            Control("n_layers", _LAYERS, default=24, label="layers L", live=(1, 128, 1)),
            Control("d_model", (512, 1024, 2048, 4096, 8192), default=2048, label="width C"),
            Control("n_heads", (8, 16, 32, 64), default=16, label="heads H"),
            Control("kv", tuple(_KV), default="MHA", label="kv heads"),
        ],
        title="Depth, width and heads -> parameters, FLOPs, KV cache",
        layout=layout,
        fixed={"vocab_size": vocab_size},
    )


def _demo_logits(n: int = 30) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    ranks = torch.arange(1, n + 1, dtype=torch.float32)
    return -1.1 * ranks.log() + 0.3 * torch.randn(n, generator=g)  # Zipf-like with noise


def sampling_frame(
    temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
    logits: torch.Tensor | None = None, labels: Sequence[str] | None = None, show: int = 30,
) -> Frame:
    """Bars: the model's distribution (grey) and the one sampled from after the filters
    (colour), for the ``show`` most likely tokens. The filters act on the whole vocabulary; the
    title counts over all of it. ``top_k=0``, ``top_p=1`` and ``min_p=0`` switch a filter off."""
    check_positive_int(show, "show")
    check_int_in(top_k, "top_k", 0)
    check_real_in(top_p, "top_p", 0.0, 1.0)
    logits = _demo_logits() if logits is None else torch.as_tensor(logits, dtype=torch.float32)
    order = torch.argsort(logits, descending=True)
    logits = logits[order]
    names = [str(i) for i in order.tolist()] if labels is None else [labels[i] for i in order.tolist()]
    base = torch.softmax(logits, -1)
    probs = filtered_probs(logits, temperature=temperature, top_k=top_k or None,
                           top_p=top_p if top_p < 1 else None, min_p=min_p or None)
    kept = int((probs > 0).sum())
    mass = float(base[probs > 0].sum())
    n = min(show, len(names))
    traces = [
        go.Bar(x=names[:n], y=base[:n].tolist(), name="model (T=1)", marker={"color": "#bbb"}),
        go.Bar(x=names[:n], y=probs[:n].tolist(), name="sampled from", marker={"color": PALETTE[0]}),
    ]
    title = (f"{kept} of {len(names)} tokens kept · they held {mass:.0%} of the model's mass · "
             f"entropy {float(row_entropy(probs)):.2f} nats")
    return Frame(traces=traces, layout={"title.text": title})


def sampling_explorer(
    logits: torch.Tensor | None = None, *, labels: Sequence[str] | None = None, show: int = 30
) -> Explorer:
    """Sliders: temperature, top-k, top-p, min-p over ``logits`` (V,) (a demo Zipf-like
    distribution by default; pass a trained model's next-token logits and token labels).
    ``show`` bars are drawn (the most likely tokens); the filters see the whole vocabulary."""
    check_positive_int(show, "show")
    if logits is not None:
        logits = torch.as_tensor(logits, dtype=torch.float32).detach().cpu()
        if logits.ndim != 1:
            raise ValueError(f"logits must be one row (V,), got shape {tuple(logits.shape)}")
        if labels is not None and len(labels) != logits.numel():
            raise ValueError(f"labels has {len(labels)} entries but logits has {logits.numel()}")
    layout = {
        "barmode": "overlay",
        "yaxis": {"range": [0, 1], "title": {"text": "probability"}},
        "xaxis": {"title": {"text": "token (most likely first)"}, "type": "category"},
        "title": {"font": {"size": 12}},
    }
    return Explorer(
        sampling_frame,
        [
            Control("temperature", (0.25, 0.5, 1.0, 1.5, 2.0), default=1.0, live=(0.05, 3.0, 0.05)),
            Control("top_k", (0, 3, 10), default=0, label="top-k (0 = off)"),
            Control("top_p", (0.5, 0.8, 0.9, 0.95, 1.0), default=1.0, label="top-p (1 = off)"),
            Control("min_p", (0.0, 0.05, 0.1, 0.2), default=0.0, label="min-p (0 = off)"),
        ],
        title="Sampling filters",
        layout=layout,
        fixed={"logits": logits, "labels": labels, "show": show},
    )


_ZOO_COLUMNS = ("norm", "placement", "position", "activation", "kv_kind", "ffn_kind", "layer_mix",
                "qk_norm")


def zoo_frame(column: str = "norm", year: int = 2023) -> Frame:
    """Bars: models in the zoo using each value of ``column``, up to ``year`` and in ``year``."""
    from ..model.zoo import zoo_table

    check_choice(column, "column", _ZOO_COLUMNS)
    check_int_in(year, "year", 1900, 2100)
    df = zoo_table()
    values = df[column].astype(str)
    cats = sorted(values.unique(), key=lambda v: -int((values == v).sum()))
    upto = [int(((values == v) & (df["year"] <= year)).sum()) for v in cats]
    this = [int(((values == v) & (df["year"] == year)).sum()) for v in cats]
    traces = [
        go.Bar(x=cats, y=upto, name=f"released up to {year}", marker={"color": PALETTE[0]}),
        go.Bar(x=cats, y=this, name=f"released in {year}", marker={"color": PALETTE[1]}),
    ]
    n = int((df["year"] <= year).sum())
    return Frame(traces=traces, layout={"title.text": f"{column}: {n} models in the table up to {year}"})


def zoo_explorer() -> Explorer:
    """Sliders: which column of the corrected model table, and which year."""
    from ..model.zoo import ZOO

    years = tuple(sorted({e.year for e in ZOO}))
    return Explorer(
        zoo_frame,
        [
            Control("column", _ZOO_COLUMNS, default="norm"),
            Control("year", years, default=years[-1]),
        ],
        title="Which design choices spread, and when",
        layout={"barmode": "group", "yaxis": {"range": [0, len(ZOO)], "title": {"text": "models"}},
                "xaxis": {"type": "category"}},
    )
