"""Figures of chapter 19: memory against context, recall accuracy by token mixer, a state.

* :func:`plot_memory_vs_context`: bytes per sequence against context length, one line per
  design (a growing KV cache is a rising line, a fixed state a flat one), log-log.
* :func:`plot_recall`: accuracy per variant, one dot per seed (same seed, same colour) with
  the mean, and the guessing rate.
* :func:`plot_state`: one head's state matrix ``S (D_k, D_v)`` as a heatmap.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ._style import DIVERGING, PALETTE, get_ax
from .._checks import check_flag

__all__ = ["plot_memory_vs_context", "plot_recall", "plot_state"]

_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("bytes", 1))


def _unit(largest: float) -> tuple[str, float]:
    return next(((n, s) for n, s in _UNITS if largest >= s), _UNITS[-1])


def plot_memory_vs_context(contexts: Sequence[int], curves: Mapping[str, Sequence[float]], *,
                           ax: Any = None, log_y: bool = True):
    """Bytes per sequence (one line per entry of ``curves``) against ``contexts``, log x.

    Every curve must have one value per context; the unit (bytes .. GiB) follows the largest.
    """
    log_y = check_flag(log_y, "log_y")
    x = np.asarray(contexts, dtype=float)
    if x.ndim != 1 or len(x) < 2 or (x <= 0).any():
        raise ValueError(f"contexts must be at least 2 positive lengths, got {list(contexts)!r}")
    if not curves:
        raise ValueError("curves is empty: pass {label: bytes at each context}")
    ys = {}
    for label, y in curves.items():
        y = np.asarray(y, dtype=float)
        if y.shape != x.shape:
            raise ValueError(f"curve {label!r} has {y.size} values for {x.size} contexts")
        ys[label] = y
    name, scale = _unit(max(float(y.max()) for y in ys.values()))
    ax = get_ax(ax, figsize=(6.5, 3.6))
    for i, (label, y) in enumerate(ys.items()):
        flat = np.allclose(y, y[0])
        ax.plot(x, y / scale, color=PALETTE[i % len(PALETTE)], lw=2, ls="--" if flat else "-",
                label=label)
    ax.set_xscale("log", base=2)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel(f"memory per sequence ({name})")
    ax.legend(fontsize=8, frameon=False)
    return ax


def plot_recall(accuracies: Mapping[str, Sequence[float]], *, chance: float | None = None,
                ax: Any = None):
    """Recall accuracy of each variant: seeds as dots (seed ``j`` in colour ``j`` in every
    variant, so pairs can be followed), the mean as a bar, ``chance`` as a dotted line."""
    if not accuracies:
        raise ValueError("accuracies is empty: pass {variant: [accuracy per seed]}")
    sizes = {len(v) for v in accuracies.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every variant needs the same (non-zero) number of seeds, got "
                         f"{ {k: len(v) for k, v in accuracies.items()} }")
    ax = get_ax(ax, figsize=(6.5, 3.4))
    n = sizes.pop()
    for i, (label, accs) in enumerate(accuracies.items()):
        accs = np.asarray(accs, dtype=float)
        ax.bar(i, accs.mean(), width=0.6, color="#dddddd", edgecolor="#888888")
        offsets = np.linspace(-0.15, 0.15, n) if n > 1 else np.zeros(1)
        for j, a in enumerate(accs):
            ax.scatter(i + offsets[j], a, color=PALETTE[j % len(PALETTE)], s=28, zorder=3,
                       label=f"seed {j}" if i == 0 else None)
    if chance is not None:
        ax.axhline(chance, color="black", ls=":", lw=1)
        ax.text(len(accuracies) - 0.5, chance, " guessing", va="bottom", ha="right", fontsize=8)
    ax.set_xticks(range(len(accuracies)), list(accuracies))
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("recall accuracy")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    return ax


def plot_state(state: Any, *, ax: Any = None, title: str | None = None):
    """One head's state ``(D_k, D_v)`` (a tensor or array) as a heatmap centred on zero."""
    s = np.asarray(state.detach().cpu() if hasattr(state, "detach") else state, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"state must be one head's (D_k, D_v) matrix, got shape {s.shape}; "
                         f"index batch and head first, e.g. S[0, 0]")
    if s.size == 0 or not np.isfinite(s).all():
        raise ValueError(f"state {s.shape} must be non-empty and finite (no NaN/inf) to draw")
    ax = get_ax(ax, figsize=(3.2, 3.0))
    vmax = float(np.abs(s).max()) or 1.0
    ax.imshow(s, cmap=DIVERGING, vmin=-vmax, vmax=vmax)
    ax.set_xlabel("value feature")
    ax.set_ylabel("key feature")
    if title:
        ax.set_title(title, fontsize=9)
    return ax
