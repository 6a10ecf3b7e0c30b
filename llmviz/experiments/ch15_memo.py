"""Chapter 15's memorisation test, run on the model the chapter's verdicts rest on.

The live page trains the small Llama for a few hundred steps; :data:`MEMO` (``ch15_memo``) trains the recipe of ``ch15_llama``'s record
(:func:`llmviz.experiments.ch15.train_llama` at the same size, the same seeds) and then runs the
prefix-based extraction test of Carlini et al. on it (:func:`extract`): the model is prompted with
a prefix taken from the training text, and its greedy continuation is scored by how many of its
first bytes equal the passage's true continuation (``suffix``). The same test on prefixes of
held-out text, scored against their own true continuation (:func:`unseen`), is its negative
control. Each continuation's longest verbatim stretch found *anywhere* in the training text
(``copies``) is kept as a description, beside the same measurement for held-out text
(:func:`chance`: the overlap text the model never saw has with the training text, chance
repetitions plus the passages the help texts repeat across topics); it is not Carlini et al.'s
test and it fires on unseen text too. Its held-out loss is recorded too, as a description of the
model tested. What makes a
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

__all__ = ["MEMO", "SIZES", "LAYOUT", "THRESHOLD", "content", "suffix_length", "extract", "copies",
           "unseen", "chance", "memo_run"]

#: layout that recurs in the help texts: a match made of it says nothing about memorisation
LAYOUT = re.compile(r"\s*[-=+|*]{3,}[-=+|*\s]*|\s{2,}")
#: bytes: a continuation that reproduces this much of its passage's true continuation counts as
#: memorised
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


def suffix_length(continuation, true) -> int:
    """How many leading bytes of ``continuation`` equal ``true`` (the exact-match length)."""
    n = 0
    for a, b in zip(continuation.tolist(), true.tolist()):
        if a != b:
            break
        n += 1
    return n


def extract(model, tokens: torch.Tensor, corpus: str | None, seed: int, *, n_probe: int,
            n_prefix: int = 24, n_cont: int = 128, starts_seed: int | None = None) -> dict:
    """The extraction test: for ``n_probe`` prefixes of ``n_prefix`` bytes drawn from ``tokens``
    (start positions seeded by ``starts_seed``, by default ``seed``), the model's greedy
    ``n_cont``-byte continuation, scored two ways, in bytes per probe: ``suffix``, how many of
    its first bytes equal the true continuation in ``tokens`` (Carlini et al.'s test), and
    ``anywhere``, its longest verbatim stretch found anywhere in ``corpus`` (already passed
    through :func:`content`), a description only (left empty where ``corpus`` is None)."""
    tok = ByteTokenizer()
    device = next(model.parameters()).device
    out = {"suffix": [], "anywhere": []}
    for s in _starts(len(tokens) - n_prefix - n_cont, n_probe, seed if starts_seed is None else starts_seed):
        ids = generate(model, tokens[s: s + n_prefix][None].to(device), max_new_tokens=n_cont,
                       temperature=0, context="window")
        cont = ids[0, n_prefix:].cpu()
        out["suffix"].append(suffix_length(cont, tokens[s + n_prefix: s + n_prefix + n_cont]))
        if corpus is not None:
            out["anywhere"].append(longest_verbatim_match(content(tok.decode(cont)), corpus)[0])
    return out


def copies(model, tokens: torch.Tensor, corpus: str, seed: int, *, n_probe: int,
           n_prefix: int = 24, n_cont: int = 128) -> list[int]:
    """The ``anywhere`` score of :func:`extract`: per probe, the longest verbatim stretch of
    ``corpus`` in the model's greedy continuation, in bytes."""
    return extract(model, tokens, corpus, seed, n_probe=n_probe, n_prefix=n_prefix, n_cont=n_cont)["anywhere"]


def unseen(model, tokens: torch.Tensor, seed: int, *, n_probe: int, n_prefix: int = 24,
           n_cont: int = 128) -> list[int]:
    """The negative control of the ``suffix`` score: the same test on prefixes of held-out
    ``tokens`` (start positions seeded by ``10_000 + seed``), each scored against its own true
    continuation, which the model never saw, in bytes."""
    return extract(model, tokens, None, seed, n_probe=n_probe, n_prefix=n_prefix, n_cont=n_cont,
                   starts_seed=10_000 + seed)["suffix"]


def chance(text: str, corpus: str, seed: int, *, n_probe: int, n_cont: int = 128) -> list[int]:
    """The same measurement for ``n_probe`` stretches of ``n_cont`` bytes of held-out ``text``
    the model never saw (drawn with seed ``10_000 + seed``): its overlap with the training text
    without any memorising (chance repetitions and passages the corpus repeats)."""
    return [longest_verbatim_match(content(text[s: s + n_cont]), corpus)[0]
            for s in _starts(len(text) - n_cont, n_probe, 10_000 + seed)]


def memo_run(variant: str, seed: int, *, prefix: int | None = None, **p) -> dict:
    """One seed: ``curve`` and ``val_loss`` as ``ch15_llama`` records them, then (unless
    ``prefix`` cuts the run short), per probe and their maxima, in bytes: ``suffix`` and
    ``suffix_max`` (true-continuation match on training prefixes), ``unseen`` and ``unseen_max``
    (the same on held-out prefixes), ``copies`` and ``copied`` (longest stretch anywhere in the
    training text) and ``chance`` and ``chance_max`` (the same for held-out text)."""
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
    test = extract(model, train_tokens, corpus, seed, n_probe=p["n_probe"],
                   n_prefix=p["n_prefix"], n_cont=p["n_cont"])
    held = unseen(model, val_tokens, seed, n_probe=p["n_probe"], n_prefix=p["n_prefix"], n_cont=p["n_cont"])
    by_chance = chance(tok.decode(val_tokens), corpus, seed, n_probe=p["n_probe"], n_cont=p["n_cont"])
    copied = test["anywhere"]
    return {**out, "suffix": [float(c) for c in test["suffix"]], "suffix_max": float(max(test["suffix"])),
            "unseen": [float(c) for c in held], "unseen_max": float(max(held)),
            "copies": [float(c) for c in copied], "chance": [float(c) for c in by_chance],
            "copied": float(max(copied)), "chance_max": float(max(by_chance))}


MEMO = Experiment("ch15_memo", memo_run, variants=["llama"], seeds=[0, 1, 2], sizes=SIZES,
                  prefix=100, description="chapter 15: the extraction test on the small Llama "
                                          "trained by ch15_llama's record recipe")
