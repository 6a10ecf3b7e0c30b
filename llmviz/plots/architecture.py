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
from .._checks import check_flag, check_int_in
from ._style import PALETTE, get_ax

__all__ = [
    "plot_param_breakdown",
    "plot_kv_cache",
    "plot_aspect_ratios",
    "place_labels",
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
    fraction = check_flag(fraction, "fraction")
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


# Where a label may go relative to its point, in points: (dx, dy, ha, va), nearest first.
_LABEL_SPOTS = ((4, 2, "left", "bottom"), (4, -2, "left", "top"), (-4, 2, "right", "bottom"),
                (-4, -2, "right", "top"), (0, 5, "center", "bottom"), (0, -5, "center", "top"),
                (5, 0, "left", "center"), (-5, 0, "right", "center"), (2, 5, "left", "bottom"),
                (-2, 5, "right", "bottom"), (2, -5, "left", "top"), (-2, -5, "right", "top"))


def place_labels(ax, xy: Sequence[tuple[float, float]], labels: Sequence[str], *,
                 fontsize: float = 6, rings: Sequence[float] = (1, 2, 3, 4, 5, 6, 8, 10, 12),
                 marker_area: Sequence[float] | float = 36.0) -> list:
    """Annotate each point of ``xy`` (data coordinates) with its label so that no two labels
    overlap, no label covers another point, and every label stays inside the axes.

    Greedy: each label tries the spots of :data:`_LABEL_SPOTS` at growing distances
    (``rings``, multiples of the spot offsets); beyond the first ring a thin leader line joins
    label and point. A label that finds no free spot keeps the nearest one. Returns the
    annotations. ``marker_area`` is the scatter's ``s`` (points squared, one per point or one
    for all): labels keep clear of the whole marker. Set the axes' scales and limits before
    calling: placement uses the current transform. The labels are left out of the figure's
    layout engine, so a later draw does not move the axes under them.
    """
    from matplotlib.transforms import Bbox

    if len(xy) != len(labels):
        raise ValueError(f"xy has {len(xy)} points but labels has {len(labels)}; pass one label per point")
    fig = ax.figure
    fig.canvas.draw()  # fixes limits and layout, so that extents are final
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pts = ax.transData.transform(np.asarray(xy, dtype=float).reshape(-1, 2)) if len(xy) else []
    areas = np.broadcast_to(np.asarray(marker_area, dtype=float), (len(pts),))
    radii = np.sqrt(areas) / 2 * fig.dpi / 72  # marker radius in pixels
    dots = [Bbox.from_bounds(x - r, y - r, 2 * r, 2 * r) for (x, y), r in zip(pts, radii)]
    px = fig.dpi / 72  # pixels per point
    placed: list = []
    out = []
    for k, ((x, y), label) in enumerate(zip(xy, labels)):
        probe = ax.text(0, 0, label, fontsize=fontsize)  # measures the label once
        size = probe.get_window_extent(renderer)
        probe.remove()
        w, h = size.width, size.height
        (X, Y), chosen = pts[k], None
        for ring in rings:
            for dx, dy, ha, va in _LABEL_SPOTS:
                left = X + dx * ring * px - {"left": 0, "center": w / 2, "right": w}[ha]
                low = Y + dy * ring * px - {"bottom": 0, "center": h / 2, "top": h}[va]
                box = Bbox.from_bounds(left, low, w, h).padded(1)
                inside = (box.x0 >= frame.x0 and box.x1 <= frame.x1
                          and box.y0 >= frame.y0 and box.y1 <= frame.y1)
                if inside and not any(box.overlaps(b) for b in placed) and not any(
                        box.overlaps(d) for j, d in enumerate(dots) if j != k):
                    chosen = (dx * ring, dy * ring, ha, va, ring > 1, box)
                    break
            if chosen:
                break
        if chosen is None:  # crowded: the nearest spot, even if it overlaps
            dx, dy, ha, va = _LABEL_SPOTS[0]
            left, low = X + dx * px, Y + dy * px
            chosen = (dx, dy, ha, va, False, Bbox.from_bounds(left, low, w, h))
        dx, dy, ha, va, leader, box = chosen
        t = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha,
                        va=va, fontsize=fontsize,
                        arrowprops={"arrowstyle": "-", "lw": 0.6, "color": "#666",
                                    "shrinkA": 0, "shrinkB": 2} if leader else None)
        t.set_in_layout(False)
        placed.append(box)
        out.append(t)
    return out


def plot_aspect_ratios(df=None, *, ax=None, annotate: bool = True):
    """Real models' depth (layers) against width (d_model), log axes, with lines of constant
    aspect ratio d_model / n_layers; marker area grows with parameter count.

    Models that share a shape get one label ("LLaMA (65B) +3"); labels are placed so that
    they do not overlap (:func:`place_labels`).
    """
    annotate = check_flag(annotate, "annotate")
    if df is None:
        from ..model.zoo import zoo_table

        df = zoo_table()
    df = df.dropna(subset=["n_layers", "d_model"])
    ax = get_ax(ax, figsize=(8, 6))
    sizes = 20 + 60 * np.log10(1 + df["params_b"].to_numpy(dtype=float))
    ax.scatter(df["n_layers"], df["d_model"], s=sizes, color=PALETTE[0], alpha=0.7, zorder=3)
    xs = np.array([4, 160])
    for ratio, style in ((32, ":"), (64, "--"), (128, "-."), (256, "-")):
        ax.plot(xs, ratio * xs, style, color="#999", lw=0.8, zorder=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(3.5, 320)
    ax.set_ylim(400, 60000)
    for ratio in (32, 64, 128, 256):  # the ratio names sit at the right end of their lines
        ax.text(160 * 1.04, ratio * 160, f"C/L={ratio}", fontsize=7, color="#666",
                va="center", ha="left", clip_on=True)
    ax.set_xlabel("layers L (depth)")
    ax.set_ylabel("d_model C (width)")
    ax.set_title("Shapes of published models")
    if annotate:  # one label per distinct shape: "LLaMA (65B) +3" when four models share it
        groups = list(df.groupby(["n_layers", "d_model"], sort=False))
        xy = [key for key, _ in groups]
        labels = [g["name"].iloc[0] + (f" +{len(g) - 1}" if len(g) > 1 else "") for _, g in groups]
        area = {key: sizes[df.index.get_indexer(g.index)].max() for key, g in groups}
        place_labels(ax, xy, labels, marker_area=[area[key] for key in xy])
    return ax


#: Panel titles for the zoo's derived columns (others are titled by their column name).
_ADOPTION_TITLES = {"ffn_kind": "feed-forward: dense or mixture of experts",
                    "kv_kind": "keys and values: MHA, GQA, MQA or latent (MLA)",
                    "layer_mix": "layers: global, local, linear",
                    "qk_norm": "QK-norm"}


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
    check_int_in(top, "top", 1)
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
    ax.set_ylim(0, bottom.max() * 1.12)  # headroom: the tallest stack is never cut at the frame
    ax.set_title(_ADOPTION_TITLES.get(column, column))
    ax.legend(frameon=False, fontsize=7)
    return ax


def plot_adoption_grid(df=None, *, columns: Sequence[str] = ("norm", "placement", "position", "activation")):
    """One :func:`plot_adoption` panel per column; returns the Figure."""
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise TypeError(
            f"columns must be a non-empty sequence of zoo columns, got {columns!r}; e.g. ('norm',)"
        )
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
