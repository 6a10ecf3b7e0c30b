"""The benchmarks' timing helper is the library's own: see :mod:`llmviz.training.bench`.

Kept so ``from benchmarks._harness import compare, header`` keeps working; new scripts import
from ``llmviz.training.bench``.
"""

from llmviz.training.bench import (
    Comparison,
    Timing,
    compare,
    header,
    measure,
    speed_claim,
)

__all__ = ["Comparison", "Timing", "compare", "header", "measure", "speed_claim"]
