"""Training: data (byte tokenizer, corpora that ship with Python, synthetic tasks) and the loop.

* :mod:`.data`: :class:`ByteTokenizer`, :func:`load_corpus`, batch samplers, synthetic tasks.
* :mod:`.loop`: :func:`train` (AdamW, warm-up + cosine) and length evaluation.
"""

from __future__ import annotations

from . import data, loop
from .data import ByteTokenizer, load_corpus
from .loop import History, TrainConfig, evaluate_lengths, train

__all__ = [
    "ByteTokenizer", "load_corpus", "TrainConfig", "History", "train", "evaluate_lengths", "data", "loop",
]
