"""Means with their 95% intervals: over seeds, paired between variants, and as ratios.

Every measured number the book states comes with an interval, and a verdict is read off the
interval (see :mod:`llmviz.evidence.claims`). The intervals here are:

* :func:`summarize`: the mean of n runs (one per seed), Student t: ``mean ± t(n-1) · s / sqrt(n)``.
* :func:`paired`: the mean of the per-seed differences ``a_i - b_i`` of two variants run on the
  same seeds and evaluation targets. What a seed does to both (initialisation luck, data order)
  cancels, so the interval is tighter than two independent means' when the variants correlate.
* :func:`paired_ratio`: the geometric mean of ``a_i / b_i`` with the t interval of the
  log-ratios exponentiated: for quantities that compare by ratio (perplexities, timings).
* :func:`proportion`: k of n as a share, with the Wilson score interval (right for small n and
  for shares near 0 or 1, where ``p ± z·sqrt(p(1-p)/n)`` collapses or leaves [0, 1]).
* :func:`paired_bootstrap`: the mean difference of two variants' per-target losses (same
  targets, shape (N,)) with a percentile bootstrap interval that resamples targets.

The t quantiles are exact for integer degrees of freedom (Abramowitz and Stegun 26.7.3-4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch

from .._checks import check_positive_int, check_real

__all__ = [
    "Estimate",
    "t_quantile",
    "summarize",
    "summarize_log",
    "paired",
    "paired_ratio",
    "paired_bootstrap",
    "proportion",
]

Kind = Literal["mean", "difference", "ratio", "exact"]


def _t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df`` (A&S 26.7.3 and 26.7.4), t >= 0."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        # (2/pi) [theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)], df - 2 terms deep
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        return 2.0 / math.pi * (theta + s * math.cos(theta) * total) if df > 1 else (
            2.0 * theta / math.pi
        )
    # sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...), df/2 terms
    total, term = 0.0, 1.0
    for k in range(1, df // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1) / (2 * k)
    return s * total


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom.

    Exact up to ~1e-10 for integer ``df`` (the closed-form CDF, inverted by bisection).
    ``t_quantile(0.975, 2)`` is 4.303: the multiplier of a 95% interval from 3 seeds.

    Raises:
        ValueError: ``p`` outside (0, 1), or ``df`` not a positive int.
    """
    check_positive_int(df, "df (number of values - 1)")
    check_real(p, "p")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p!r}")
    if p == 0.5:
        return 0.0
    upper = p > 0.5
    mass = 2.0 * (p - 0.5) if upper else 2.0 * (0.5 - p)  # P(|T| < q)
    lo, hi = 0.0, 1.0
    while _t_two_sided_mass(hi, df) < mass:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided_mass(mid, df) < mass:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    q = 0.5 * (lo + hi)
    return q if upper else -q


@dataclass(frozen=True)
class Estimate:
    """A measured quantity: its centre, spread, the number of runs, and an interval.

    Attributes:
        mean: the centre (for ``kind="ratio"``, the geometric mean of the ratios).
        std: sample standard deviation of the values behind the interval (for a ratio, of the
            log-ratios); 0 for an exact value, nan for a single run.
        n: number of runs (seeds, repeats, or bootstrap targets) behind the estimate.
        low, high: the interval at ``level`` (coverage, 0.95 by default); nan when n < 2.
        kind: ``"mean"``, ``"difference"`` (a - b), ``"ratio"`` (a / b) or ``"exact"``
            (computed, not sampled: the interval is the value itself).
    """

    mean: float
    std: float
    n: int
    low: float
    high: float
    level: float = 0.95
    kind: Kind = "mean"

    @classmethod
    def exact(cls, value: float) -> Estimate:
        """A value that is computed, not measured (a byte count, a FLOP ratio): no spread."""
        v = _as_float(value, "value")
        return cls(mean=v, std=0.0, n=1, low=v, high=v, kind="exact")

    @property
    def resolved(self) -> bool:
        """False when the interval is undefined (fewer than two runs)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    def format(self, fmt: str = ".3g", *, unit: str = "") -> str:
        """``"0.123 [0.101, 0.145] (95%, n=5)"``; a ratio reads ``"1.84x [1.62x, 2.09x]"``."""
        suffix = "x" if self.kind == "ratio" else unit
        sign = "+" if self.kind == "difference" else ""
        centre = f"{self.mean:{sign}{fmt}}{suffix}"
        if self.kind == "exact":
            return f"{centre} (computed)"
        if not self.resolved:
            return f"{centre} (n={self.n}: no interval)"
        return (
            f"{centre} [{self.low:{fmt}}{suffix}, {self.high:{fmt}}{suffix}] "
            f"({self.level:.0%}, n={self.n})"
        )

    def __str__(self) -> str:
        return self.format()


def _as_float(x: Any, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not (
        isinstance(x, torch.Tensor) and x.numel() == 1
    ):
        raise TypeError(f"{name} must be a number, got {type(x).__name__} ({x!r:.60})")
    v = float(x)
    if math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be finite, got {v}; check the run that produced it")
    return v


def _values(values: Any, name: str) -> list[float]:
    if isinstance(values, torch.Tensor):
        if values.ndim != 1:
            raise ValueError(
                f"{name} must be 1-D (one value per run), got shape {tuple(values.shape)}"
            )
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(
            f"{name} must be a sequence of numbers (one per run), got {type(values).__name__}"
        )
    out = [_as_float(v, f"{name}[{i}]") for i, v in enumerate(values)]
    if not out:
        raise ValueError(f"{name} is empty; pass one value per run (seed)")
    return out


def _check_level(level: float) -> None:
    check_real(level, "level")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1 (e.g. 0.95), got {level!r}")


def _t_estimate(values: Sequence[float], *, level: float, kind: Kind) -> Estimate:
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        nan = float("nan")
        return Estimate(mean=mean, std=nan, n=n, low=nan, high=nan, level=level, kind=kind)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * std / math.sqrt(n)
    return Estimate(
        mean=mean, std=std, n=n, low=mean - half, high=mean + half, level=level, kind=kind
    )


def summarize(values: Any, *, level: float = 0.95, floor: float | None = None) -> Estimate:
    """Mean of independent runs with its Student t interval.

    Args:
        values: one number per run, shape (n,): a list, tuple or 1-D tensor.
        level: interval coverage.
        floor: the smallest value the quantity can take (0 for a length or a count), or None;
            the interval is cut there (below it lies no possible value, so coverage is kept).

    A single value gives an :class:`Estimate` without an interval (its verdict: "not resolved").
    """
    _check_level(level)
    est = _t_estimate(vals := _values(values, "values"), level=level, kind="mean")
    if floor is None:
        return est
    if min(vals) < check_real(floor, "floor"):
        raise ValueError(f"a value {min(vals)} lies below floor={floor}: the floor must be the smallest "
                         "value the quantity can take (pass floor=None for no floor)")
    return replace(est, low=max(est.low, float(floor))) if est.resolved else est


def summarize_log(values: Any, *, level: float = 0.95) -> Estimate:
    """Geometric mean of positive runs (perplexities, times) with a t interval taken on the
    log scale and exponentiated, so the interval stays positive and is not symmetric.

    ``std`` is the standard deviation of the logs (as for :func:`paired_ratio`); ``kind`` is
    ``"mean"``. Use it where :func:`summarize` would put a linear interval below zero.
    """
    _check_level(level)
    vals = _values(values, "values")
    bad = [v for v in vals if v <= 0]
    if bad:
        raise ValueError(f"summarize_log needs positive values, got {bad[0]}; use summarize()")
    logs = _t_estimate([math.log(v) for v in vals], level=level, kind="mean")
    return Estimate(mean=math.exp(logs.mean), std=logs.std, n=logs.n, low=math.exp(logs.low),
                    high=math.exp(logs.high), level=level, kind="mean")


def _pair(a: Any, b: Any) -> tuple[list[float], list[float]]:
    a, b = _values(a, "a"), _values(b, "b")
    if len(a) != len(b):
        raise ValueError(
            f"paired values need one a and one b per seed; got {len(a)} a and {len(b)} b "
            "(run both variants on the same seeds)"
        )
    return a, b


def paired(a: Any, b: Any, *, level: float = 0.95) -> Estimate:
    """Mean of the per-seed differences ``a_i - b_i`` with its t interval (``kind="difference"``).

    Args:
        a, b: shape (n,) each, entry i from seed i of variant a and of variant b.
        level: interval coverage.
    """
    _check_level(level)
    a, b = _pair(a, b)
    return _t_estimate([x - y for x, y in zip(a, b)], level=level, kind="difference")


def paired_ratio(a: Any, b: Any, *, level: float = 0.95) -> Estimate:
    """Geometric mean of the per-seed ratios ``a_i / b_i`` with its interval (``kind="ratio"``).

    The t interval is taken on ``log(a_i / b_i)`` and exponentiated, so it is not symmetric
    around the centre. Both sides must be positive (perplexities, times).
    """
    _check_level(level)
    a, b = _pair(a, b)
    for name, side in (("a", a), ("b", b)):
        bad = [v for v in side if v <= 0]
        if bad:
            raise ValueError(
                f"paired_ratio needs positive values; {name} holds {bad[0]}: compare a "
                "difference with paired() instead"
            )
    logs = _t_estimate([math.log(x / y) for x, y in zip(a, b)], level=level, kind="ratio")
    return Estimate(
        mean=math.exp(logs.mean), std=logs.std, n=logs.n, low=math.exp(logs.low),
        high=math.exp(logs.high), level=level, kind="ratio",
    )


def paired_bootstrap(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Mean per-target difference ``a - b`` with a percentile bootstrap interval over targets.

    For two variants evaluated on the same targets (e.g. the per-token losses of one fixed
    evaluation set): the targets are resampled with replacement, the same resample for both
    variants, ``n_boot`` times.

    Args:
        a, b: per-target values, shape (N,) each (or any shape; flattened), same targets.
        n_boot: bootstrap resamples.
        level: interval coverage.
        seed: seed of the resampling generator (a private CPU generator).
    """
    _check_level(level)
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of per-target values, got "
                            f"{type(x).__name__}")
    if a.shape != b.shape:
        raise ValueError(
            f"a and b must hold the same targets; got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 100:
        raise ValueError(f"n_boot must be an int >= 100, got {n_boot!r}")
    diff = (a.detach().double() - b.detach().double()).flatten().cpu()  # (N,)
    n = diff.numel()
    if n < 2:
        raise ValueError(f"paired_bootstrap needs at least 2 targets, got {n}")
    gen = torch.Generator().manual_seed(seed)
    means = torch.empty(n_boot, dtype=torch.float64)
    chunk = max(1, 2_000_000 // n)  # resamples per step: bounds memory at ~16 MB of indices
    for start in range(0, n_boot, chunk):
        k = min(chunk, n_boot - start)
        idx = torch.randint(n, (k, n), generator=gen)  # (k, N)
        means[start:start + k] = diff[idx].mean(dim=1)
    alpha = (1.0 - level) / 2.0
    low, high = torch.quantile(means, torch.tensor([alpha, 1.0 - alpha], dtype=torch.float64))
    return Estimate(
        mean=float(diff.mean()), std=float(diff.std()), n=n, low=float(low), high=float(high),
        level=level, kind="difference",
    )


def proportion(k: int, n: int, *, level: float = 0.95) -> Estimate:
    """The share ``k / n`` of n counted cases (models in a table, tokens dropped), with the
    Wilson score interval at ``level``. ``std`` is the binomial ``sqrt(p (1 - p) / n)``.

    Raises:
        TypeError: ``k`` or ``n`` is not an int.
        ValueError: ``n < 1`` or ``k`` outside ``[0, n]``.
    """
    import statistics

    check_positive_int(n, "n")
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int count, got {type(k).__name__} {k!r}")
    if not 0 <= k <= n:
        raise ValueError(f"k must lie in [0, n] = [0, {n}], got k={k}")
    _check_level(level)
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return Estimate(mean=p, std=math.sqrt(p * (1 - p) / n), n=n, low=max(0.0, centre - half),
                    high=min(1.0, centre + half), level=level, kind="mean")
