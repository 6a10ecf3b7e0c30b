"""Timing done one way, for the notebooks and ``benchmarks/`` alike: ours against a peer.

A single cold timing says little: the first calls pay for lazy initialisation, a shared
machine drifts, and CUDA kernels run asynchronously. :func:`compare` therefore

1. runs both functions ``warmup`` times first (and synchronises CUDA after);
2. times them in ``repeats`` *interleaved* rounds, alternating which side goes first
   (ours, peer, peer, ours, ...), so drift and ordering hit both sides alike; each round is
   one ``torch.utils.benchmark.Timer.blocked_autorange`` per side, which picks the number of
   loops and synchronises CUDA around the timed block;
3. reports per side the median time per call and its spread (interquartile range, min, max),
   and the ratio ours / peer as the geometric mean of the per-round ratios with a t interval
   (:func:`llmviz.evidence.paired_ratio`): rounds are paired, like seeds.

Everything runs with a fixed torch thread count (``threads=``, through
:func:`llmviz.runtime.threads`, restored afterwards) and under ``torch.inference_mode()``
unless ``inference=False`` (needed to time a backward pass).

A sentence about a speed difference is a computed verdict: :func:`speed_claim` turns a
:class:`Comparison` into the claim "ours is faster than peer" (ratio < 1) with its verdict.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.benchmark as tb

from .._checks import check_positive, check_positive_int
from ..evidence import Claim, Estimate, paired_ratio
from ..runtime import threads as _threads

__all__ = ["Timing", "Comparison", "measure", "compare", "speed_claim", "header"]


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
    """

    name: str
    ours: Timing
    peer: Timing
    device: str
    threads: int

    @property
    def ratio(self) -> Estimate:
        """Time ours / peer: geometric mean of the per-round ratios, with its 95% interval.

        Below 1 means ours is faster. With a single round there is no interval.
        """
        return paired_ratio(self.ours.times_s, self.peer.times_s)

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.ours.name} {_fmt_time(self.ours.median)}, {self.peer.name} "
            f"{_fmt_time(self.peer.median)}; ratio {self.ours.name}/{self.peer.name} "
            f"{self.ratio.format('.3g')} [{self.device}, {self.threads} thread(s)]"
        )


def _device_label() -> str:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return f"cuda ({torch.cuda.get_device_name()})"
    return "cpu"


def _check_fn(fn: Any, name: str) -> Callable[[], Any]:
    if not callable(fn):
        raise TypeError(
            f"{name} must be callable with no arguments, got {type(fn).__name__} {fn!r:.60}; "
            f"wrap the call, e.g. {name}=lambda: f(x)"
        )
    return fn


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _one_round(fn: Callable[[], Any], min_run_time: float) -> float:
    # Timer synchronises the accelerator around the timed block; num_threads keeps the count
    # set by the caller (Timer would otherwise time on one thread).
    timer = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def _check_options(repeats: int, warmup: int, min_run_time: float, threads: int | None) -> None:
    check_positive_int(repeats, "repeats")
    if threads is not None:
        check_positive_int(threads, "threads")
    check_positive_int(warmup, "warmup", allow_zero=True)
    check_positive(min_run_time, "min_run_time")


def _context(inference: bool):
    return torch.inference_mode() if inference else contextlib.nullcontext()


def measure(
    fn: Callable[[], Any],
    *,
    name: str = "fn",
    repeats: int = 7,
    warmup: int = 3,
    min_run_time: float = 0.1,
    threads: int | None = None,
    inference: bool = True,
) -> Timing:
    """Time one function: ``warmup`` calls, then ``repeats`` rounds of ``blocked_autorange``.

    Args:
        fn: called with no arguments.
        name: label for the result.
        repeats: timed rounds (>= 1); the spread needs a few (5-7).
        warmup: untimed calls first.
        min_run_time: seconds each round runs at least (Timer picks the loop count).
        threads: torch intra-op threads for the measurement; ``None`` keeps the current count.
        inference: run under ``torch.inference_mode()``; False to time backward passes.
    """
    _check_fn(fn, "fn")
    _check_options(repeats, warmup, min_run_time, threads)
    with _threads(threads), _context(inference):
        for _ in range(warmup):
            fn()
        _sync()
        times = tuple(_one_round(fn, min_run_time) for _ in range(repeats))
    return Timing(name, times)


def compare(
    name: str,
    ours: Callable[[], Any],
    peer: Callable[[], Any],
    *,
    ours_name: str = "ours",
    peer_name: str = "peer",
    repeats: int = 7,
    warmup: int = 3,
    min_run_time: float = 0.1,
    threads: int | None = None,
    inference: bool = True,
) -> Comparison:
    """Time ``ours`` against ``peer`` in interleaved rounds (see the module docstring).

    Args:
        name: what is compared.
        ours, peer: called with no arguments; they should compute the same thing on the
            same inputs.
        ours_name, peer_name: labels.
        repeats: paired rounds (>= 1; >= 2 for an interval on the ratio).
        warmup: untimed calls of each side first.
        min_run_time: seconds each side runs at least per round.
        threads: torch intra-op threads for the measurement; ``None`` keeps the current count.
        inference: run under ``torch.inference_mode()``; False to time backward passes.

    Returns a :class:`Comparison`; ``str()`` of it is a one-line report, ``.ratio`` the
    ratio ours / peer with its interval.
    """
    _check_fn(ours, "ours")
    _check_fn(peer, "peer")
    _check_options(repeats, warmup, min_run_time, threads)
    with _threads(threads) as n_threads, _context(inference):
        for _ in range(warmup):
            ours()
            peer()
        _sync()
        a: list[float] = []
        b: list[float] = []
        for i in range(repeats):
            if i % 2 == 0:
                a.append(_one_round(ours, min_run_time))
                b.append(_one_round(peer, min_run_time))
            else:
                b.append(_one_round(peer, min_run_time))
                a.append(_one_round(ours, min_run_time))
    return Comparison(
        name=name, ours=Timing(ours_name, tuple(a)), peer=Timing(peer_name, tuple(b)),
        device=_device_label(), threads=n_threads,
    )


def speed_claim(
    comparison: Comparison,
    *,
    text: str | None = None,
    threshold: float = 1.0,
    id: str | None = None,
    chapter: str | None = None,
) -> Claim:
    """The claim "ours is faster than peer" (time ratio < ``threshold``) with its verdict.

    Args:
        comparison: from :func:`compare`.
        text: the claim in words; by default "<ours> is faster than <peer> (<name>)".
        threshold: the ratio the claim must beat (1: faster at all; 0.5: twice as fast).
        id: the claim's id (for glue names and the claims page); by default from the text.
        chapter: the chapter it belongs to, when it cannot be detected.

    The verdict is "holds" when the whole interval of the ratio lies below ``threshold``,
    "does not hold" when it lies at or above it, and "not resolved at this size" otherwise.
    """
    if not isinstance(comparison, Comparison):
        raise TypeError(
            f"comparison must be a Comparison from compare(), got {type(comparison).__name__}"
        )
    c = comparison
    text = text or f"{c.ours.name} is faster than {c.peer.name} ({c.name})"
    return Claim(
        text, c.ratio, threshold=threshold, direction="<",
        quantity=f"time ratio {c.ours.name} / {c.peer.name}", id=id, chapter=chapter,
        device=c.device,
    )


def header(title: str) -> str:
    """A benchmark report's first lines: title, device, torch version, thread count."""
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return (
        f"# {title}\n# device: {dev}; torch {torch.__version__}; threads "
        f"{torch.get_num_threads()}"
    )
