"""What a timing measured: one function's rounds (:class:`Timing`) and two functions timed in
paired rounds, with the A/A control (:class:`Comparison`). :mod:`llmviz.training.bench` makes
them; this module holds the results and the statistics read off them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..evidence import Estimate, paired_ratio

__all__ = ["Timing", "Comparison"]


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclass(frozen=True)
class Timing:
    """Time per call of one function over ``repeats`` rounds.

    Attributes:
        name: what was timed.
        times_s: seconds per call, one entry per round (each the median of one
            ``blocked_autorange``), in the order measured.
    """

    name: str
    times_s: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median seconds per call over the rounds."""
        return statistics.median(self.times_s)

    @property
    def iqr(self) -> tuple[float, float]:
        """(25th, 75th) percentile of the rounds, seconds; both the median for one round."""
        if len(self.times_s) < 2:
            return (self.median, self.median)
        q = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return (q[0], q[2])

    @property
    def min(self) -> float:
        return min(self.times_s)

    @property
    def max(self) -> float:
        return max(self.times_s)

    def __str__(self) -> str:
        q1, q3 = self.iqr
        return (
            f"{self.name}: {_fmt_time(self.median)} per call (IQR {_fmt_time(q1)} to "
            f"{_fmt_time(q3)}, {len(self.times_s)} rounds)"
        )


@dataclass(frozen=True)
class Comparison:
    """Ours against a peer, timed in interleaved rounds on the same inputs.

    Attributes:
        name: what the comparison measures ("decode step, T=1024").
        ours, peer: the two sides' timings (rounds paired by index).
        device: where it ran, e.g. ``"cpu"`` or ``"cuda (NVIDIA H100 80GB HBM3)"``.
        threads: torch intra-op threads during the measurement.
        again: the A/A control, the peer timed a second time in every round (``None``
            when the comparison ran without it).
    """

    name: str
    ours: Timing
    peer: Timing
    device: str
    threads: int
    again: Timing | None = None

    @property
    def ratio(self) -> Estimate:
        """Time ours / peer: geometric mean of the per-round ratios, with its 95% interval.

        Below 1 means ours is faster. With a single round there is no interval.
        """
        return paired_ratio(self.ours.times_s, self.peer.times_s)

    @property
    def control(self) -> Estimate | None:
        """The A/A control: time of the peer's twin / the peer, same rounds; true value 1.

        ``None`` without a control.
        """
        if self.again is None:
            return None
        return paired_ratio(self.again.times_s, self.peer.times_s)

    @property
    def control_reach(self) -> float:
        """How far the A/A control's interval reaches from 1, as a factor minus 1 (0.04: two
        timings of the same code differ by up to 4% here now); ``inf`` when there is no control
        or no interval (fewer than two rounds)."""
        aa = self.control
        if aa is None or not aa.resolved:
            return math.inf
        return math.exp(max(abs(math.log(aa.low)), abs(math.log(aa.high)))) - 1

    def ratio_beyond_control(self) -> Estimate:
        """The ratio's interval widened by the A/A reach on each side (log scale): the range
        that neither this run's rounds nor the machine's noise now can rule out. Read a prose
        threshold off this, not off :attr:`ratio`; no interval when the reach is infinite."""
        r, reach = self.ratio, self.control_reach
        if not r.resolved or math.isinf(reach):
            nan = float("nan")
            return Estimate(mean=r.mean, std=r.std, n=r.n, low=nan, high=nan, level=r.level,
                            kind="ratio")
        f = 1 + reach
        return Estimate(mean=r.mean, std=r.std, n=r.n, low=r.low / f, high=r.high * f,
                        level=r.level, kind="ratio")

    def __str__(self) -> str:
        aa = self.control
        control = "" if aa is None else (
            f"; A/A control ({self.peer.name} against itself) {aa.format('.3g')}"
        )
        return (
            f"{self.name}: {self.ours.name} {_fmt_time(self.ours.median)}, {self.peer.name} "
            f"{_fmt_time(self.peer.median)}; ratio {self.ours.name}/{self.peer.name} "
            f"{self.ratio.format('.3g')} within this run{control} [{self.device}, "
            f"{self.threads} thread(s)]"
        )
