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

The rounds of one call are not independent runs: they share the machine's state (its load,
its clock speed, what else is in the caches), so their interval says how well *this run*
pins the ratio, not what another run an hour later will measure. Two timings of the same code
can differ by more than that interval suggests. So :func:`compare` also runs an **A/A
control** by default (``control=True``): in every round the peer is timed a second time, its
twin, with the three calls in a rotating order whose consecutive rounds mirror each other, so
a steady drift hits every side alike. The twin against the peer is a ratio whose true value is
1; how far its interval reaches from 1 (:attr:`Comparison.control_reach`) is what two timings
of the same code differ by on this machine now. :func:`speed_claim` decides only an effect
that clears its threshold by more than that reach (:func:`control_check`); otherwise the
verdict is "cannot decide" and the box says why.

Everything runs with a fixed torch thread count (``threads=``, through
:func:`llmviz.runtime.threads`, restored afterwards) and under ``torch.inference_mode()``
unless ``inference=False`` (needed to time a backward pass).

A sentence about a speed difference is a computed verdict: :func:`speed_claim` turns a
:class:`Comparison` into the claim "ours is faster than peer" (ratio < 1) with its verdict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.benchmark as tb

from .._checks import check_positive, check_positive_int
from ..evidence import Check, Claim
from ..evidence.verdict import UNRESOLVED, decide
from ..runtime import run_size
from ..runtime import threads as _threads
from .timing import Comparison, Timing

__all__ = ["Timing", "Comparison", "measure", "compare", "speed_claim", "control_check",
           "header", "WITHIN_RUN"]

#: How a timing claim's interval is labelled: what its rounds cover, and what they do not.
WITHIN_RUN = "interval over the rounds of this run only"


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
    control: bool = True,
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
        control: also time the peer a second time in every round (the A/A control, about
            half as much time again); :func:`speed_claim` then decides only effects larger
            than what the peer against itself shows.

    Returns a :class:`Comparison`; ``str()`` of it is a one-line report, ``.ratio`` the
    ratio ours / peer with its interval, ``.control`` the A/A ratio.
    """
    _check_fn(ours, "ours")
    _check_fn(peer, "peer")
    _check_options(repeats, warmup, min_run_time, threads)
    if not isinstance(control, bool):
        raise TypeError(f"control must be True or False, got {control!r}")
    with _threads(threads) as n_threads, _context(inference):
        for _ in range(warmup):
            ours()
            peer()
        _sync()
        times: dict[str, list[float]] = {"ours": [], "peer": [], "again": []}
        fns = {"ours": ours, "peer": peer, "again": peer}
        for i in range(repeats):
            order = _ORDERS[i % len(_ORDERS)] if control else (
                ("ours", "peer") if i % 2 == 0 else ("peer", "ours"))
            for side in order:
                times[side].append(_one_round(fns[side], min_run_time))
    again = Timing(f"{peer_name} (again)", tuple(times["again"])) if control else None
    return Comparison(
        name=name, ours=Timing(ours_name, tuple(times["ours"])),
        peer=Timing(peer_name, tuple(times["peer"])), device=_device_label(),
        threads=n_threads, again=again,
    )


#: The order of the three calls in the rounds of a controlled comparison: each even round is
#: mirrored by the next, so a steady drift costs every side the same over a pair of rounds,
#: and over six rounds every side takes every position twice.
_ORDERS = (
    ("ours", "peer", "again"), ("again", "peer", "ours"),
    ("peer", "ours", "again"), ("again", "ours", "peer"),
    ("peer", "again", "ours"), ("ours", "again", "peer"),
)


def control_check(comparison: Comparison, *, threshold: float = 1.0) -> Check:
    """Whether the time ratio clears ``threshold`` by more than the A/A control's reach.

    The ratio's interval decides "ours / peer < threshold" (or its opposite) only if it lies on
    one side of the threshold; this check asks for more: the interval widened on each side by
    what the peer against itself shows in the same rounds (:meth:`Comparison.ratio_beyond_control`)
    must give the same verdict. It passes when it does; it fails when the rounds alone would
    decide but the machine's noise now is as large as the margin, and the claim's verdict
    becomes "cannot decide". When the interval decides nothing the check has no reading to
    guard: it is then named for that ("no reading for the A/A control to overturn"), not for an
    effect larger than the control, and passes, leaving the verdict "not resolved".

    Args:
        comparison: from :func:`compare`; one without a control fails the check whenever its
            interval decides (nothing says how noisy the machine is).
        threshold: the ratio the claim compares with (positive).
    """
    if not isinstance(comparison, Comparison):
        raise TypeError(
            f"comparison must be a Comparison from compare(), got {type(comparison).__name__}"
        )
    check_positive(threshold, "threshold")
    c = comparison
    plain = decide(c.ratio, threshold=threshold, direction="<")
    wide = decide(c.ratio_beyond_control(), threshold=threshold, direction="<")
    passed = plain == UNRESOLVED or wide == plain
    aa = c.control
    if aa is None:
        seen = "no A/A control was timed"
    else:
        seen = (f"{c.peer.name} against itself {aa.format('.3g')}: two timings of the same "
                f"code differ by up to {c.control_reach:.1%} here now")
    r = c.ratio
    if plain == UNRESOLVED:
        margin = f"the ratio's interval does not clear {threshold:g} anyway"
    else:
        clear = threshold / r.high if r.high < threshold else r.low / threshold
        margin = (f"the ratio's interval ends a factor {clear:.3g} away from {threshold:g}, "
                  f"the control's reach a factor {1 + c.control_reach:.3g}")
    if plain == UNRESOLVED:  # nothing decided, so the control has nothing to overturn
        name = ("no reading for the A/A control (the peer timed against itself) to overturn: "
                "the ratio's interval decides nothing")
    else:
        name = "the effect is larger than the A/A control (the peer timed against itself)"
    return Check(
        name,
        passed,
        f"{seen}; {margin}" + ("" if passed else "; cannot decide on this machine now"),
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
    "does not hold" when it lies at or above it, and "not resolved at this size" otherwise;
    but where the comparison timed an A/A control and the interval clears the threshold by
    less than the control's reach, "cannot decide at this size" (:func:`control_check`, shown
    in the box). The interval is over one run's rounds, and the box's size says so.
    """
    if not isinstance(comparison, Comparison):
        raise TypeError(
            f"comparison must be a Comparison from compare(), got {type(comparison).__name__}"
        )
    c = comparison
    text = text or f"{c.ours.name} is faster than {c.peer.name} ({c.name})"
    checks = (control_check(c, threshold=threshold),) if c.again is not None else ()
    return Claim(
        text, c.ratio, threshold=threshold, direction="<",
        quantity=f"time ratio {c.ours.name} / {c.peer.name}", id=id, chapter=chapter,
        device=c.device, checks=checks,
        size=f"live run, {run_size()} size; {WITHIN_RUN}" + ("; A/A-controlled" if checks else ""),
    )


def header(title: str) -> str:
    """A benchmark report's first lines: title, device, torch version, thread count."""
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return (
        f"# {title}\n# device: {dev}; torch {torch.__version__}; threads "
        f"{torch.get_num_threads()}"
    )
