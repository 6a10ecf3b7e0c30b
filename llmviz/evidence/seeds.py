"""Run one experiment over several seeds, in parallel over the machine's cores where possible.

``fn(seed)`` returns the measured quantities of one run: a flat dict ``{"loss": 2.31, ...}``
(a value may also be a curve, a list of numbers measured at fixed steps) or a nested one, ``{"mha": {"loss": 2.31}, "gqa": {"loss": 2.35}}``, for variants that share
the seed (same initialisation stream, same data, same evaluation targets) so that they can be
compared paired (:func:`llmviz.evidence.paired`).

How the seeds run (``strategy``; the default ``"auto"`` picks by device):

* ``"fork"``: worker processes started with ``fork``, one per core, each on one torch thread.
  Nothing is pickled but the seed and the result, so a function defined in a notebook cell
  works. Auto picks it on Linux when no GPU is present: the book's CPU-size models are small
  and one process per core beats threads.
* ``"serial"``: one seed after another in this process, on one torch thread (restored
  afterwards). Auto picks it whenever CUDA (or Apple MPS) is present. A forked child cannot use
  CUDA once the parent has touched it (``torch.cuda.is_available()``, which ``lv.device()``
  calls, already initialises the driver; a CUDA backward pass starts autograd threads that a
  fork cannot copy), parallel workers would share the one GPU anyway (``spawn`` remains, on
  request; ``benchmarks/bench_seeds.py`` times it against serial on a GPU), and threads with
  one CUDA stream each would share torch's global random generator, so a seed's numbers would
  depend on how the threads interleave. Auto also runs serially where ``fork``
  is not the platform's way (macOS, Windows), for ``processes=1`` and for a single seed.
* ``"spawn"``: fresh worker processes (each imports torch and opens its own CUDA context,
  seconds each). Only on request; ``fn`` travels by pickling, so it must be importable from a
  module: a function defined in a notebook cell, a lambda or a closure is refused up front
  with a ``TypeError`` that names it and says where to move it.

Every strategy returns the results in the order of ``seeds``, and a seed gives the same
numbers in each of them, on any number of cores, as long as ``fn`` seeds its own generators
from ``seed``.

:func:`run_grid` runs ``fn(variant, seed)`` for every pair as its own job: three seeds of one
function leave a core idle while the third runs, but three seeds of five variants are fifteen
jobs that keep both cores busy. The result is the same :class:`Runs` as a ``run_seeds`` whose
``fn(seed)`` returned ``{variant: fn(variant, seed)}``, number for number, as long as each
call seeds its own generators from ``seed`` (it then cannot depend on which job ran before it).

Return what a run measured rather than printing it: in a Jupyter kernel the workers' printed
lines reach the notebook in pieces.
"""

from __future__ import annotations

import functools
import importlib
import multiprocessing as mp
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch

from .._checks import check_positive_int
from ..runtime import threads
from .stats import Estimate, summarize
from .strategy import check_sendable, choose_strategy, pool_size

__all__ = ["run_seeds", "run_grid", "Runs", "pool_size"]

#: The function the workers run (inherited through fork, or unpickled once per spawned worker).
_WORK: Callable[[int], Any] | None = None

Result = dict[str, Any]  # name -> float, or variant -> {name -> float}


def _flatten(result: Any, seed: int, path: tuple[str, ...] = ()) -> Result:
    """Check one run's result and turn every leaf into a Python float."""
    where = "fn(" + str(seed) + ")" + "".join(f"[{k!r}]" for k in path)
    if not isinstance(result, Mapping):
        raise TypeError(
            f"{where} must return a dict of name -> number (or variant -> dict), got "
            f"{type(result).__name__}"
        )
    out: Result = {}
    for key, value in result.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} has a key {key!r} of type {type(key).__name__}; use str")
        if isinstance(value, Mapping):
            out[key] = _flatten(value, seed, path + (key,))
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            out[key] = float(value.item())
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
        elif _is_curve(value):  # a curve: numbers measured at fixed steps
            out[key] = [float(v) for v in value]
        else:
            raise TypeError(
                f"{where}[{key!r}] must be a number (or a one-element tensor), or a curve (a "
                f"list of numbers or a 1-D tensor), got {type(value).__name__}; return .item() "
                "of a tensor"
            )
    return out


def _is_curve(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.ndim == 1 and not value.is_complex()
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )


def _worker_init(fn: Callable[[int], Any] | None = None) -> None:
    global _WORK
    torch.set_num_threads(1)
    if fn is not None:  # spawned: the function arrives pickled
        _WORK = fn


def _call(seed: int) -> tuple[str, Any]:
    try:
        assert _WORK is not None, "run_seeds set no work before starting its workers"
        return "ok", _flatten(_WORK(seed), seed)
    except BaseException:  # sent back: the parent raises it with the seed named
        return "error", traceback.format_exc()


class Runs:
    """The results of :func:`run_seeds`: seed -> result, read-only, in the order of the seeds.

    ``runs.values("gqa", "loss")`` is one float per seed, ``runs.summary("gqa", "loss")`` its
    :class:`~llmviz.evidence.Estimate`.
    """

    def __init__(self, results: dict[int, Result], *, strategy: str = "serial") -> None:
        self._results = results
        self.strategy = strategy  #: "fork", "spawn" or "serial": how the seeds ran
        self.parallel = strategy != "serial"  #: whether the seeds ran in worker processes

    def __getitem__(self, seed: int) -> Result:
        return self._results[seed]

    def __iter__(self) -> Iterator[int]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    @property
    def seeds(self) -> list[int]:
        return list(self._results)

    def items(self) -> Iterator[tuple[int, Result]]:
        return iter(self._results.items())

    def values(self, *keys: str) -> list[float]:
        """One float per seed at ``keys`` (``values("loss")``, ``values("gqa", "loss")``)."""
        if not keys:
            raise ValueError("values() needs the key path of a quantity, e.g. values('loss')")
        out = []
        for seed, result in self._results.items():
            node: Any = result
            for depth, key in enumerate(keys):
                if not isinstance(node, dict) or key not in node:
                    have = sorted(node) if isinstance(node, dict) else type(node).__name__
                    raise KeyError(
                        f"seed {seed} has no {keys[: depth + 1]!r}; keys there: {have}"
                    )
                node = node[key]
            if isinstance(node, list):
                raise TypeError(f"{keys!r} is a curve; read it with curves{keys!r}")
            if not isinstance(node, float):
                raise TypeError(f"{keys!r} is a group of quantities, not one; add a key")
            out.append(node)
        return out

    def curves(self, *keys: str) -> list[list[float]]:
        """One curve (list of floats) per seed at ``keys`` (``curves("gqa", "loss_curve")``)."""
        out = []
        for seed, result in self._results.items():
            node: Any = result
            for key in keys:
                node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, list):
                raise KeyError(f"seed {seed} has no curve at {keys!r}")
            out.append(list(node))
        return out

    def summary(self, *keys: str, level: float = 0.95) -> Estimate:
        """Mean over seeds of the quantity at ``keys`` with its t interval."""
        return summarize(self.values(*keys), level=level)

    def __repr__(self) -> str:
        return f"Runs({len(self)} seeds {self.seeds}, {self.strategy})"


def _check_seeds(seeds: Any) -> list[int]:
    """``seeds`` as a list of distinct ints, or the error that names what is wrong."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds must be a sequence of ints, e.g. range(3), got {seeds!r}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds is empty; pass e.g. seeds=range(3) (at least 3 for an interval)")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"every seed must be an int, got {s!r} ({type(s).__name__})")
    if len(set(seeds)) != len(seeds):
        dup = next(s for s in seeds if seeds.count(s) > 1)
        raise ValueError(f"seeds must be distinct; seed {dup} appears twice in {seeds}")
    return seeds


def run_seeds(
    fn: Callable[[int], Mapping[str, Any]],
    seeds: Iterable[int],
    *,
    processes: int | None = None,
    strategy: str = "auto",
) -> Runs:
    """Call ``fn(seed)`` for every seed, in parallel where that is safe; results in seed order.

    Args:
        fn: one run of the experiment; returns ``{name: number}`` or
            ``{variant: {name: number}}`` (numbers may be one-element tensors).
        seeds: distinct ints, e.g. ``range(3)``.
        processes: worker processes; ``None`` uses one per available core (at most one per
            seed; see :func:`pool_size` for when it uses one per seed); ``1`` runs serially in
            this process.
        strategy: ``"auto"`` (fork on a CPU-only Linux machine, serial when a GPU is
            present), ``"fork"``, ``"spawn"`` (``fn`` must be importable from a module) or
            ``"serial"``; see the module's notes.

    Returns a :class:`Runs` mapping seed -> result (every number a float); ``runs.strategy``
    says how they ran.

    Raises:
        TypeError: ``fn`` not callable, a seed not an int, a result not a dict of numbers, or
            (``"spawn"``) ``fn`` cannot be sent to a worker process.
        ValueError: no seeds, repeated seeds, ``processes`` < 1, an unknown ``strategy``, or
            ``"fork"`` once CUDA is initialised.
        RuntimeError: ``fn`` raised for a seed (the message names it and holds its traceback).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable as fn(seed), got {type(fn).__name__}")
    seeds = _check_seeds(seeds)
    if processes is not None:  # None: one per core
        check_positive_int(processes, "processes")
    how = choose_strategy(len(seeds), processes, strategy)
    if how == "spawn":
        check_sendable(fn)
    return _run(fn, seeds, pool_size(len(seeds), processes), how)


#: Modules a training run imports lazily on first use and forked workers would otherwise each
#: import again, on every pool: ``torch._dynamo`` (about 1.2 s), which torch's optimisers load the
#: first time one is built. Imported once in the parent, they reach every fork for free.
PRELOAD = ("torch._dynamo",)


def _preload() -> None:
    """Import :data:`PRELOAD` in this (parent) process before it forks workers."""
    for name in PRELOAD:
        if name not in sys.modules:
            importlib.import_module(name)


def _run(fn: Callable[[int], Any], seeds: list[int], n_proc: int, how: str) -> Runs:
    global _WORK
    if how == "serial" or n_proc < 2:
        with threads(1):  # as in the workers: the same numbers in either mode
            return Runs({s: _flatten(fn(s), s) for s in seeds}, strategy="serial")
    if how == "fork":
        _preload()
        _WORK, pool_args = fn, {"initializer": _worker_init}
    else:  # spawn: each worker unpickles fn once
        pool_args = {"initializer": _worker_init, "initargs": (fn,)}
    try:
        with mp.get_context(how).Pool(n_proc, **pool_args) as pool:
            answers = pool.map(_call, seeds, chunksize=1)  # in the order of seeds
            pool.close()
            pool.join()
    finally:
        _WORK = None
    results: dict[int, Result] = {}
    for seed, (status, value) in zip(seeds, answers):
        if status == "error":
            raise RuntimeError(f"fn({seed}) failed in a worker process:\n{value}")
        results[seed] = value
    return Runs(results, strategy=how)


def _grid_job(fn: Callable[[str, int], Any], jobs: list[tuple[str, int]], k: int) -> Any:
    variant, seed = jobs[k]
    try:
        return fn(variant, seed)
    except Exception as err:  # name the pair, not the job number
        raise RuntimeError(f"fn({variant!r}, {seed}) failed: {type(err).__name__}: {err}") from err


def run_grid(
    fn: Callable[[str, int], Mapping[str, Any]],
    variants: Iterable[str],
    seeds: Iterable[int],
    *,
    processes: int | None = None,
    strategy: str = "auto",
) -> Runs:
    """Call ``fn(variant, seed)`` for every variant and seed, one job each, in parallel where
    that is safe; returns :class:`Runs` with ``runs[seed][variant]`` = that call's result.

    Same as ``run_seeds(lambda s: {v: fn(v, s) for v in variants}, seeds)`` but spread job by
    job over the cores, so an odd number of seeds does not leave a core idle. Every call must
    seed its own generators from ``seed``. ``strategy`` as in :func:`run_seeds`.

    Raises:
        TypeError: ``fn`` not callable, a variant not a str, a seed not an int, a result not a
            dict of numbers, or (``"spawn"``) ``fn`` cannot be sent to a worker process.
        ValueError: no variants or seeds, repeated ones, or a bad ``strategy``.
        RuntimeError: ``fn`` raised (the message names the variant and seed).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable as fn(variant, seed), got {type(fn).__name__}")
    if isinstance(variants, (str, bytes)) or not isinstance(variants, Iterable):
        raise TypeError(f"variants must be a sequence of str names, e.g. ['mha', 'gqa'], got {variants!r}")
    variants = list(variants)
    if not variants:
        raise ValueError("variants is empty; pass the names of the variants to run")
    for v in variants:
        if not isinstance(v, str):
            raise TypeError(f"every variant must be a str name, got {v!r} ({type(v).__name__})")
    if len(set(variants)) != len(variants):
        raise ValueError(f"variants must be distinct, got {variants}")
    seeds = _check_seeds(seeds)
    jobs = [(v, s) for s in seeds for v in variants]
    if processes is not None:
        check_positive_int(processes, "processes")
    how = choose_strategy(len(jobs), processes, strategy)
    if how == "spawn":
        check_sendable(fn, "run_grid")
    job = functools.partial(_grid_job, fn, jobs)  # picklable whenever fn is
    parts = _run(job, list(range(len(jobs))), pool_size(len(jobs), processes), how)
    results = {s: {v: parts[k] for k, (v, s2) in enumerate(jobs) if s2 == s} for s in seeds}
    return Runs(results, strategy=parts.strategy)
