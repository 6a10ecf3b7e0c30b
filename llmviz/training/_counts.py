"""What both byte n-gram models share: a token stream read into int64, the integer key of every
run of tokens (a context of ``c`` tokens is the base-V number its tokens spell), and a lookup of
values by sorted key."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._checks import check_tensor

MAX_KEY_BITS = 62  # keys are int64: V**order must stay below 2**62


def as_stream(tokens: Any, vocab_size: int, name: str) -> np.ndarray:
    """``tokens`` (1-D int tensor, numpy array, bytes or list of ints) as an int64 numpy array."""
    if isinstance(tokens, (bytes, bytearray)):
        arr = np.frombuffer(bytes(tokens), dtype=np.uint8).astype(np.int64)
    elif isinstance(tokens, torch.Tensor):
        check_tensor(tokens, name, ndim=1)
        if tokens.is_floating_point() or tokens.dtype == torch.bool or tokens.is_complex():
            raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
        arr = tokens.detach().cpu().numpy().astype(np.int64)
    elif isinstance(tokens, (np.ndarray, list, tuple)):
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be 1-D (a token stream), got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must hold integer token ids, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
    else:
        raise TypeError(
            f"{name} must be a 1-D integer tensor, numpy array, list or bytes, got "
            f"{type(tokens).__name__}"
        )
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
        raise ValueError(
            f"{name} holds token id {bad}, outside [0, {vocab_size}); pass ids of a vocabulary "
            f"of vocab_size={vocab_size} (or raise vocab_size)"
        )
    return arr


def gram_keys(stream: np.ndarray, length: int, vocab_size: int) -> np.ndarray:
    """Key of every window of ``length`` tokens: ``out[i]`` encodes ``stream[i : i + length]``."""
    n = len(stream) - length + 1
    key = np.zeros(max(n, 0), dtype=np.int64)
    for k in range(length):
        key = key * vocab_size + stream[k : k + n]
    return key


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` keys (0 where a key is absent); ``keys`` sorted."""
    if keys.size == 0:
        return np.zeros(query.shape, dtype=values.dtype)
    idx = np.searchsorted(keys, query).clip(max=len(keys) - 1)
    found = keys[idx] == query
    return np.where(found, values[idx], 0)
