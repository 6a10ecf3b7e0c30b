"""A stored run of an experiment: its results, parameters, circumstances and code fingerprint;
whether it is stale, its label, and the prefix check that it reproduces."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from ..._checks import check_choice
from ..seeds import Runs, run_grid
from ._fingerprint import changes
from ...training.corpus_id import corpus_digests
from ._meta import label, recording

__all__ = ["Record", "FORMAT", "CROSS_DEVICE_RTOL"]

#: The record layout's version.
FORMAT = 1
#: Tolerance of the prefix check when the record was made on another device type.
CROSS_DEVICE_RTOL = 0.05


class Record:
    """A stored run of an :class:`Experiment` (read with :meth:`Experiment.record`).

    Attributes:
        runs: the results as :class:`~llmviz.evidence.Runs` (``runs.values("rope", "ppl")``).
        params: the parameters it ran with. meta: size, device, device_name, threads,
            processes, wall_s, date, commit, llmviz, torch, python.
    """

    def __init__(self, experiment: Any, data: dict[str, Any], path: Path) -> None:
        if not (hasattr(experiment, "fn") and hasattr(experiment, "refresh_command")):
            raise TypeError(f"experiment must be an llmviz Experiment, got "
                            f"{type(experiment).__name__}; read records with exp.record(size)")
        if not isinstance(data, dict):
            raise TypeError(f"data must be a record's dict, got {type(data).__name__}")
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a file path, got {type(path).__name__}")
        path = Path(path)
        if data.get("format") != FORMAT or data.get("experiment") != experiment.name:
            raise ValueError(f"{path} is not a format-{FORMAT} record of {experiment.name}; "
                             f"re-create it with `{experiment.refresh_command('long')}`")
        self.experiment, self.data, self.path = experiment, data, path
        self.size: str = data["size"]
        self.params: dict[str, Any] = data["params"]
        self.meta: dict[str, Any] = data["meta"]
        results = {int(s): {v: data["runs"][v][s] for v in data["variants"]}
                   for s in map(str, data["seeds"])}
        how = self.meta.get("strategy") or ("fork" if self.meta.get("parallel") else "serial")
        self.runs = Runs(results, strategy=how)

    def __repr__(self) -> str:
        return f"Record({self.experiment.name!r}, {self.label!r})"

    def corpus_note(self) -> str | None:
        """None when this Python builds the corpus text the record was trained on (``meta.corpus``,
        digests as :mod:`llmviz.training.corpus_id` takes them), or when it read no corpus or does
        not say; else a sentence naming both Pythons. (A chapter's first cell notes a corpus that
        differs from the book's; this is the record's own: a ``full`` record made on a GPU
        machine's Python can have other text than the book's ``long`` records.)
        """
        made = self.meta.get("corpus")
        functions = self.data.get("code", {}).get("functions", {})
        if not made or "llmviz.training.data:_corpus" not in functions:  # it read no corpus
            return None
        here = corpus_digests()
        differ = [name for name in sorted(made) if here.get(name) != made[name]]
        if not differ:
            return None
        return (f"the {self.size} record of {self.experiment.name} was trained on the "
                f"{' and '.join(differ)} text that Python {self.meta.get('python', '?')} ships; this "
                f"Python ({platform.python_version()}) ships other text, so a comparison of this record "
                "with a baseline computed here (an n-gram gate, a shortcut) pairs different text and "
                "does not decide anything: read those on the published book, or run on Python "
                f"{self.meta.get('python', '?')}. The record's own numbers stand as recorded.")

    @property
    def refresh_command(self) -> str:
        return self.experiment.refresh_command(self.size)

    @property
    def stale(self) -> str | None:
        """Why the record no longer matches its experiment, or None when it does."""
        return self.why_stale()

    def why_stale(self, source: Any = None) -> str | None:
        """:attr:`stale`, with the code read from ``source`` (``module -> text``, e.g. a git
        revision's) instead of the files on disk."""
        exp, reasons = self.experiment, []
        if self.size not in exp.sizes:
            return f"the experiment no longer has a {self.size!r} size"
        now = exp.params(self.size)
        changed = sorted(k for k in set(now) | set(self.params)
                         if now.get(k, "<unset>") != self.params.get(k, "<unset>"))
        if changed:
            reasons.append("parameters changed: " + ", ".join(
                f"{k} {self.params.get(k, '<unset>')!r} -> {now.get(k, '<unset>')!r}"
                for k in changed))
        for what in ("variants", "seeds"):
            if getattr(exp, what) != self.data[what]:
                reasons.append(f"{what} changed: {self.data[what]} -> {getattr(exp, what)}")
        ran = _fn_key(exp.fn)
        if ran is not None and ran not in self.data["code"].get("functions", {}):
            reasons.append(f"the experiment now runs {ran}, which this record's runs did not call")
        code = changes(self.data["code"], source)
        if code:
            reasons.append("code changed: " + "; ".join(code))
        return "; ".join(reasons) or None

    @property
    def label(self) -> str:
        """Which run this is, e.g. ``"long record: 1600 steps, cpu (2 processes x 1 thread),
        7.9 min, 2026-11-26"``; a stale record's label ends with why it is stale."""
        text = label(self.size, self.params, self.meta)
        stale = self.stale
        if stale and len(stale) > 160:  # the full reason is in .stale and in `check`
            stale = stale[:157].rstrip() + "..."
        return f"{text} (STALE: {stale})" if stale else text

    def reproduce(self, variant: str | None = None, seed: int | None = None) -> tuple[bool, str]:
        """Re-run the first ``prefix`` steps of one (variant, seed) (default: the first of each)
        and compare every curve point it produces with the record.

        Returns ``(passed, what was compared)``.
        """
        from ...runtime import device  # noqa: PLC0415 - read at call time

        variant = self.data["variants"][0] if variant is None else variant
        seed = self.data["seeds"][0] if seed is None else seed
        check_choice(variant, "variant", self.data["variants"])
        check_choice(seed, "seed", self.data["seeds"])
        prefix = self.data.get("prefix") or self.experiment.prefix_for(self.size)
        here = device().type
        same = here == self.meta.get("device")
        rtol = self.experiment.rtol if same else CROSS_DEVICE_RTOL
        fn, params = self.experiment.fn, self.params
        with recording(f"{self.experiment.name}.{self.size}"):
            fresh = run_grid(lambda v, s: fn(v, s, prefix=prefix, **params), [variant], [seed],
                             processes=1)[seed][variant]  # in this process, on one thread
        stored = self.runs[seed][variant]
        compared, worst = 0, (0.0, "")
        for path, curve in _curves(fresh):
            recorded: Any = stored
            for key in path:
                recorded = recorded.get(key) if isinstance(recorded, dict) else None
            if not isinstance(recorded, list):
                return False, f"the prefix run returns a curve {path} the record does not hold"
            for i, (a, b) in enumerate(zip(curve, recorded)):
                err = abs(a - b) / max(abs(b), 1e-12)
                compared += 1
                if err > worst[0]:
                    worst = (err, f"{'/'.join(path)}[{i}]: {a:.6g} vs recorded {b:.6g}")
        where = (f"prefix {prefix} steps of ({variant!r}, {seed}) on {here}"
                 + ("" if same else f" (recorded on {self.meta.get('device')}: cross-device)"))
        if not compared:
            return False, f"{where} produced no curve point to compare; raise prefix"
        passed = worst[0] <= rtol
        verdict = "matches" if passed else "does NOT match"
        return passed, (f"{where}: {compared} curve points; {verdict} within rtol {rtol:g} "
                        f"(largest relative difference {worst[0]:.2g}"
                        + (f" at {worst[1]})" if worst[1] else ")"))


def _curves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list]]:
    if isinstance(node, list):
        return [(path, node)]
    if isinstance(node, dict):
        return [c for k, v in node.items() for c in _curves(v, path + (k,))]
    return []


def _fn_key(fn: Any) -> str | None:
    """``"module:qualname"`` of an experiment's function as the fingerprint names it, or None
    where the fingerprint cannot name it (a lambda, a function defined inside another, a
    callable object): then only the code it calls is compared."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    return f"{module}:{qualname}"
