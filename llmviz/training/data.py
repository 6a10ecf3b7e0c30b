"""Data for the book's experiments: a byte tokenizer, corpora that ship with Python, batching,
and synthetic tasks.

Nothing here downloads anything. The two corpora come from the interpreter itself:

* ``"prose"``: the English help texts of CPython's ``pydoc_data.topics`` (about 465 KB), the
  ``topics`` values joined in sorted-key order;
* ``"python"``: the source of a fixed, sorted list of pure-Python standard-library modules.

Shape letters: B batch, T sequence length (positions), V vocabulary size.
Loss masks are boolean with True = THIS POSITION COUNTS in the loss.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from typing import Iterable, NamedTuple, Sequence

import torch

from .._checks import check_choice, check_positive_int, check_real, check_tensor

__all__ = [
    "ByteTokenizer",
    "CORPORA",
    "PYTHON_MODULES",
    "load_corpus",
    "train_val_split",
    "random_batches",
    "eval_windows",
    "Task",
    "copy_task",
    "associative_recall",
    "induction_task",
]

#: Names accepted by :func:`load_corpus`.
CORPORA = ("prose", "python")

#: Standard-library modules whose source makes up the ``"python"`` corpus (sorted, pure Python).
PYTHON_MODULES = (
    "abc", "argparse", "ast", "bisect", "calendar", "collections", "colorsys", "contextlib",
    "copy", "csv", "dataclasses", "datetime", "difflib", "enum", "fractions", "functools",
    "heapq", "inspect", "json", "keyword", "numbers", "operator", "pprint", "queue", "random",
    "shlex", "statistics", "string", "textwrap", "tokenize", "typing", "weakref",
)


class ByteTokenizer:
    """Byte-level tokenizer: every UTF-8 byte is one token, so the vocabulary is 256 ids.

    No merges, no unknown token: any text round-trips exactly. Decoding arbitrary ids (for example
    a model's samples that split a multi-byte character) replaces invalid UTF-8 with U+FFFD.
    """

    vocab_size: int = 256

    def encode(self, text: str, *, device: torch.device | str | None = None) -> torch.Tensor:
        """``str`` -> ``(T,)`` int64 tensor of UTF-8 byte values in ``[0, 256)``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        data = bytearray(text.encode("utf-8"))
        if not data:
            return torch.empty(0, dtype=torch.long, device=device)
        return torch.frombuffer(data, dtype=torch.uint8).to(device=device, dtype=torch.long)

    def decode(self, ids: torch.Tensor | Iterable[int]) -> str:
        """``(T,)`` ids -> ``str``; bytes that are not valid UTF-8 become U+FFFD."""
        if isinstance(ids, torch.Tensor):
            if ids.ndim != 1:
                raise ValueError(
                    f"decode takes one sequence of shape (T,), got shape {tuple(ids.shape)}; "
                    "decode each row of a batch separately"
                )
            if ids.is_floating_point():
                raise TypeError(
                    f"decode takes integer token ids, got dtype {ids.dtype}; pass ids.long() "
                    "(sampled ids already are)"
                )
            values = ids.tolist()
        else:
            values = list(ids)
            if any(isinstance(v, float) for v in values):
                raise TypeError("decode takes integer token ids, got a float; convert with int()")
        bad = [v for v in values if not 0 <= int(v) < 256]
        if bad:
            raise ValueError(f"byte ids must lie in [0, 256), got {bad[:5]}")
        return bytes(int(v) for v in values).decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=256)"


# ----------------------------------------------------------------------------- corpora
@functools.lru_cache(maxsize=8)
def _corpus(name: str, max_chars: int | None) -> str:
    if name == "prose":
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[key].strip() for key in sorted(topics))
    else:
        parts = []
        for module_name in PYTHON_MODULES:
            source = inspect.getsource(importlib.import_module(module_name))
            parts.append(f"# ---- module {module_name} ----\n{source}")
        text = "\n\n".join(parts)
    return text if max_chars is None else text[:max_chars]


def load_corpus(name: str, *, max_chars: int | None = 500_000) -> str:
    """A text corpus that ships with Python: no download, same text on every run.

    Args:
        name: ``"prose"`` (CPython's ``pydoc_data.topics`` help texts, English) or ``"python"``
            (source of the standard-library modules in :data:`PYTHON_MODULES`).
        max_chars: keep at most this many characters (``None``: everything). The prose corpus
            is about 465 K characters, so the default cap only trims ``"python"``.

    Returns:
        The text. Deterministic for a given Python version.
    """
    check_choice(name, "name", CORPORA)
    if max_chars is not None:
        check_positive_int(max_chars, "max_chars")
    return _corpus(name, max_chars)


def train_val_split(
    tokens: torch.Tensor, val_fraction: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a ``(N,)`` token stream into a training head and a validation tail (no shuffling,
    so no window straddles the two parts)."""
    check_tensor(tokens, "tokens", ndim=1)
    check_real(val_fraction, "val_fraction")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    n_val = int(round(len(tokens) * val_fraction))
    if n_val < 1 or n_val >= len(tokens):
        raise ValueError(
            f"val_fraction={val_fraction} of {len(tokens)} tokens leaves an empty part; "
            "use more tokens or another fraction"
        )
    return tokens[:-n_val], tokens[-n_val:]


def _check_stream(tokens: torch.Tensor, seq_len: int) -> None:
    check_tensor(tokens, "tokens", ndim=1)
    if tokens.dtype != torch.long:
        raise TypeError(f"tokens must be int64 (torch.long) ids, got dtype {tokens.dtype}")
    check_positive_int(seq_len, "seq_len")
    if len(tokens) < seq_len + 1:
        raise ValueError(
            f"seq_len ({seq_len}) needs at least seq_len + 1 = {seq_len + 1} tokens "
            f"(inputs plus the shifted targets), but the data has {len(tokens)}; "
            "use a shorter seq_len or more data"
        )


def random_batches(
    tokens: torch.Tensor,
    *,
    batch_size: int,
    seq_len: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of random windows for next-token prediction.

    Start offsets are drawn on the CPU from ``generator`` (so the same seed gives the same
    batches on every device), then the windows move to ``device``.

    Returns:
        ``(inputs, targets)``, both ``(B, T)`` int64; ``targets[:, t] == inputs[:, t + 1]``
        except at the last position, whose target is the token after the window.
    """
    _check_stream(tokens, seq_len)
    check_positive_int(batch_size, "batch_size")
    starts = torch.randint(0, len(tokens) - seq_len, (batch_size,), generator=generator)
    offsets = starts[:, None] + torch.arange(seq_len + 1)  # (B, T+1)
    window = tokens[offsets.to(tokens.device)]  # (B, T+1)
    window = window.to(device if device is not None else tokens.device)
    return window[:, :-1], window[:, 1:]


def eval_windows(
    tokens: torch.Tensor, *, seq_len: int, n_windows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic evaluation windows of length ``seq_len``.

    ``n_windows=None`` takes consecutive non-overlapping windows covering the data; a number
    takes that many windows with evenly spaced starts over the whole stream (they overlap when
    the data is short), so every evaluation length sees text from the same stretch of corpus.

    Returns:
        ``(inputs, targets)``, both ``(N, T)`` int64 on ``tokens``' device.
    """
    _check_stream(tokens, seq_len)
    last_start = len(tokens) - seq_len - 1
    if n_windows is None:
        starts = torch.arange(0, last_start + 1, seq_len)
    else:
        check_positive_int(n_windows, "n_windows")
        if n_windows == 1:
            starts = torch.zeros(1, dtype=torch.long)
        else:
            starts = torch.linspace(0, last_start, n_windows).round().long()
    offsets = starts[:, None] + torch.arange(seq_len + 1)  # (N, T+1)
    window = tokens[offsets.to(tokens.device)]
    return window[:, :-1], window[:, 1:]


# ----------------------------------------------------------------------------- synthetic tasks
class Task(NamedTuple):
    """A batch of a synthetic task: ``inputs``/``targets`` ``(B, T)`` int64, ``mask`` ``(B, T)``
    bool with True where the target counts (the positions the task is about)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor


def _next_token_task(full: torch.Tensor, mask: torch.Tensor, device) -> Task:
    """Next-token pairs of sequences ``full`` ``(B, T + 1)``; ``mask`` ``(B, T)`` marks targets."""
    return Task(full[:, :-1].to(device), full[:, 1:].to(device), mask.to(device))


def _check_vocab(vocab_size: int, need: int, what: str) -> None:
    check_positive_int(vocab_size, "vocab_size")
    if vocab_size < need:
        raise ValueError(f"vocab_size ({vocab_size}) must be at least {need} for {what}")


def copy_task(
    *,
    batch_size: int,
    n_tokens: int,
    vocab_size: int = 16,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Task:
    """Copy a random string after a separator: ``a b c | a b c``.

    Tokens ``0 .. vocab_size-2`` are content; ``vocab_size - 1`` is the separator. The mask marks
    the ``n_tokens`` positions whose target is a token of the second copy.
    """
    check_positive_int(batch_size, "batch_size")
    check_positive_int(n_tokens, "n_tokens")
    _check_vocab(vocab_size, 3, "the copy task (two content tokens and a separator)")
    content = torch.randint(0, vocab_size - 1, (batch_size, n_tokens), generator=generator)
    sep = torch.full((batch_size, 1), vocab_size - 1, dtype=torch.long)
    full = torch.cat([content, sep, content], dim=1)  # (B, 2n+1)
    mask = torch.zeros(batch_size, 2 * n_tokens, dtype=torch.bool)
    mask[:, n_tokens:] = True  # targets full[n+1:] = the copy
    return _next_token_task(full, mask, device)


def associative_recall(
    *,
    batch_size: int,
    n_pairs: int,
    vocab_size: int = 32,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Task:
    """Key-value pairs, then a query key: predict its value. ``k1 v1 k2 v2 ... kq -> vq``.

    Keys come from the lower half of the vocabulary (distinct within a sequence), values from the
    upper half. Only the last position (the query) counts in the mask.
    """
    check_positive_int(batch_size, "batch_size")
    check_positive_int(n_pairs, "n_pairs"), check_positive_int(vocab_size, "vocab_size")
    n_keys = vocab_size // 2
    _check_vocab(vocab_size, 2 * n_pairs, f"{n_pairs} distinct keys (keys use half the vocab)")
    keys = torch.stack(
        [torch.randperm(n_keys, generator=generator)[:n_pairs] for _ in range(batch_size)]
    )  # (B, P)
    values = n_keys + torch.randint(0, vocab_size - n_keys, (batch_size, n_pairs), generator=generator)
    pairs = torch.stack([keys, values], dim=2).reshape(batch_size, 2 * n_pairs)  # (B, 2P)
    pick = torch.randint(0, n_pairs, (batch_size,), generator=generator)
    rows = torch.arange(batch_size)
    full = torch.cat(
        [pairs, keys[rows, pick][:, None], values[rows, pick][:, None]], dim=1
    )  # (B, 2P+2)
    mask = torch.zeros(batch_size, 2 * n_pairs + 1, dtype=torch.bool)
    mask[:, -1] = True
    return _next_token_task(full, mask, device)


def induction_task(
    *,
    batch_size: int,
    seq_len: int,
    vocab_size: int = 64,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    periods: Sequence[int] | None = None,
) -> Task:
    """A random string followed by its repeat, at a fixed or a random period.

    ``periods=None`` (the default): ``x y z w | x y z w``. The repeated string has
    ``h = ceil((seq_len + 1) / 2)`` tokens; inputs and targets are the ``seq_len + 1`` tokens
    shifted by one. From input position ``h`` on, the current token already occurred ``h`` steps
    earlier, so its successor can be copied from there, and the mask marks exactly those
    positions (``t >= h``). The period never changes, so "look ``h - 1`` back" also solves it.

    ``periods`` given: each sequence draws its own period ``p`` from ``periods`` and an offset
    ``o`` uniformly from ``0 .. seq_len + 1 - 2p``. The first ``o`` tokens are noise, then a
    block of ``p`` distinct tokens repeats until the end (at least twice in full). The mask marks
    input positions ``t >= o + p``: the current token occurred ``p`` steps earlier and its
    successor there is the target. As ``p`` and ``o`` vary, no fixed offset finds the answer: the
    model has to match the current token against earlier ones (an induction head).

    Args:
        periods: allowed periods, each in ``[2, min((seq_len + 1) // 2, vocab_size)]``, drawn
            uniformly per sequence; ``None``: the fixed layout.
    """
    check_positive_int(batch_size, "batch_size"), check_positive_int(seq_len, "seq_len")
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3 for an induction task, got {seq_len}")
    _check_vocab(vocab_size, 2, "an induction task")
    if periods is None:
        half = math.ceil((seq_len + 1) / 2)
        first = torch.randint(0, vocab_size, (batch_size, half), generator=generator)
        full = torch.cat([first, first], dim=1)[:, : seq_len + 1]  # (B, T+1)
        mask = torch.zeros(batch_size, seq_len, dtype=torch.bool)
        mask[:, half:] = True  # input t = full[t - half] repeated, so target full[t+1] is known
        return _next_token_task(full, mask, device)
    choices = [int(p) for p in periods]
    if not choices:
        raise ValueError("periods is empty; pass e.g. periods=range(4, 12), or None")
    bad = [p for p in choices if not 2 <= p <= min((seq_len + 1) // 2, vocab_size)]
    if bad:
        raise ValueError(
            f"periods {bad} out of range: each must lie in [2, {min((seq_len + 1) // 2, vocab_size)}] "
            f"(two full repeats in seq_len + 1 = {seq_len + 1} tokens, distinct tokens among "
            f"vocab_size = {vocab_size}); use shorter periods or a longer seq_len"
        )
    n, table = seq_len + 1, torch.tensor(choices)
    period = table[torch.randint(0, len(choices), (batch_size,), generator=generator)]  # (B,)
    offset = (torch.rand(batch_size, generator=generator) * (n - 2 * period + 1)).long()  # (B,)
    noise = torch.randint(0, vocab_size, (batch_size, n), generator=generator)  # (B, T+1)
    block = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=1)  # (B, V)
    pos = torch.arange(n)[None, :]  # (1, T+1)
    in_block = (pos - offset[:, None]).clamp_min(0) % period[:, None]  # (B, T+1)
    full = torch.where(pos >= offset[:, None], block.gather(1, in_block), noise)  # (B, T+1)
    mask = torch.arange(seq_len)[None, :] >= (offset + period)[:, None]  # (B, T)
    return _next_token_task(full, mask, device)
