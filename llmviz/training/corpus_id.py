"""Which text the corpora are, on this Python: a digest, and a note where it is not the book's.

:func:`llmviz.training.data.load_corpus` reads text that ships with Python (CPython's help
texts, standard-library source). That text changes between Python versions: on Python 3.12 the
prose corpus is about 7% longer than on 3.11, and its byte n-gram baselines move. The book's
recorded runs were made on Python 3.11's corpora, so a chapter run on another Python computes its
live numbers (n-gram baselines among them) on other text than its records. :func:`corpus_note`
says so where that is the case; :func:`llmviz.setup_notebook` shows it under a chapter's first
cell, and ``python -m llmviz.evidence.records check`` prints it.
"""

from __future__ import annotations

import functools
import hashlib
import platform

from .._checks import check_choice
from .data import CORPORA, load_corpus

__all__ = ["corpus_digest", "corpus_digests", "corpus_note", "BOOK_CORPORA"]

#: ``name -> (digest, Python version)`` of the corpora the book's recorded runs were made on
BOOK_CORPORA = {"prose": ("d9dc35bce5ab1a24", "3.11"), "python": ("6838b052e469df81", "3.11")}


def corpus_digest(name: str) -> str:
    """The first 16 hex digits of the SHA-256 of ``load_corpus(name)`` (UTF-8), on this Python."""
    check_choice(name, "name", CORPORA)
    return hashlib.sha256(load_corpus(name).encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def corpus_digests() -> dict[str, str]:
    """``corpus name -> corpus_digest(name)`` for every corpus, on this Python: the text a run made
    here trains on (a record stores it in ``meta.corpus``)."""
    return {name: corpus_digest(name) for name in CORPORA}


def corpus_note(name: str = "prose") -> str | None:
    """None where this Python builds the ``name`` corpus the book's records were made on; else a
    sentence saying that it differs and what that changes."""
    check_choice(name, "name", CORPORA)
    digest, version = BOOK_CORPORA[name]
    here = corpus_digest(name)
    if here == digest:
        return None
    return (f"Note: this Python ({platform.python_version()}) builds a different '{name}' corpus "
            f"(digest {here}) from the one the book's recorded runs were made on (Python {version}, "
            f"digest {digest}). Numbers computed live here, n-gram baselines among them, are on "
            "other text than the records', so a record read beside a live number (a gate, an "
            "agreement line) compares different data. Run on Python "
            f"{version} to reproduce the book's pages exactly.")
