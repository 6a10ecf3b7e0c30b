"""Training figures: loss curves, and loss/perplexity against evaluation length.

:func:`llmviz.analysis.divergence_grid` arranges runs over a (learning rate, warmup) grid
for :func:`llmviz.plots.norms.plot_stability_map` to draw.

Axes-level functions take ``ax=None`` and return the ``Axes``; nothing calls ``plt.show()``.
Inputs are what :mod:`llmviz.training` produces (:class:`~llmviz.training.History`,
:class:`~llmviz.training.LengthEval`) or plain numbers/arrays/tensors.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .._checks import check_choice, check_flag, check_positive_int

from ..training.loop import History, LengthEval
from ._style import PALETTE, get_ax

__all__ = [
    "plot_training_curves",
    "plot_length_curves",
    "length_traces",
    "plot_length_estimates",
]

_CURVE_METRICS = ("loss", "lr", "grad_norm")
_LENGTH_METRICS = ("loss", "perplexity")


def _plain_log_y(ax: Any) -> None:
    """Log y axis labelled with plain numbers (5, 10, 20) instead of powers of ten."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    decades = math.log10(high / low) if low > 0 and high > low else 1.0
    subs = tuple(range(1, 10)) if decades <= 1.2 else (1, 2, 5) if decades <= 3 else (1,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=[float(v) for v in subs]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _legend(ax: Any, where: str | None) -> None:
    n = len(ax.get_legend_handles_labels()[1])
    if where is None:
        where = "outside" if n > 6 else "inside"
    check_choice(where, "legend", ("inside", "outside"))
    if where == "outside":
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(frameon=False, fontsize=8)


def _series(run: Any, metric: str) -> tuple[list[float], bool]:
    """(values, diverged) from a History or a plain sequence of numbers."""
    if isinstance(run, History):
        return list(getattr(run, metric)), run.diverged
    if isinstance(run, torch.Tensor):
        run = run.detach().cpu().tolist()
    values = [float(v) for v in run]
    return values, not all(math.isfinite(v) for v in values)


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(values) < window:
        return values
    kernel = np.ones(window) / window
    head = np.array([values[: i + 1].mean() for i in range(window - 1)])
    return np.concatenate([head, np.convolve(values, kernel, mode="valid")])


def _as_runs(runs: Any) -> dict[str, Any]:
    if isinstance(runs, Mapping):
        return {str(k): v for k, v in runs.items()}
    if isinstance(runs, History) or (
        isinstance(runs, Sequence) and runs and isinstance(runs[0], (int, float))
    ):
        return {"run": runs}
    if isinstance(runs, torch.Tensor) and runs.ndim == 1:
        return {"run": runs}
    if isinstance(runs, Sequence):
        return {f"run {i}": r for i, r in enumerate(runs)}
    raise TypeError(
        f"runs must be a History, a sequence of Histories, or a mapping name -> History, "
        f"got {type(runs).__name__}"
    )


def plot_training_curves(
    runs: Any,
    *,
    metric: str = "loss",
    ax: Any = None,
    log_y: bool = False,
    smooth: int = 1,
    colors: Mapping[str, str] | None = None,
    legend: str | None = None,
) -> Any:
    """One line per run of ``metric`` against optimiser step.

    Args:
        runs: a :class:`History`, a list of them, or ``{name: History or sequence of values}``.
        metric: ``"loss"``, ``"lr"`` or ``"grad_norm"``.
        ax: Axes to draw on (a new one if None).
        log_y: logarithmic y axis.
        smooth: moving-average window in steps (1: raw values). Non-finite values are never
            smoothed away: a run that diverged ends in an ``x`` marker at its last finite step.
        colors: optional ``{name: colour}``; otherwise the Okabe-Ito palette in order.
        legend: ``"inside"``, ``"outside"`` (right of the axes) or None (outside when there
            are more than six entries).

    Returns:
        The Axes.
    """
    log_y = check_flag(log_y, "log_y")
    check_choice(metric, "metric", _CURVE_METRICS)
    check_positive_int(smooth, "smooth (a window of steps)")
    ax = get_ax(ax)
    for i, (name, run) in enumerate(_as_runs(runs).items()):
        values, diverged = _series(run, metric)
        y = np.asarray(values, dtype=float)
        finite = np.isfinite(y)
        n_ok = int(np.argmin(finite)) if not finite.all() else len(y)
        x = np.arange(n_ok)
        y_ok = _smooth(y[:n_ok], smooth)
        color = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        label = f"{name} (diverged)" if diverged else name
        ax.plot(x, y_ok, color=color, label=label, lw=1.4)
        if diverged and n_ok > 0:
            ax.plot([x[-1]], [y_ok[-1]], marker="x", color=color, ms=9, mew=2, ls="none")
    if log_y:
        _plain_log_y(ax)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel({"loss": "training loss (nats/token)", "lr": "learning rate",
                   "grad_norm": "gradient norm (before clipping)"}[metric])
    _legend(ax, legend)
    ax.grid(alpha=0.3)
    return ax


def _length_values(result: Any, metric: str) -> tuple[list[int], list[float]]:
    if isinstance(result, LengthEval):
        data = result.as_dict(metric)
    elif isinstance(result, Mapping):
        data = {int(k): float(v) for k, v in result.items()}
    else:
        raise TypeError(
            "each result must be a LengthEval or a mapping {length: value}, got "
            f"{type(result).__name__}"
        )
    lengths = sorted(data)
    return lengths, [data[n] for n in lengths]


def plot_length_curves(
    results: Mapping[str, Any],
    *,
    metric: str = "perplexity",
    train_len: int | None = None,
    ax: Any = None,
    log_y: bool = False,
    colors: Mapping[str, str] | None = None,
    legend: str | None = None,
) -> Any:
    """Loss or perplexity against evaluation length, one line per scheme (log2 x axis).

    Args:
        results: ``{scheme: LengthEval or {length: value}}``. For a ``LengthEval`` the metric
            is taken from it; for a plain mapping the values are drawn as given.
        metric: ``"perplexity"`` or ``"loss"`` (axis label; selects the LengthEval field).
        train_len: draws a dashed vertical line at the training length.
        ax: Axes to draw on (a new one if None).
        log_y: logarithmic y axis (perplexities spanning decades).
        colors: optional ``{scheme: colour}``.
        legend: ``"inside"``, ``"outside"`` or None (outside when more than six entries).

    Returns:
        The Axes.
    """
    log_y = check_flag(log_y, "log_y")
    check_choice(metric, "metric", _LENGTH_METRICS)
    if not results:
        raise ValueError("results is empty; pass {scheme: LengthEval} for at least one scheme")
    ax = get_ax(ax)
    ticks: set[int] = set()
    for i, (name, result) in enumerate(results.items()):
        lengths, values = _length_values(result, metric)
        ticks.update(lengths)
        color = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        ax.plot(lengths, values, marker="o", color=color, label=str(name), lw=1.6)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ticks), [str(t) for t in sorted(ticks)])
    ax.minorticks_off()
    if train_len is not None:
        ax.axvline(train_len, color="#666", ls="--", lw=1, label=f"training length ({train_len})")
    if log_y:
        _plain_log_y(ax)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("perplexity" if metric == "perplexity" else "loss (nats/token)")
    _legend(ax, legend)
    ax.grid(alpha=0.3)
    return ax


def length_traces(
    results: Mapping[str, Any],
    *,
    metric: str = "perplexity",
    colors: Mapping[str, str] | None = None,
    highlight: str | None = None,
) -> list[go.Scatter]:
    """Plotly traces of :func:`plot_length_curves` (one per scheme, same order every call), for
    figures and explorers on the static site. ``highlight`` draws one scheme thicker."""
    check_choice(metric, "metric", _LENGTH_METRICS)
    traces = []
    for i, (name, result) in enumerate(results.items()):
        lengths, values = _length_values(result, metric)
        color = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        width = 4 if name == highlight else 1.8
        traces.append(
            go.Scatter(x=lengths, y=values, mode="lines+markers", name=str(name),
                       line={"color": color, "width": width})
        )
    return traces


def plot_length_estimates(
    estimates: Mapping[str, Mapping[int, Any]],
    *,
    train_len: int | None = None,
    baseline: float | None = None,
    baseline_label: str = "baseline",
    ax: Any = None,
    log_y: bool = False,
    colors: Mapping[str, str] | None = None,
    ylabel: str = "perplexity",
    legend_cols: int = 3,
) -> Any:
    """Mean and interval against evaluation length, one line per scheme, intervals as bars.

    Args:
        estimates: ``{scheme: {length: Estimate}}`` (:class:`llmviz.evidence.Estimate`, or
            anything with ``mean``, ``low`` and ``high``); an unresolved interval draws no bar.
        train_len: a dashed vertical line at the training length.
        baseline: a horizontal line (a model that does not depend on the length, e.g. an n-gram
            scored on the same targets), labelled ``baseline_label``.
        ax, log_y, colors: as in :func:`plot_length_curves`.
        ylabel: the quantity drawn.
        legend_cols: legend columns; the legend sits under the axes, so it stays legible when
            the figure is shrunk to a phone's width.

    Returns:
        The Axes.
    """
    log_y = check_flag(log_y, "log_y")
    if not isinstance(estimates, Mapping) or not estimates:
        raise ValueError("estimates must be a non-empty mapping {scheme: {length: Estimate}}")
    check_positive_int(legend_cols, "legend_cols")
    ax = get_ax(ax)
    ticks: set[int] = set()
    n = len(estimates)
    for i, (name, by_length) in enumerate(estimates.items()):
        if not isinstance(by_length, Mapping) or not by_length:
            raise ValueError(f"estimates[{name!r}] must be a non-empty mapping length -> Estimate")
        lengths = sorted(int(k) for k in by_length)
        for k in by_length.values():
            if not all(hasattr(k, a) for a in ("mean", "low", "high")):
                raise TypeError(f"estimates[{name!r}] holds {type(k).__name__}; pass Estimates "
                                "(mean, low, high)")
        ticks.update(lengths)
        means = np.array([by_length[L].mean for L in lengths], dtype=float)
        low = np.array([by_length[L].low for L in lengths], dtype=float)
        high = np.array([by_length[L].high for L in lengths], dtype=float)
        ok = np.isfinite(low) & np.isfinite(high)
        # spread the schemes a little along x so their bars do not hide each other
        shift = 2.0 ** (0.06 * (i - (n - 1) / 2))
        x = np.array(lengths, dtype=float) * shift
        color = (colors or {}).get(name, PALETTE[i % len(PALETTE)])
        ax.plot(x, means, marker="o", ms=4, color=color, label=str(name), lw=1.6)
        if ok.any():
            ax.errorbar(x[ok], means[ok], yerr=[means[ok] - low[ok], high[ok] - means[ok]],
                        fmt="none", ecolor=color, elinewidth=1.2, capsize=2.5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ticks), [str(t) for t in sorted(ticks)])
    ax.minorticks_off()
    if train_len is not None:
        ax.axvline(train_len, color="#666", ls="--", lw=1, label=f"training length T={train_len}")
    if baseline is not None:
        if not math.isfinite(float(baseline)):
            raise ValueError(f"baseline must be finite, got {baseline}")
        ax.axhline(float(baseline), color="#222", ls=":", lw=1.6, label=baseline_label)
    if log_y:
        _plain_log_y(ax)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=legend_cols)
    ax.grid(alpha=0.3)
    return ax
