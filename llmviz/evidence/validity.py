"""What makes an experiment able to decide its claim, computed: checks beside the verdict.

A verdict read off an interval is only as good as the experiment behind it. Models that lose to
a one-byte bigram cannot tell which position scheme extrapolates; a probe that finds nothing
where something is planted cannot show that nothing is there. A :class:`Claim
<llmviz.evidence.Claim>` therefore takes ``checks=[...]``, each a :class:`Check` computed from
the data:

* :func:`beats_baseline`: every model (the worst of them) beats the trivial strategy for the
  task (an n-gram, the bigram, chance), measured on the same targets, by a stated margin;
* :func:`positive_control`: where the claim is that something can be learned or detected, the
  same set-up finds it where it is known to be;
* :func:`can_detect`: the seeds can resolve an effect of a stated size.

If any check fails, the claim's verdict is :data:`CANNOT_DECIDE` ("cannot decide at this
size"), never holds / does not hold / not resolved. Beside every verdict the box also prints
:func:`min_detectable`: the smallest effect its seeds would detect with 80% power.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .._checks import check_positive, check_real
from .stats import Estimate, t_quantile
from .verdict import CANNOT_DECIDE

__all__ = [
    "Check",
    "beats_baseline",
    "positive_control",
    "can_detect",
    "min_detectable",
    "format_min_detectable",
    "power_sentence",
    "zero_spread",
    "format_factor",
    "format_interval",
    "as_checks",
    "CANNOT_DECIDE",
]


@dataclass(frozen=True)
class Check:
    """One validity check of an experiment: what was checked, whether it passed, and the numbers.

    Attributes:
        name: what is checked, in words ("beats the byte bigram").
        passed: whether the experiment passed it.
        detail: the numbers behind it ("worst model 4.98 vs bigram 9.87 (margin 0.5)").
    """

    name: str
    passed: bool
    detail: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a Check needs a name in words, got {self.name!r}")
        passed = self.passed
        if isinstance(passed, torch.Tensor) and passed.numel() == 1:
            passed = bool(passed.item())
        if type(passed).__name__ == "bool_":  # numpy's bool, without importing numpy
            passed = bool(passed)
        if not isinstance(passed, bool):
            raise TypeError(
                f"passed must be a bool (the outcome of the check), got "
                f"{type(self.passed).__name__} {self.passed!r:.60}"
            )
        if not isinstance(self.detail, str):
            raise TypeError(f"detail must be a str, got {type(self.detail).__name__}")
        object.__setattr__(self, "passed", passed)

    @property
    def mark(self) -> str:
        """``"passed"`` or ``"FAILED"``."""
        return "passed" if self.passed else "FAILED"

    def record(self) -> dict[str, Any]:
        """JSON-ready: ``{"name", "passed", "detail"}``."""
        return {"name": self.name, "passed": self.passed, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.mark}: {self.name}" + (f" ({self.detail})" if self.detail else "")


def _centre(x: Any, name: str) -> float:
    """The value a model or baseline is compared by: a number, an Estimate's centre, or the mean
    of per-seed values."""
    if isinstance(x, Estimate):
        return x.mean
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        x = x.item()
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return check_real(float(x), name)
    if isinstance(x, torch.Tensor):
        x = x.flatten().tolist()
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        raise TypeError(
            f"{name} must be a number, an Estimate or per-seed numbers, got "
            f"{type(x).__name__} {x!r:.60}"
        )
    values = list(x)
    if not values:
        raise ValueError(f"{name} is empty; pass one value per seed")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name}[{i}] must be a number, got {type(v).__name__} {v!r:.60}")
        check_real(v, f"{name}[{i}]")
    return math.fsum(values) / len(values)


def beats_baseline(
    values: Any,
    baseline: Any,
    *,
    name: str,
    lower_is_better: bool = True,
    margin: float = 0.0,
) -> Check:
    """Check that the model(s) beat a trivial baseline measured on the same targets.

    Each model is compared by its mean over seeds; with several models (a dict) the *worst*
    one must beat the baseline, since a comparison between models is only informative when
    every model it ranks has learned more than the trivial strategy.

    Args:
        values: one model's per-seed values (a list or 1-D tensor), its :class:`Estimate`, or a
            dict ``{variant: values}`` of several models.
        baseline: the baseline's value on the same targets: a number, per-seed numbers, or an
            :class:`Estimate` (its centre is used).
        name: the check in words, e.g. ``"beats the byte bigram"``.
        lower_is_better: True for losses and perplexities, False for accuracies.
        margin: how far past the baseline the worst model must be (in the values' units), >= 0.

    Returns a :class:`Check`; its detail names the worst model and both numbers.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must say what is checked, e.g. 'beats the bigram', got {name!r}")
    if not isinstance(lower_is_better, bool):
        raise TypeError(f"lower_is_better must be a bool, got {lower_is_better!r}")
    check_positive(margin, "margin", allow_zero=True)
    base = _centre(baseline, "baseline")
    if isinstance(values, Mapping):
        if not values:
            raise ValueError("values is an empty dict; pass {variant: per-seed values}")
        means = {str(k): _centre(v, f"values[{k!r}]") for k, v in values.items()}
    else:
        means = {"model": _centre(values, "values")}
    pick = max if lower_is_better else min
    worst = pick(means, key=means.__getitem__)
    value = means[worst]
    passed = value < base - margin if lower_is_better else value > base + margin
    who = f"worst model ({worst})" if len(means) > 1 else "model"
    side = "below" if lower_is_better else "above"
    bound = base - margin if lower_is_better else base + margin
    need = f" (margin {margin:g}: must be {side} {bound:.4g})" if margin else ""
    detail = f"{who} {value:.4g} vs baseline {base:.4g}{need}"
    return Check(name=name, passed=passed, detail=detail)


def positive_control(name: str, passed: Any, detail: str = "") -> Check:
    """A positive control: the same set-up, where the effect is known to be present, finds it.

    Args:
        name: the control in words ("finds a planted copy task at distance 64").
        passed: whether it found it (a bool, or a one-element bool tensor), computed from data.
        detail: the numbers (e.g. "accuracy 0.97 on the planted task, chance 0.25").
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must say what the control shows, got {name!r}")
    return Check(name=name, passed=passed, detail=detail)


#: The chance that a true effect of :func:`min_detectable`'s size makes the interval exclude zero.
POWER = 0.8


def _require_estimate(estimate: Any, where: str) -> None:
    if not isinstance(estimate, Estimate):
        raise TypeError(f"{where} takes an Estimate (from summarize, paired, paired_ratio or "
                        f"proportion), got {type(estimate).__name__}")


def zero_spread(estimate: Estimate) -> bool:
    """True when two or more runs all gave the same value, so the t interval is a point.

    That point is not a precise measurement: it only says the runs agree exactly (three seeds
    that each find 0 heads of 4, say). The spread of such runs cannot size an interval or a
    detectable effect; a count is better read with :func:`~llmviz.evidence.proportion`.
    A computed (exact) value and a Wilson interval of a share are not affected.
    """
    _require_estimate(estimate, "zero_spread")
    return (estimate.kind != "exact" and estimate.resolved and estimate.n >= 2
            and estimate.high == estimate.low)


def format_factor(value: float, fmt: str = ".3g") -> str:
    """A ratio as text with ``fmt``, but with enough digits to differ from 1 when it does:
    ``1.003`` with ``".3g"`` reads ``"1.003"``, not ``"1"``; ``1.0105`` reads ``"1.01"``."""
    text = f"{value:{fmt}}"
    if value == 1.0 or not math.isfinite(value):
        return text
    digits = 4
    while float(text) == 1.0 and digits <= 12:
        text = f"{value:.{digits}g}"
        digits += 1
    return text


def format_interval(e: Estimate, fmt: str = ".3g", unit: str = "") -> str:
    """A claim box's interval as text (``"[0.031, 0.053]"``, ``"[0.997x, 1.01x]"``), a note when
    there is none, and a flag when the runs agree exactly (the point is no precise measurement)."""
    _require_estimate(e, "format_interval")
    if e.kind == "exact":
        return "exact (computed, not sampled)"
    if not e.resolved:
        return f"none (n={e.n})"
    if e.kind == "ratio":
        text = f"[{format_factor(e.low, fmt)}x, {format_factor(e.high, fmt)}x]"
    else:
        text = f"[{e.low:{fmt}}{unit}, {e.high:{fmt}}{unit}]"
    if zero_spread(e):
        text += " (a point, not a precise value)"
    return text


def min_detectable(estimate: Estimate) -> float:
    """The smallest true effect the runs behind ``estimate`` would detect with 80% power.

    An effect is detected when the interval excludes zero (or 1 for a ratio). A true effect
    equal to the interval's half-width, ``t(n-1) * sd / sqrt(n)``, does that only about half the
    time; with probability :data:`POWER` it takes ``(t_{1-a/2}(n-1) + t_{POWER}(n-1)) * sd /
    sqrt(n)``, the half-width times ``1 + t_{POWER} / t_{1-a/2}`` (1.25 for 3 runs, 1.37 for 7,
    1.43 for many). This is that effect, in the difference's units for a paired difference;
    for a ratio (intervals on log ratios) it is the factor ``exp`` of that on the log scale:
    ratios between ``1 / f`` and ``f`` would be missed more often than one time in five. An
    exact value detects any effect (0.0); a single run detects none (inf). Runs that agree
    exactly (:func:`zero_spread`) give nan: their spread of 0 cannot size an effect.
    """
    if not isinstance(estimate, Estimate):
        raise TypeError(
            f"estimate must be an llmviz Estimate (from paired, paired_ratio or summarize), "
            f"got {type(estimate).__name__}"
        )
    if estimate.kind == "exact":
        return 0.0
    if not estimate.resolved or estimate.n < 2 or math.isnan(estimate.std):
        return math.inf
    if zero_spread(estimate):
        return math.nan
    df = estimate.n - 1
    factor = 1.0 + t_quantile(POWER, df) / t_quantile(0.5 + estimate.level / 2.0, df)
    if estimate.kind == "ratio":
        return math.exp(factor * math.log(math.sqrt(estimate.high / estimate.low)))
    return factor * (estimate.high - estimate.low) / 2.0


def format_min_detectable(estimate: Estimate, fmt: str = ".3g", unit: str = "") -> str:
    """:func:`min_detectable` as text: ``"±0.031"``, ``"1.15x"``, ``"any (computed)"`` or
    ``"none (one run)"``; ``"not sized (the n = 3 runs agree exactly)"`` when the runs agree
    exactly."""
    value = min_detectable(estimate)
    if estimate.kind == "exact":
        return "any (computed)"
    if math.isinf(value):
        return f"none (n={estimate.n})"
    if zero_spread(estimate):
        return f"not sized (the n = {estimate.n} runs agree exactly)"
    if estimate.kind == "ratio":
        return f"{format_factor(value, fmt)}x"
    return f"±{value:{fmt}}{unit}"


def power_sentence(estimate: Estimate, threshold: float, fmt: str = ".3g", unit: str = "") -> str:
    """A claim box's power sentence, read against its threshold: ``"; a true value within ±0.031
    of 0.5 would be missed more than one time in five"`` (a ratio: within a factor of it). Empty
    for a computed (exact) value, which has no sampling error to miss by. Runs that agree
    exactly get no power statement: the sentence says so instead."""
    value = min_detectable(estimate)
    if estimate.kind == "exact":
        return ""
    if math.isinf(value):
        return f"; with n = {estimate.n} no effect, however large, would be detected reliably"
    if zero_spread(estimate):
        return (f"; the n = {estimate.n} runs agree exactly, so their spread cannot size a "
                "detectable effect")
    within = (f"a factor {format_factor(value, fmt)}" if estimate.kind == "ratio" else f"±{value:{fmt}}{unit}")
    return f"; a true value within {within} of {threshold:g} would be missed more than one time in five"


def can_detect(estimate: Estimate, effect: float, *, name: str | None = None) -> Check:
    """Check that the seeds can detect an effect of size ``effect`` (``min_detectable <=
    effect``; for a ratio estimate ``effect`` is a factor > 1, e.g. 1.1 for 10%).

    Use it where the claim is "no difference larger than ``effect``": an experiment too noisy
    to see ``effect`` cannot support it.
    """
    check_positive(effect, "effect")
    if isinstance(estimate, Estimate) and estimate.kind == "ratio" and effect <= 1:
        raise ValueError(f"for a ratio estimate effect is a factor > 1 (e.g. 1.1), got {effect}")
    smallest = min_detectable(estimate)
    unit = "x" if estimate.kind == "ratio" else ""
    label = name or f"the seeds can detect an effect of {effect:g}{unit}"
    return Check(
        name=label,
        passed=smallest <= effect,
        detail=f"smallest detectable (80% power) {format_min_detectable(estimate)} (n={estimate.n})",
    )


def as_checks(checks: Any) -> tuple[Check, ...]:
    """``checks`` (one :class:`Check` or an iterable of them) as a tuple, checked."""
    if isinstance(checks, Check):
        return (checks,)
    if isinstance(checks, (str, bytes, Mapping)) or not isinstance(checks, Iterable):
        raise TypeError(f"checks must be a list of Check, got {type(checks).__name__}")
    out = tuple(checks)
    for c in out:
        if not isinstance(c, Check):
            raise TypeError(
                f"every check must be an llmviz Check (beats_baseline, positive_control, ...), "
                f"got {type(c).__name__} {c!r:.60}"
            )
    return out
