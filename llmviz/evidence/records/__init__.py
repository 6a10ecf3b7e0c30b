"""Recorded runs: an experiment run at a size too large for the live page, stored as data.

An :class:`Experiment` is one function over variants x seeds, run at named sizes: ``"cpu"``
(the live size a chapter runs on every build, <= 120 s on 2 cores), ``"long"`` (CPU, up to
about 30 minutes on 2 cores) and ``"full"`` (a GPU). A run above ``cpu`` is stored as JSON in
``llmviz/experiments/records/<name>.<size>.json`` (or ``$LLMVIZ_RECORDS_DIR``), and the chapter
reads it while the book builds (:meth:`Experiment.record`). A record holds, per variant and
seed, the metrics and curves ``fn`` returned; the parameters; the llmviz, torch and Python
versions, the device and its name, processes and threads, wall time, date and git commit; and a
fingerprint of the code the run executed (see :mod:`llmviz.evidence.records._fingerprint`).

Guarantees (``tests/evidence/test_records.py``):

* **stale**: :attr:`Record.stale` names what changed since the record was made: its parameters,
  its variants or seeds, or the source of a function it executed (the experiment's function and
  every llmviz function it called; comments, docstrings, formatting and checks that only refuse
  input do not count: see :mod:`llmviz.evidence.records._normalise`). The label
  of a stale record says so, and ``check`` fails naming the command that refreshes it.
* **reproducible**: ``python -m llmviz.evidence.records run NAME --size SIZE`` re-creates a
  record; :meth:`Record.reproduce` re-runs the first ``prefix`` training steps of one (variant,
  seed) and compares every curve point they produce with the record, within ``rtol`` (1e-3 by
  default) on the device type the record was made on. A record made on another device type
  (a ``full`` GPU record checked on a CPU) starts from other random numbers and other kernels:
  it is compared within :data:`CROSS_DEVICE_RTOL`, which checks it came from this experiment at
  these parameters (data, model, initial scale), not bit-level agreement.
* **honest display**: :attr:`Record.label` says which size, device, wall time and date; see
  :mod:`llmviz.evidence.compare` for the live run beside the record.

Every experiment is a module-level object in a module of ``llmviz.experiments`` (one per
chapter); :func:`experiments` imports them all. The command line::

    python -m llmviz.evidence.records list
    python -m llmviz.evidence.records check [NAME ...]
    python -m llmviz.evidence.records run NAME [--size long|full]
    python -m llmviz.evidence.records refingerprint [NAME ...] [--at REVISION]
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..._checks import check_choice, check_positive, check_positive_int
from ._fingerprint import CodeTracer, fingerprint
from ._meta import PACKAGE_DIR, RECORDING_ENV, dumps, recording, run_meta
from ._record import CROSS_DEVICE_RTOL, FORMAT, Record
from ..seeds import Runs, run_grid

__all__ = [
    "Experiment",
    "Record",
    "experiments",
    "find",
    "records_dir",
    "SIZES",
    "RECORDS_DIR_ENV",
    "EXPERIMENTS_ENV",
    "RECORDING_ENV",
    "CROSS_DEVICE_RTOL",
]

SIZES = ("cpu", "long", "full")
#: Where records are read and written (default: ``llmviz/experiments/records``).
RECORDS_DIR_ENV = "LLMVIZ_RECORDS_DIR"
#: Comma-separated modules or packages searched for experiments instead of llmviz.experiments.
EXPERIMENTS_ENV = "LLMVIZ_EXPERIMENTS"


def records_dir() -> Path:
    """The folder records live in: ``$LLMVIZ_RECORDS_DIR`` or ``llmviz/experiments/records``."""
    env = os.environ.get(RECORDS_DIR_ENV)
    return Path(env) if env else PACKAGE_DIR / "experiments" / "records"


def _plain(params: Any, where: str) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(f"{where} must be a dict of parameters, got {type(params).__name__}")
    try:
        back = json.loads(json.dumps(dict(params)))
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where} must hold plain JSON values (numbers, str, lists): {err}") from None
    if back != dict(params):
        raise TypeError(f"{where} must hold plain JSON values; use lists, not tuples: {params!r}")
    for key in ("prefix", "variant", "seed"):
        if key in back:
            raise ValueError(f"{where} may not define {key!r}: the runner passes it")
    return back


class Experiment:
    """One experiment: ``fn(variant, seed, *, prefix=None, **params) -> dict`` over variants x
    seeds, at named sizes.

    Args:
        name: letters, digits and ``_`` (it names the record files), e.g. ``"ch09_race"``.
        fn: one (variant, seed) job. It builds its models on :func:`llmviz.device`, seeds its
            own generators from ``seed``, and returns floats, curves (lists of floats measured
            at fixed steps from step 0) and dicts of those. With ``prefix`` it stops after that
            many training steps and returns what it measured so far (skip the evaluation).
        variants: the variants' names.
        seeds: distinct ints (3 or more for an interval).
        sizes: ``{"cpu": params, "long": params, "full": params}``; each params is a dict of
            plain JSON values passed to ``fn`` as keywords.
        description: one line for ``list``.
        prefix: training steps the reproducibility check re-runs (enough for 2+ curve points),
            one int or ``{size: int}`` (a ``full`` record re-run on a CPU wants a short one).
            With :func:`llmviz.train`, train ``min(prefix, steps)`` steps: the warmup does not
            depend on the total, so a prefix within the warmup follows the full run exactly.
        rtol: relative tolerance of that check on the record's device type.

    The run records which code it executed (a ``sys.settrace`` hook that sees each function
    once; a few percent of the run's time), for :attr:`Record.stale`.
    """

    def __init__(self, name: str, fn: Callable[..., Mapping[str, Any]], *, variants: Any,
                 seeds: Any, sizes: Mapping[str, Mapping[str, Any]], description: str = "",
                 prefix: int | Mapping[str, int] = 20, rtol: float = 1e-3) -> None:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            raise ValueError(f"name={name!r} must be letters, digits and '_', e.g. 'ch09_race'")
        if not callable(fn):
            raise TypeError(f"fn must be callable as fn(variant, seed, **params), got {fn!r:.60}")
        if isinstance(variants, (str, bytes)) or not isinstance(variants, (list, tuple)):
            raise TypeError(f"variants must be a list of str names, got {variants!r:.60}")
        if not variants or len(set(variants)) != len(variants) or not all(
                isinstance(v, str) for v in variants):
            raise ValueError(f"variants must be distinct str names, at least one; got {variants!r}")
        seeds = list(seeds) if isinstance(seeds, (list, tuple, range)) else seeds
        if not isinstance(seeds, list) or not seeds or any(
                isinstance(s, bool) or not isinstance(s, int) for s in seeds):
            raise TypeError(f"seeds must be a list of ints, e.g. range(3), got {seeds!r:.60}")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        if not isinstance(sizes, Mapping) or not sizes:
            raise TypeError(f"sizes must be a dict like {{'cpu': {{...}}, 'long': {{...}}}}, "
                            f"got {sizes!r:.60}")
        for size in sizes:
            check_choice(size, "size", SIZES)
        if not isinstance(description, str):
            raise TypeError(f"description must be a str, got {type(description).__name__}")
        self.name, self.fn, self.description = name, fn, description
        self.variants, self.seeds = list(variants), seeds
        self.sizes = {s: _plain(p, f"sizes[{s!r}]") for s, p in sizes.items()}
        if isinstance(prefix, Mapping):
            for size, steps in prefix.items():
                check_choice(size, "prefix size", list(self.sizes))
                check_positive_int(steps, f"prefix[{size!r}]")
            self.prefix: int | dict[str, int] = dict(prefix)
        else:
            self.prefix = check_positive_int(prefix, "prefix")
        self.rtol = check_positive(rtol, "rtol")

    def __repr__(self) -> str:
        return (f"Experiment({self.name!r}: {len(self.variants)} variants x {len(self.seeds)} "
                f"seeds, sizes {list(self.sizes)})")

    def params(self, size: str) -> dict[str, Any]:
        """The parameters of ``size`` (a copy)."""
        check_choice(size, "size", SIZES)
        if size not in self.sizes:
            raise ValueError(f"{self.name} has no size {size!r}; it defines {list(self.sizes)}")
        return json.loads(json.dumps(self.sizes[size]))

    def prefix_for(self, size: str) -> int:
        """The prefix (training steps) the reproducibility check re-runs at ``size``."""
        if isinstance(self.prefix, dict):
            if size not in self.prefix:
                raise ValueError(f"{self.name} gives no prefix for size {size!r}; add it to "
                                 f"prefix={self.prefix}")
            return self.prefix[size]
        return self.prefix

    def refresh_command(self, size: str) -> str:
        """The command that (re-)creates the record of ``size``."""
        return f"python -m llmviz.evidence.records run {self.name} --size {size}"

    def path(self, size: str) -> Path:
        """Where the record of ``size`` lives."""
        return records_dir() / f"{self.name}.{size}.json"

    def run(self, size: str = "cpu", *, processes: int | None = None) -> Runs:
        """Run every (variant, seed) job at ``size`` (in parallel over the cores) and return the
        :class:`~llmviz.evidence.Runs`; nothing is stored. The live cells call this."""
        params = self.params(size)
        return run_grid(lambda v, s: self.fn(v, s, **params), self.variants, self.seeds,
                        processes=processes)

    def roots(self) -> list[Path]:
        """The folders whose code the fingerprint covers: llmviz and the experiment's own."""
        own = Path(inspect.getfile(inspect.unwrap(self.fn))).resolve().parent  # not a decorator's file
        return [PACKAGE_DIR, own]

    def produce(self, size: str, *, processes: int | None = None) -> Record:
        """Run at ``size``, write the record (``python -m llmviz.evidence.records run`` calls
        this) and return it. ``size`` is ``"long"`` or ``"full"``: the live size is not stored."""
        if size == "cpu":
            raise ValueError("the 'cpu' size is the live run and is not recorded; produce "
                             "'long' or 'full'")
        params, roots = self.params(size), self.roots()
        with tempfile.TemporaryDirectory() as tmp:
            def job(variant: str, seed: int) -> Mapping[str, Any]:
                tracer, start = CodeTracer(roots), time.perf_counter()
                with tracer:
                    out = self.fn(variant, seed, **params)
                tracer.dump(Path(tmp) / f"{self.variants.index(variant)}.{seed}.json",
                            wall_s=time.perf_counter() - start)
                return out

            start = time.perf_counter()
            with recording(f"{self.name}.{size}"):
                runs = run_grid(job, self.variants, self.seeds, processes=processes)
            wall = time.perf_counter() - start
            reports = [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("*.json"))]
        functions: dict[str, set[str]] = {self.fn.__module__: {self.fn.__qualname__}}
        for report in reports:
            for module, names in report["functions"].items():
                functions.setdefault(module, set()).update(names)
        data = {
            "format": FORMAT,
            "experiment": self.name,
            "size": size,
            "params": params,
            "variants": self.variants,
            "seeds": self.seeds,
            "prefix": self.prefix_for(size),
            "meta": run_meta(size, runs, wall, processes, len(self.variants) * len(self.seeds)),
            "code": fingerprint({m: sorted(n) for m, n in functions.items()}),
            "runs": {v: {str(s): runs[s][v] for s in self.seeds} for v in self.variants},
        }
        path = self.path(size)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = path.with_suffix(f".tmp{os.getpid()}")
        tmp_path.write_text(dumps(data))
        tmp_path.replace(path)
        return Record(self, data, path)

    def record(self, size: str = "long") -> Record:
        """The stored record of ``size``; raises ``FileNotFoundError`` naming the command that
        creates it when there is none."""
        self.params(size)  # checks the size
        path = self.path(size)
        if not path.exists():
            raise FileNotFoundError(f"no {size} record of {self.name} at {path}; create it with "
                                    f"`{self.refresh_command(size)}`")
        return Record(self, json.loads(path.read_text()), path)

    def records(self) -> list[Record]:
        """The records that exist, in size order."""
        return [self.record(s) for s in SIZES if s in self.sizes and self.path(s).exists()]


def _modules() -> list[str]:
    env = os.environ.get(EXPERIMENTS_ENV)
    names = [n.strip() for n in env.split(",") if n.strip()] if env else ["llmviz.experiments"]
    out = []
    for name in names:
        module = importlib.import_module(name)
        out.append(name)
        if hasattr(module, "__path__"):  # a package: every module in it
            out += [f"{name}.{m.name}" for m in pkgutil.iter_modules(module.__path__)]
    return out


def experiments() -> dict[str, Experiment]:
    """Every :class:`Experiment` defined at module level in the experiment modules, by name."""
    found: dict[str, tuple[str, Experiment]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if isinstance(obj, Experiment):
                other = found.get(obj.name)
                if other is not None and other[1] is not obj:
                    raise ValueError(f"two experiments are named {obj.name!r}: in {other[0]} "
                                     f"and {name}; rename one")
                found.setdefault(obj.name, (name, obj))
    return {k: v for k, (_, v) in sorted(found.items())}


def find(name: str) -> Experiment:
    """The experiment called ``name``; ``ValueError`` lists the known names."""
    if not isinstance(name, str):
        raise TypeError(f"name must be an experiment's name (str), got {type(name).__name__}")
    known = experiments()
    if name not in known:
        raise ValueError(f"no experiment named {name!r}; known: {sorted(known) or 'none'}")
    return known[name]

