"""How far within T a chapter 9 model reads: the paired context curve of the context record
(:mod:`.ch09_context`) and the first bin where more context stops lowering the loss. Used by
the locality control of the race (:mod:`.ch09_analysis`) and by the stretch boxes' control
(:mod:`.ch09_stretch_analysis`)."""

from __future__ import annotations

import torch

from . import ch09

__all__ = ["context_excess", "reach"]


def context_excess(runs, v: str, seq_len: int) -> torch.Tensor:
    """The paired context curve of ``v`` within T (``seq_len``), mean of the seeds: per bin of
    the first T positions of a window of 8T, the loss of the targets there, read with the p
    tokens before them (``by_position``), minus the loss of the same targets each read with
    exactly T tokens (``sliding_by_position``), in nats. ``runs`` must carry both curves (the
    context record, :mod:`.ch09_context`). Both terms score the same bytes, so the curve moves
    with the context the model reads, not with how hard the text of a bin is (a loss by
    position alone mixes the two: each bin is different text)."""
    first = runs[runs.seeds[0]]
    if v not in first or "sliding_by_position" not in first[v]:
        raise ValueError(f"reach needs the paired curve ('by_position' and 'sliding_by_position') "
                         f"of {v!r}; pass the context record (ch09_context), which measures it "
                         f"for: {', '.join(k for k in first if 'sliding_by_position' in first[k])}")
    curve = torch.tensor([[a - b for a, b in zip(r[v]["by_position"], r[v]["sliding_by_position"])]
                          for _, r in runs.items()], dtype=torch.float64).mean(0)
    return curve[: curve.numel() // ch09.FACTORS[-1]]  # the bins within the first T positions


def reach(runs, v: str, seq_len: int, tol: float = 0.03) -> int:
    """How many tokens of context ``v`` uses within T (``seq_len``): on its paired context
    curve (:func:`context_excess`: the same targets read with p tokens against T tokens), the
    upper edge of the first bin within ``tol`` nats of the curve's lowest."""
    first_t = context_excess(runs, v, seq_len)
    width = seq_len // first_t.numel()
    return (int((first_t <= first_t.min() + tol).nonzero()[0]) + 1) * width
