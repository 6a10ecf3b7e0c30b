"""What the benchmark scripts share: their command-line options, and the timing functions.

Timing is the library's own (:mod:`llmviz.training.bench`, re-exported here so
``from benchmarks._harness import compare, header`` keeps working). :func:`bench_parser`
gives every script the same ``--threads``, ``--repeats`` and (where asked) ``--device``
options, one integer option per size the script names, and ``--quick``: each size comes with
a tiny value, taken by every size left at its default, so that any benchmark runs once in
seconds to show that it still works.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from llmviz.training.bench import (
    Comparison,
    Timing,
    compare,
    header,
    measure,
    speed_claim,
)

__all__ = ["Comparison", "Timing", "compare", "header", "measure", "speed_claim",
           "bench_parser", "default_device", "BenchParser", "cache_snapshot"]

QUICK_REPEATS = 2  # the fewest rounds that still give the ratio an interval


def default_device() -> str:
    """``"cuda"`` when a GPU is present, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def cache_snapshot(cache: Any) -> Any:
    """A copy of a KV or latent cache holding the same tensors in new lists (and dicts).

    A timed decode step appends to the cache it is given; handed a snapshot, it leaves the
    prefilled original as it was, so every call times the same step. No tensor is copied.
    """
    fresh = copy.copy(cache)
    for name, value in vars(cache).items():
        if isinstance(value, (list, dict)):
            setattr(fresh, name, copy.copy(value))
    return fresh


class BenchParser(argparse.ArgumentParser):
    """An argument parser that applies the tiny sizes when ``--quick`` is given."""

    quick_values: dict[str, Any]

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: Any = None) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)
        if parsed.quick:
            for name, value in {"repeats": QUICK_REPEATS, **self.quick_values}.items():
                if getattr(parsed, name) == self.get_default(name):
                    setattr(parsed, name, value)
        return parsed


def bench_parser(
    doc: str | None,
    *,
    sizes: Mapping[str, tuple[int, int]],
    threads: int | list[int] = 1,
    repeats: int = 5,
    device: bool = False,
    quick: Mapping[str, Any] | None = None,
) -> BenchParser:
    """A parser holding the options every benchmark takes; the script may add more.

    Args:
        doc: the script's ``__doc__`` (shown by ``--help``).
        sizes: ``{option: (default, quick)}`` for the script's integer sizes, by the name
            argparse stores (``d_model`` is the option ``--d-model``).
        threads: default torch CPU threads while timing; a list makes ``--threads`` take
            several counts, timed in turn.
        repeats: default interleaved rounds per comparison.
        device: add ``--device`` (default: CUDA when present, else the CPU).
        quick: tiny values for options the script adds itself (e.g. a shape or a list of
            presets), applied by ``--quick`` like the sizes.
    """
    parser = BenchParser(description=doc)
    for name, (default, _) in sizes.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    parser.quick_values = {name: tiny for name, (_, tiny) in sizes.items()} | dict(quick or {})
    if isinstance(threads, list):
        parser.add_argument("--threads", type=int, nargs="*", default=threads,
                            help="torch CPU threads while timing, one run per count")
    else:
        parser.add_argument("--threads", type=int, default=threads,
                            help="torch CPU threads while timing")
    parser.add_argument("--repeats", type=int, default=repeats, help="interleaved timing rounds")
    if device:
        parser.add_argument("--device", default=default_device())
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and few rounds: checks that the script runs")
    return parser
