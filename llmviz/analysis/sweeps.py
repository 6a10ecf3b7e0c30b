"""Hyper-parameter sweeps arranged for a figure.

:func:`divergence_grid` turns ``{(learning rate, warmup): History}`` into the grid of final
losses that :func:`llmviz.plots.norms.plot_stability_map` draws, with diverged runs as NaN.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..training import History

__all__ = ["divergence_grid"]


def divergence_grid(
    histories: Mapping[tuple[float, int], History],
) -> tuple[list[float], list[int], np.ndarray]:
    """``{(lr, warmup): History}`` -> ``(lrs, warmups, final)``.

    Returns:
        ``lrs`` and ``warmups`` sorted ascending, and ``final`` of shape
        ``(len(warmups), len(lrs))`` holding each run's final loss; ``nan`` where the run
        diverged (:attr:`History.final_loss` is nan) or is missing from the sweep.
    """
    if not isinstance(histories, Mapping):
        raise TypeError(
            f"histories must be a mapping {{(lr, warmup): History}}, got {type(histories).__name__}"
        )
    if not histories:
        raise ValueError("histories is empty; pass {(lr, warmup): History}")
    lrs = sorted({float(k[0]) for k in histories})
    warmups = sorted({int(k[1]) for k in histories})
    final = np.full((len(warmups), len(lrs)), np.nan)
    for (lr, warmup), h in histories.items():
        final[warmups.index(int(warmup)), lrs.index(float(lr))] = h.final_loss  # nan if diverged
    return lrs, warmups, final
