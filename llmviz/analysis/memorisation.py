"""A memorisation check: the longest stretch of a generated text found verbatim in the corpus."""

from __future__ import annotations

__all__ = ["longest_verbatim_match"]


def longest_verbatim_match(text: str, corpus: str, *, min_len: int = 1) -> tuple[int, str]:
    """The longest substring of ``text`` that occurs verbatim in ``corpus``: ``(length, substring)``.

    A memorisation check for generated samples: compare the lengths for samples with those for
    held-out text of the same length (chance overlap of ordinary language), see Carlini et al.
    2021. Greedy scan: for each start it only tries to beat the best length so far, so the cost
    is about ``len(text)`` substring searches of ``corpus``.
    """
    if not isinstance(text, str) or not isinstance(corpus, str):
        raise TypeError("text and corpus must both be str")
    best, where = 0, 0
    for i in range(len(text)):
        j = i + best + 1
        while j <= len(text) and text[i:j] in corpus:
            best, where = j - i, i
            j += 1
    if best < min_len:
        return 0, ""
    return best, text[where : where + best]
