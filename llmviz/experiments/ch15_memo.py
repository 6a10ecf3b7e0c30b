"""Chapter 15's memorisation test, run on the model the chapter's verdicts rest on.

The live page trains the small Llama for a few hundred steps; :data:`MEMO` (``ch15_memo``) trains the recipe of ``ch15_llama``'s record
(:func:`llmviz.experiments.ch15.train_llama` at the same size, the same seeds) and then runs the
extraction test of Carlini et al. on it (:func:`copies`): greedy continuations of prefixes taken
from the training text, each scored by its longest verbatim stretch of the training text, beside
the same measurement for held-out text (:func:`chance`: the overlap text the model never saw
has with the training text, chance repetitions plus the passages the help texts repeat across
topics). Its held-out loss is recorded too, as a description of the model tested. What makes a
"no copying" verdict mean something is the page's positive control (a copy trained on a few KB,
which copies its text while losing to uniform guessing on held-out text), not a loss below a
count table.

Runs of spaces, table borders and rules recur all over the help texts, so every such run is
collapsed to one space (:func:`content`) in the model's text and in the training text alike.

Everything is built on :func:`llmviz.device`; nothing runs at import.
"""

from __future__ import annotations

import re

import torch

from ..analysis import longest_verbatim_match
from ..evidence import Experiment
from ..model import generate
from ..training.data import ByteTokenizer
from . import ch15

__all__ = ["MEMO", "SIZES", "LAYOUT", "THRESHOLD", "content", "copies", "chance", "memo_run"]

#: layout that recurs in the help texts: a match made of it says nothing about memorisation
LAYOUT = re.compile(r"\s*[-=+|*]{3,}[-=+|*\s]*|\s{2,}")
#: bytes: a continuation that copies this much of its training text verbatim counts as memorised
THRESHOLD = 100
_TEST = dict(n_prefix=24, n_cont=128)
#: ``long`` is the chapter's model (width 64, 3 layers) trained for 1600 steps, plus 16 probes
#: per seed (``ch15_llama``'s long record has since moved to a larger model: this test was not
#: re-run on it); ``cpu`` a short smoke size
SIZES = {
    "cpu": dict(ch15.SIZES["cpu"], **_TEST, n_probe=4),
    "long": dict(ch15.SIZES["cpu"], steps=1600, curve_every=100, **_TEST, n_probe=16),
}


def content(text: str) -> str:
    """``text`` with every run of layout (:data:`LAYOUT`) collapsed to one space."""
    return LAYOUT.sub(" ", text)


def _starts(length: int, n: int, seed: int) -> list[int]:
    if length <= 0:
        raise ValueError(f"the text is too short for a probe of this length (room {length}); "
                         "pass a longer text or a shorter prefix and continuation")
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, length, (n,), generator=g).tolist()


def copies(model, tokens: torch.Tensor, corpus: str, seed: int, *, n_probe: int,
           n_prefix: int = 24, n_cont: int = 128) -> list[int]:
    """The extraction test: for ``n_probe`` prefixes of ``n_prefix`` bytes drawn from ``tokens``
    (seeded by ``seed``), the longest verbatim stretch of ``corpus`` (already passed through
    :func:`content`) in the model's greedy ``n_cont``-byte continuation, in bytes."""
    tok = ByteTokenizer()
    device = next(model.parameters()).device
    out = []
    for s in _starts(len(tokens) - n_prefix - n_cont, n_probe, seed):
        ids = generate(model, tokens[s: s + n_prefix][None].to(device), max_new_tokens=n_cont,
                       temperature=0, context="window")
        out.append(longest_verbatim_match(content(tok.decode(ids[0, n_prefix:].cpu())), corpus)[0])
    return out


def chance(text: str, corpus: str, seed: int, *, n_probe: int, n_cont: int = 128) -> list[int]:
    """The same measurement for ``n_probe`` stretches of ``n_cont`` bytes of held-out ``text``
    the model never saw (drawn with seed ``10_000 + seed``): its overlap with the training text
    without any memorising (chance repetitions and passages the corpus repeats)."""
    return [longest_verbatim_match(content(text[s: s + n_cont]), corpus)[0]
            for s in _starts(len(text) - n_cont, n_probe, 10_000 + seed)]


def memo_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One seed: ``curve`` and ``val_loss`` as ``ch15_llama`` records them, then (unless
    ``prefix`` cuts the run short) ``copies`` and ``chance`` per probe and their maxima
    ``copied`` and ``chance_max``, in bytes."""
    if variant != "llama":
        raise ValueError(f"unknown variant {variant!r}; ch15_memo has one variant, 'llama'")
    model, _, curve = ch15.train_llama(seed, p, prefix)
    out = {"curve": curve, "val_loss": curve[-1]}
    if prefix is not None:
        return out
    tok = ByteTokenizer()
    train_tokens, val_tokens = ch15.data()
    corpus = content(tok.decode(train_tokens))
    model.eval()
    copied = copies(model, train_tokens, corpus, seed, n_probe=p["n_probe"],
                    n_prefix=p["n_prefix"], n_cont=p["n_cont"])
    by_chance = chance(tok.decode(val_tokens), corpus, seed, n_probe=p["n_probe"], n_cont=p["n_cont"])
    return {**out, "copies": [float(c) for c in copied], "chance": [float(c) for c in by_chance],
            "copied": float(max(copied)), "chance_max": float(max(by_chance))}


MEMO = Experiment("ch15_memo", memo_run, variants=["llama"], seeds=[0, 1, 2], sizes=SIZES,
                  prefix=100, description="chapter 15: the extraction test on the small Llama "
                                          "trained by ch15_llama's record recipe")
