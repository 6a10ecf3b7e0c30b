"""How :func:`~llmviz.evidence.run_seeds` runs the seeds on this machine, and whether a
function can be sent to a spawned worker process.

:func:`choose_strategy` is the decision (``"fork"`` on a CPU-only Linux machine, ``"serial"``
when CUDA or MPS is present; the reasons are in :mod:`llmviz.evidence.seeds`);
:func:`check_sendable` is the up-front check behind ``strategy="spawn"``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
from typing import Any

import torch

from .._checks import check_positive_int

__all__ = ["STRATEGIES", "choose_strategy", "check_sendable", "pool_size"]

#: The ways :func:`~llmviz.evidence.run_seeds` can run the seeds; ``"auto"`` picks one.
STRATEGIES = ("auto", "fork", "spawn", "serial")


def _accelerator_present() -> bool:
    if torch.cuda.is_available() or torch.cuda.is_initialized():
        return True
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def _fork_is_native() -> bool:
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def choose_strategy(n_seeds: int, processes: int | None = None, strategy: str = "auto") -> str:
    """The strategy :func:`run_seeds` uses for ``n_seeds`` seeds: ``"fork"``, ``"spawn"`` or
    ``"serial"`` (see the module's notes). ``"auto"`` decides by device and platform.

    Raises:
        ValueError: an unknown ``strategy``, or ``"fork"`` once CUDA is initialised here.
    """
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r} is not one of {STRATEGIES}; leave it 'auto'")
    check_positive_int(n_seeds, "n_seeds", allow_zero=True)
    if processes is not None:
        check_positive_int(processes, "processes")
    if n_seeds < 2 or processes == 1:
        return "serial"
    if strategy == "fork":
        if "fork" not in mp.get_all_start_methods():
            raise ValueError("strategy='fork' is not available on this platform; use 'spawn' or 'serial'")
        if torch.cuda.is_initialized():
            raise ValueError(
                "strategy='fork' after CUDA is initialised: forked workers cannot use CUDA; "
                "use strategy='serial' (or 'auto'), or 'spawn' with a function from a module"
            )
        return "fork"
    if strategy != "auto":
        return strategy
    return "fork" if _fork_is_native() and not _accelerator_present() else "serial"


def _describe(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module and module != "__main__" else name


def check_sendable(fn: Any, where: str = "run_seeds") -> None:
    """Raise a ``TypeError`` naming ``fn`` and the fix unless a spawned worker can receive it."""
    reason = None
    interactive = not getattr(sys.modules.get("__main__"), "__file__", None)  # a kernel, a REPL
    notebook = "a notebook cell or an interactive session, which a new process cannot import"
    if interactive and getattr(fn, "__module__", None) == "__main__":
        reason = f"it is defined in {notebook}"
    else:
        try:
            data = pickle.dumps(fn)
        except Exception as err:  # pickle raises several types for the same problem
            reason = f"pickling it fails ({type(err).__name__}: {err})"
        else:  # e.g. a functools.partial or an instance of a class from a notebook cell
            if interactive and b"__main__" in data:
                reason = f"it refers to something defined in {notebook}"
    if reason is not None:
        name = _describe(fn)
        short = name.split(".")[-1]
        short = "the lambda as a def" if short == "<lambda>" else short
        raise TypeError(
            f"{where}(strategy='spawn') sends fn to new processes by pickling, but {name!r} "
            f"cannot be sent: {reason}. Define {short} at the top level of a .py "
            "module (next to the notebook, imported from it) and pass that function, or let "
            "the seeds run in this process with strategy='serial' (what 'auto' does on a GPU)"
        )


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def pool_size(n_jobs: int, processes: int | None = None) -> int:
    """How many worker processes run ``n_jobs`` jobs: ``processes`` if given (at most one per
    job); else one per core, or one per job when the jobs would leave a pool's last round
    part-empty and number at most two per core. Three equal seeds on two cores then take about
    0.78 of the time two processes take (two rounds, the second on one core), with the same
    numbers; five took 0.94 (measured on this book's 2-core machine, ``benchmarks/bench_seeds.py``
    has the set-up)."""
    check_positive_int(n_jobs, "n_jobs")
    if processes is not None:
        check_positive_int(processes, "processes")
        return min(n_jobs, processes)
    cores = _cores()
    if n_jobs % cores and n_jobs <= 2 * cores:
        return n_jobs
    return min(n_jobs, cores)
