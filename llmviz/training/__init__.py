"""Training: data, batch sources, losses, the loop, evaluation at several lengths, timing.

* :mod:`.data`: :class:`ByteTokenizer`, :func:`load_corpus`, batch samplers, synthetic tasks.
* :mod:`.batches`: what :func:`train` reads: a token stream, a function of a seeded generator,
  or an iterable of ``(inputs, targets[, mask])`` batches.
* :mod:`.losses`: masked cross-entropy and PaLM's z-loss (the one definition the model uses too).
* :mod:`.config`: :class:`TrainConfig` and the learning-rate schedule.
* :mod:`.loop`: :func:`train` (AdamW, warm-up + cosine, extra loss terms, metric callbacks).
* :mod:`.evaluation`: :func:`evaluate_lengths`, next-token loss at several window lengths.
* :mod:`.bench`: timing ours against a peer (warm-up, interleaved rounds, ratio interval).
"""

from __future__ import annotations

from . import batches, bench, data, evaluation, loop, losses
from .batches import Batch
from .bench import Comparison, Timing, compare, measure, speed_claim
from .config import TrainConfig, lr_at
from .data import ByteTokenizer, load_corpus
from .evaluation import LengthEval, evaluate_lengths
from .loop import History, train
from .losses import masked_cross_entropy, z_loss, z_loss_term

__all__ = [
    "ByteTokenizer", "load_corpus", "Batch", "TrainConfig", "lr_at", "History", "train",
    "LengthEval", "evaluate_lengths", "compare", "measure", "speed_claim", "Comparison", "Timing", "masked_cross_entropy", "z_loss", "z_loss_term",
    "batches", "bench", "data", "evaluation", "loop", "losses",
]
