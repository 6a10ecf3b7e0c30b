"""What a record says about the run that made it: versions, device, time, commit; its label;
and its JSON layout (one line per list of numbers, so a curve does not take 80 lines)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["PACKAGE_DIR", "RECORDING_ENV", "recording", "run_meta", "label", "dumps"]

#: Set to ``"<name>.<size>"`` while a record is produced or its prefix re-run: code that
#: caches work across runs (a trained model on disk) must not read the cache then, since a
#: cached step executes no code and its code would be missing from the fingerprint.
RECORDING_ENV = "LLMVIZ_RECORDING"
#: The llmviz package folder (its code is what a record's fingerprint covers).
PACKAGE_DIR = Path(__file__).resolve().parents[2]


def _git_commit() -> str:
    """The commit of the llmviz checkout, with ``+modified`` if llmviz/ has uncommitted edits."""
    root = PACKAGE_DIR.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=20, check=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "llmviz"],
                               capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" +modified" if dirty.stdout.strip() else "")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_meta(size: str, runs: Any, wall_s: float, processes: int | None, jobs: int) -> dict:
    """The run's circumstances, JSON-ready."""
    import llmviz
    from ...runtime import device
    from ...training.corpus_id import corpus_digests
    from ..strategy import pool_size

    dev = device()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_name()
    workers = pool_size(jobs, processes) if runs.parallel else 1
    return {
        "size": size,
        "device": dev.type,
        "device_name": name,
        "device_label": f"cuda ({name})" if dev.type == "cuda" else dev.type,  # as a Claim's
        "threads": 1,  # every job runs torch on one thread (see llmviz.evidence.seeds)
        "processes": workers,
        "parallel": bool(runs.parallel),
        "strategy": getattr(runs, "strategy", "fork" if runs.parallel else "serial"),
        "cores": _cores(),
        "wall_s": round(wall_s, 2),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git_commit(),
        "llmviz": getattr(llmviz, "__version__", "unknown"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": sys.platform,
        "corpus": corpus_digests(),
    }


def label(size: str, params: dict[str, Any], meta: dict[str, Any]) -> str:
    """``"long record: 1600 steps, cpu (2 processes x 1 thread), 7.9 min, 2026-11-26"``."""
    steps = f"{params['steps']} steps, " if isinstance(params.get("steps"), int) else ""
    if meta["device"] == "cpu":
        n = meta.get("processes", 1)
        where = f"cpu ({n} process{'es' if n != 1 else ''} x {meta.get('threads', 1)} thread)"
    else:
        where = f"{meta['device']} ({meta.get('device_name', '?')})"
    wall = meta["wall_s"]
    took = f"{wall / 60:.1f} min" if wall >= 60 else f"{wall:.0f} s"
    return f"{size} record: {steps}{where}, {took}, {meta['date'][:10]}"



def dumps(data: dict[str, Any]) -> str:
    """JSON with one level of indentation per nesting and every list of numbers on one line."""
    text = json.dumps(data, indent=1, allow_nan=True)
    return re.sub(r"\[\s+([-0-9.eE+,\s]+?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text) + "\n"


@contextlib.contextmanager
def recording(what: str) -> Iterator[None]:
    """Set :data:`RECORDING_ENV` to ``what`` for the block (and the workers it forks)."""
    before = os.environ.get(RECORDING_ENV)
    os.environ[RECORDING_ENV] = what  # inherited by the forked workers
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RECORDING_ENV, None)
        else:
            os.environ[RECORDING_ENV] = before
