"""A claim under test: the claim in words, the measured effect, and a verdict the code decides.

A :class:`Claim` renders as a box in notebooks and on the site (claim, effect with its
interval, verdict, the smallest effect its seeds would detect with 80% power, its validity checks, seeds, size and
device), and can glue its parts for the prose
(``claim.glue("ch02_induction")`` makes ``{glue:text}`ch02_induction_verdict``` work), so the
text never types a verdict or a measured number.

Registry: while ``LLMVIZ_CLAIMS_DIR`` is set, every claim that is displayed, glued or
``register()``-ed is written as one JSON line to ``<dir>/<chapter>.jsonl``. Each process
rewrites its chapter's file with the claims it has seen, so a notebook that runs again replaces
its previous record and a notebook that does not run (the book's execution cache) keeps it. The
same record is embedded in the box's HTML (``data-llmviz-record``); the book's claims page is
read from there (``_ext/llmviz_book.py``), which works for cached notebooks too.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import torch

from ..runtime import device as _best_device
from ..runtime import run_size
from ._glue import _glue, glue_number, glue_text
from .stats import Estimate
from .validity import Check, as_checks, format_factor, format_interval, format_min_detectable
from .validity import min_detectable, power_sentence
from .verdict import CANNOT_DECIDE, FAILS, HOLDS, Direction, decide

__all__ = ["Claim", "glue_number", "glue_text", "CLAIMS_DIR_ENV", "CHAPTER_ENV", "claims_file"]

#: Directory the claim records go to (the book build sets it).
CLAIMS_DIR_ENV = "LLMVIZ_CLAIMS_DIR"
#: The chapter a kernel runs (the book build sets it per notebook); overrides detection.
CHAPTER_ENV = "LLMVIZ_CHAPTER"

# Verdict colours: a tinted background and a solid edge read on light and dark themes alike;
# the text keeps the page's own colour.
_COLOURS = {HOLDS: "46,160,67", FAILS: "207,34,46", CANNOT_DECIDE: "120,120,120"}
_UNRESOLVED_RGB = "191,135,0"

#: Records written by this process, per chapter, by claim id (kept so files can be rewritten).
_SEEN: dict[str, dict[str, dict[str, Any]]] = {}


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return slug[:48].rstrip("_") or "claim"


def _detect_chapter() -> str:
    """The running notebook's file stem, from what the front end tells the kernel."""
    env = os.environ.get(CHAPTER_ENV)
    if env:
        return env
    session = os.environ.get("JPY_SESSION_NAME")  # Jupyter server: the notebook's path
    if session:
        return Path(session).stem
    try:
        from IPython import get_ipython

        ip = get_ipython()
        vsc = ip.user_ns.get("__vsc_ipynb_file__") if ip is not None else None  # VS Code
        if vsc:
            return Path(vsc).stem
    except ImportError:  # pragma: no cover - IPython ships with Jupyter
        pass
    return "unknown"


def _device_label(dev: Any) -> str:
    dev = torch.device(dev) if not isinstance(dev, torch.device) else dev
    if dev.type == "cuda" and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return dev.type


def claims_file(chapter: str) -> Path | None:
    """Where ``chapter``'s records go, or None when ``LLMVIZ_CLAIMS_DIR`` is unset."""
    base = os.environ.get(CLAIMS_DIR_ENV)
    if not base:
        return None
    return Path(base) / f"{_slug(chapter)}.jsonl"


def _json_number(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no nan


@dataclass(frozen=True)
class Claim:
    """A claim under test: "``quantity`` ``direction`` ``threshold``", decided by the data.

    Args:
        text: the claim in words, as the chapter states it ("GQA's loss is within 0.05 of MHA").
        estimate: the measured quantity with its interval (:func:`~llmviz.evidence.paired`,
            :func:`~llmviz.evidence.summarize`, ... or ``Estimate.exact`` for a computed value).
        threshold: the value the claim compares the quantity with.
        direction: ``">"`` (quantity above threshold) or ``"<"`` (below).
        quantity: what the estimate measures, in words ("loss(MHA) - loss(GQA)").
        id: short identifier (glue names, anchors, the claims page); default: from ``text``.
        chapter: the notebook it belongs to; default: detected (see :func:`claims_file`).
        size: which run decided it: a :class:`~llmviz.evidence.Record` (its label, device and
            staleness are shown) or a label; default ``"live run, cpu size"`` (``"live run,
            full size"`` under ``LLMVIZ_SCALE=full``).
        device: where it was measured; default: the record's device, else
            :func:`llmviz.runtime.device`.
        fmt: number format for the effect and interval.
        unit: unit appended to numbers (not for ratios, which read "1.8x").
        checks: the experiment's validity checks (:mod:`llmviz.evidence.validity`); if one
            fails the verdict is ``"cannot decide at this size"``.
    """

    text: str
    estimate: Estimate
    _: KW_ONLY  # everything after the claim and its estimate is passed by name
    threshold: float = 0.0
    direction: Direction = ">"
    quantity: str = "effect"
    id: str | None = None
    chapter: str | None = None
    size: str | None = None
    device: str | None = None
    fmt: str = ".3g"
    unit: str = ""
    checks: tuple[Check, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"text must be the claim in words, got {self.text!r}")
        decide(self.estimate, threshold=self.threshold, direction=self.direction)  # checks
        if self.id is not None and not re.fullmatch(r"[A-Za-z0-9_]+", self.id):
            raise ValueError(
                f"id={self.id!r} must be letters, digits and '_' only (it becomes glue names "
                "and an anchor), e.g. 'ch02_induction'"
            )
        try:
            format(1.0, self.fmt)
        except (ValueError, TypeError):
            raise ValueError(
                f"fmt={self.fmt!r} is not a float format spec; use e.g. '.3g'"
            ) from None
        set_ = object.__setattr__  # frozen: fill the defaults once
        set_(self, "checks", as_checks(self.checks))
        set_(self, "id", self.id or _slug(self.text))
        size, device = self.size, self.device
        if hasattr(size, "label") and hasattr(size, "meta"):  # a Record: its label and device
            device = device or size.meta.get("device_label") or size.meta.get("device")
            size = size.label
        if size is not None and (not isinstance(size, str) or not size.strip()):
            raise TypeError(f"size must be a Record or a label (str), got {size!r:.60}")
        set_(self, "size", size or f"live run, {run_size()} size")
        set_(self, "device", _device_label(device or _best_device())
             if not isinstance(device, str) else device)

    # ------------------------------------------------------------------ the decision
    @property
    def verdict(self) -> str:
        """``"holds"``, ``"does not hold"``, ``"not resolved at this size"``, or ``"cannot decide
        at this size"`` when a validity check failed."""
        if any(not c.passed for c in self.checks):
            return CANNOT_DECIDE
        return self.interval_verdict

    @property
    def interval_verdict(self) -> str:
        """What the interval alone says, validity aside (one of the first three verdicts)."""
        return decide(self.estimate, threshold=self.threshold, direction=self.direction)

    @property
    def min_detectable(self) -> float:
        """The smallest effect the runs would detect with 80% power (:func:`llmviz.evidence.min_detectable`)."""
        return min_detectable(self.estimate)

    @property
    def detectable(self) -> str:
        """:attr:`min_detectable` as text: ``"±0.031"``, ``"1.15x"``."""
        return format_min_detectable(self.estimate, self.fmt, self.unit)

    power_line = property(lambda self: power_sentence(self.estimate, self.threshold, self.fmt, self.unit))

    @property
    def effect(self) -> str:
        """The measured centre as text ("+0.042", "1.84x")."""
        e = self.estimate
        if e.kind == "ratio":
            return f"{format_factor(e.mean, self.fmt)}x"
        sign = "+" if e.kind == "difference" else ""
        return f"{e.mean:{sign}{self.fmt}}{self.unit}"

    @property
    def interval(self) -> str:
        """The interval as text ("[0.031, 0.053]"), or a note when there is none."""
        return format_interval(self.estimate, self.fmt, self.unit)

    @property
    def test(self) -> str:
        """The test in symbols: "loss(MHA) - loss(GQA) > 0"."""
        return f"{self.quantity} {self.direction} {self.threshold:g}"

    def record(self) -> dict[str, Any]:
        """Everything the claims page shows, JSON-ready."""
        e = self.estimate
        return {
            "chapter": self.chapter or _detect_chapter(),
            "id": self.id,
            "text": self.text,
            "test": self.test,
            "verdict": self.verdict,
            "effect": self.effect,
            "interval": self.interval,
            "mean": e.mean,
            "low": _json_number(e.low),
            "high": _json_number(e.high),
            "level": e.level,
            "n": e.n,
            "size": self.size,
            "device": self.device,
            "torch": torch.__version__,
            "min_detectable": self.detectable,
            "checks": [c.record() for c in self.checks],
        }

    # ------------------------------------------------------------------ registry and glue
    def register(self) -> Path | None:
        """Write this claim's record to ``LLMVIZ_CLAIMS_DIR`` (if set); returns the file."""
        rec = self.record()
        path = claims_file(rec["chapter"])
        if path is None:
            return None
        seen = _SEEN.setdefault(rec["chapter"], {})
        seen[rec["id"]] = rec
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in seen.values()))
        tmp.replace(path)
        return path

    def glue(self, prefix: str, *, register: bool = True) -> dict[str, str]:
        """Glue ``<prefix>_verdict``, ``_effect``, ``_interval``, ``_n``, ``_claim``, ``_size``
        (the live size or the record's label) and ``_detectable`` (the smallest detectable
        effect). With ``register=False`` the claim is not written to the claims page's registry
        (for a claim the prose quotes but the page does not show as a box, such as a live run's
        twin of a recorded claim that is shown).

        The prose then writes ``{glue:text}`<prefix>_verdict``` and never types a verdict.
        Returns the glued texts (outside a kernel with myst-nb nothing else happens).
        """
        if not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z_]\w*", prefix):
            raise ValueError(f"prefix must be an identifier like 'ch02_induction', got {prefix!r}")
        parts = {
            "verdict": self.verdict,
            "effect": self.effect,
            "interval": self.interval,
            "n": str(self.estimate.n),
            "claim": self.text,
            "size": self.size,
            "detectable": self.detectable,
        }
        for key, text in parts.items():
            _glue(f"{prefix}_{key}", text)
        if not isinstance(register, bool):
            raise TypeError(f"register must be True or False, got {register!r}")
        if register:
            self.register()
        return {f"{prefix}_{k}": v for k, v in parts.items()}

    # ------------------------------------------------------------------ display
    def _rgb(self) -> str:
        return _COLOURS.get(self.verdict, _UNRESOLVED_RGB)

    def _details(self) -> str:
        n = self.estimate.n
        runs = "computed" if self.estimate.kind == "exact" else f"n = {n}"
        where = self.size if " " in self.size else f"size {self.size}"  # a label, or "cpu"
        return f"{runs} · {where} · device {self.device}"

    def _because(self) -> str:
        """Why a claim cannot be decided: what its interval alone would have said."""
        if self.verdict != CANNOT_DECIDE:
            return ""
        failed = "; ".join(c.name for c in self.checks if not c.passed)
        return f"failed: {failed}; the interval alone reads '{self.interval_verdict}'"

    def __str__(self) -> str:
        checks = "".join(f"\n  check {c}" for c in self.checks)
        why = f" ({self._because()})" if self._because() else ""
        return (
            f"Claim: {self.text}\n  test: {self.test}\n  measured: {self.effect}, "
            f"{self.estimate.level:.0%} interval {self.interval}{self.power_line}{checks}\n"
            f"  verdict: {self.verdict}{why}\n  ({self._details()})"
        )

    def _repr_markdown_(self) -> str:
        self.register()
        checks = "".join(f"> Check {c}  \n" for c in self.checks)
        why = f" ({self._because()})" if self._because() else ""
        return (
            f"> **Claim under test:** {self.text}  \n"
            f"> `{self.test}`: measured {self.effect}, {self.estimate.level:.0%} interval "
            f"{self.interval}{self.power_line}  \n{checks}"
            f"> **Verdict: {self.verdict}**{why} ({self._details()})"
        )

    def _repr_html_(self) -> str:
        self.register()
        rec = self.record()
        esc = html.escape
        rgb = self._rgb()
        data = esc(json.dumps(rec), quote=True)
        return (
            f'<div class="llmviz-claim" id="claim-{esc(self.id)}" data-llmviz-record="{data}" '
            f'style="border:1px solid rgba({rgb},0.55);border-left:6px solid rgb({rgb});'
            f"background:rgba({rgb},0.08);border-radius:6px;padding:0.6em 0.9em;"
            f'margin:0.8em 0;color:inherit;line-height:1.45">'
            f'<div style="font-size:0.8em;letter-spacing:0.04em;opacity:0.75">'
            f"CLAIM UNDER TEST</div>"
            f'<div style="font-weight:600">{esc(self.text)}</div>'
            f'<div><code style="color:inherit;background:transparent">{esc(self.test)}</code>'
            f": measured <b>{esc(self.effect)}</b>, {self.estimate.level:.0%} interval "
            f"{esc(self.interval)}{esc(self.power_line)}</div>"
            f"{self._checks_html()}"
            f'<div>Verdict: <span style="font-weight:700;padding:0 0.4em;border-radius:4px;'
            f'background:rgba({rgb},0.22)">{esc(self.verdict)}</span>'
            + (f" <span>({esc(self._because())})</span>" if self._because() else "")
            + f'<span style="opacity:0.75;font-size:0.9em"> · {esc(self._details())}</span>'
            f"</div></div>"
        )

    def _checks_html(self) -> str:
        if not self.checks:
            return ""
        items = "".join(
            f'<li class="llmviz-check-{"pass" if c.passed else "fail"}">'
            f"<b>{c.mark}</b>: {html.escape(c.name)}"
            + (f" ({html.escape(c.detail)})" if c.detail else "") + "</li>"
            for c in self.checks
        )
        return f'<div>Validity checks:<ul style="margin:0.1em 0 0.2em 1.2em">{items}</ul></div>'
