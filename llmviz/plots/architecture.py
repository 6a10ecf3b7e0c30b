"""Figures for the architecture chapters (13-15): where the parameters are, what the KV cache
costs, the shapes of real models, and which design choices spread when.

Axes-level functions take ``ax=None`` and return the ``Axes``; :func:`plot_adoption_grid` returns a
``Figure``. Compute lives in :mod:`llmviz.analysis` and :mod:`llmviz.model.zoo`; these only draw.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from ..analysis.parameters import count_parameters, kv_cache_bytes_for
from ..model.config import ModelConfig
from ._style import PALETTE, get_ax

__all__ = [
    "plot_param_breakdown",
    "plot_kv_cache",
    "plot_aspect_ratios",
    "plot_adoption",
    "plot_adoption_grid",
    "plot_wide_vs_deep",
]

_COMPONENTS = ("embedding", "position", "attention", "ffn", "norms", "lm_head")


def _si(x: float, _pos: Any = None) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:g}{unit}"
    return f"{x:g}"


def plot_param_breakdown(
    models: Mapping[str, Any], *, ax=None, fraction: bool = False
):
    """Stacked bars: parameters by component (embedding, position, attention, ffn, norms,
    lm_head) for each named model or config.

    Args:
        models: ``{label: DecoderLM or ModelConfig}``.
        ax: Axes to draw on (default: a new figure).
        fraction: draw shares of the total instead of counts.
    """
    if not models:
        raise ValueError("models is empty; pass {label: model_or_config}")
    ax = get_ax(ax, figsize=(1.2 * len(models) + 3, 4))
    labels = list(models)
    counts = np.array([[count_parameters(models[k])["by_component"][c] for c in _COMPONENTS]
                       for k in labels], dtype=float)  # (models, components)
    if fraction:
        counts = counts / counts.sum(1, keepdims=True)
    bottom = np.zeros(len(labels))
    for j, comp in enumerate(_COMPONENTS):
        ax.bar(labels, counts[:, j], bottom=bottom, label=comp, color=PALETTE[j % len(PALETTE)])
        bottom += counts[:, j]
    ax.set_ylabel("share of parameters" if fraction else "parameters")
    if not fraction:
        ax.yaxis.set_major_formatter(FuncFormatter(_si))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title("Where the parameters are")
    return ax


def plot_kv_cache(
    configs: Mapping[str, ModelConfig],
    *,
    seq_lens: Sequence[int] | None = None,
    batch: int = 1,
    bytes_per_el: int = 2,
    ax=None,
):
    """KV-cache memory against context length, one line per config (log-log axes).

    Sliding-window layers keep at most their window, so their lines flatten.
    """
    if not configs:
        raise ValueError("configs is empty; pass {label: ModelConfig}")
    ax = get_ax(ax)
    seq_lens = list(seq_lens or [2**k for k in range(8, 18)])
    for i, (label, cfg) in enumerate(configs.items()):
        gib = [kv_cache_bytes_for(cfg, t, batch=batch, bytes_per_el=bytes_per_el) / 2**30 for t in seq_lens]
        ax.plot(seq_lens, gib, marker="o", ms=3, color=PALETTE[i % len(PALETTE)], label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length T (tokens)")
    ax.set_ylabel(f"KV cache (GiB, batch {batch}, {8 * bytes_per_el}-bit)")
    ax.legend(frameon=False)
    ax.set_title("KV-cache memory = 2 · L · G · D · T · bytes")
    return ax


def plot_aspect_ratios(df=None, *, ax=None, annotate: bool = True):
    """Real models' depth (layers) against width (d_model), log axes, with lines of constant
    aspect ratio d_model / n_layers; marker area grows with parameter count."""
    if df is None:
        from ..model.zoo import zoo_table

        df = zoo_table()
    df = df.dropna(subset=["n_layers", "d_model"])
    ax = get_ax(ax, figsize=(7, 5))
    sizes = 20 + 60 * np.log10(1 + df["params_b"].to_numpy(dtype=float))
    ax.scatter(df["n_layers"], df["d_model"], s=sizes, color=PALETTE[0], alpha=0.7, zorder=3)
    xs = np.array([4, 160])
    for ratio, style in ((32, ":"), (64, "--"), (128, "-."), (256, "-")):
        ax.plot(xs, ratio * xs, style, color="#999", lw=0.8, zorder=1)
        ax.text(xs[0], ratio * xs[0] * 1.1, f"C/L={ratio}", fontsize=7, color="#666", va="bottom")
    if annotate:  # one label per distinct shape: "LLaMA (65B) +3" when four models share it
        for (L, C), group in df.groupby(["n_layers", "d_model"], sort=False):
            extra = f" +{len(group) - 1}" if len(group) > 1 else ""
            ax.annotate(group["name"].iloc[0] + extra, (L, C), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("layers L (depth)")
    ax.set_ylabel("d_model C (width)")
    ax.set_title("Shapes of published models")
    return ax


def plot_adoption(df=None, *, column: str = "norm", ax=None, top: int = 4):
    """Stacked bars of how many models per year used each value of ``column`` (e.g. ``norm``,
    ``position``, ``activation``, ``placement``); rarer values are pooled as "other"."""
    if df is None:
        from ..model.zoo import zoo_table

        df = zoo_table()
    if column not in df.columns:
        raise ValueError(f"column {column!r} is not in the table; choose one of {list(df.columns)}")
    ax = get_ax(ax)
    values = df[column].astype(str)
    common = values.value_counts().index[:top]
    values = values.where(values.isin(common), "other")
    counts = df.assign(_v=values).groupby(["year", "_v"]).size().unstack(fill_value=0)
    order = [v for v in common if v in counts.columns] + (["other"] if "other" in counts.columns else [])
    counts = counts[order]
    years = counts.index.to_numpy()
    bottom = np.zeros(len(years))
    for j, v in enumerate(order):
        ax.bar(years, counts[v].to_numpy(), bottom=bottom, color=PALETTE[j % len(PALETTE)], label=v)
        bottom += counts[v].to_numpy()
    ax.set_xlabel("year")
    ax.set_ylabel("models in the table")
    ax.set_title(column)
    ax.legend(frameon=False, fontsize=7)
    return ax


def plot_adoption_grid(df=None, *, columns: Sequence[str] = ("norm", "placement", "position", "activation")):
    """One :func:`plot_adoption` panel per column; returns the Figure."""
    n = len(columns)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.4 * rows), layout="constrained",
                             squeeze=False)
    for ax, column in zip(axes.flat, columns):
        plot_adoption(df, column=column, ax=ax)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    return fig


def plot_wide_vs_deep(results: Sequence[Mapping[str, Any]], *, ax=None):
    """Validation loss against wall-clock time for several model shapes trained for the same
    budget. ``results``: dicts with ``label``, ``time_s`` (sequence) and ``loss`` (sequence)."""
    if not results:
        raise ValueError("results is empty")
    ax = get_ax(ax)
    for i, r in enumerate(results):
        ax.plot(r["time_s"], r["loss"], marker="o", ms=3, color=PALETTE[i % len(PALETTE)], label=r["label"])
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("validation loss (nats/token)")
    ax.legend(frameon=False)
    ax.set_title("Same parameters, different shapes")
    return ax
