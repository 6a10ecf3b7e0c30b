"""Side-by-side timing: our implementation against a peer, same inputs, interleaved runs.

Each measurement is the median of ``repeats`` runs of ``torch.utils.benchmark.Timer``
(which warms up, synchronises CUDA and picks the number of loops). The two sides are timed
alternately so drift on a shared machine hits both.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils.benchmark as tb


@dataclass
class Comparison:
    name: str
    ours_s: float
    peer_s: float
    peer_name: str

    @property
    def ratio(self) -> float:
        return self.ours_s / self.peer_s

    def __str__(self) -> str:
        return (
            f"{self.name:<44} ours {self.ours_s * 1e3:9.3f} ms   {self.peer_name} "
            f"{self.peer_s * 1e3:9.3f} ms   ratio {self.ratio:5.2f}"
        )


def _median_once(fn: Callable[[], object]) -> float:
    return tb.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=0.2).median


def compare(
    name: str,
    ours: Callable[[], object],
    peer: Callable[[], object],
    *,
    peer_name: str = "peer",
    repeats: int = 7,
    warmup: int = 3,
) -> Comparison:
    """Median time of ``ours`` and of ``peer`` over ``repeats`` interleaved measurements."""
    with torch.inference_mode():
        for _ in range(warmup):
            ours()
            peer()
        a, b = [], []
        for _ in range(repeats):
            a.append(_median_once(ours))
            b.append(_median_once(peer))
    return Comparison(name, statistics.median(a), statistics.median(b), peer_name)


def header(title: str) -> str:
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return (
        f"# {title}\n# device: {dev}; torch {torch.__version__}; threads "
        f"{torch.get_num_threads()}"
    )
