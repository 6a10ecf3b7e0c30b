"""What attention costs: score-matrix memory, arithmetic intensity, measured peak memory.

Shape letters: B batch, H query heads, G kv heads, T queries, S keys, D head dim.

* :func:`score_matrix_bytes`: the ``(B, H, T, S)`` matrix a naive implementation materialises:
  memory quadratic in the sequence length.
* :func:`attention_intensity`: FLOPs of ``softmax(q k^T) v`` against the bytes it must move
  (q, k, v in, output out), i.e. its arithmetic intensity. Prefill/training (``T = S``) does
  ``O(T)`` FLOPs per byte; a decoding step (``T = 1``) about one FLOP per byte with MHA, and
  ``H / G`` times more when kv heads are shared. Compare with a device's FLOP/s divided by its
  bytes/s (the roofline model of Williams et al. 2009; applied to inference by Pope et al. 2023).
* :func:`peak_memory`: peak bytes allocated while a function runs: the CUDA allocator's
  statistics on a GPU, and on the CPU the storage of every tensor created by a PyTorch
  operator, tracked at the dispatcher (buffers a fused kernel allocates internally are not
  seen there).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .._checks import check_positive_int

__all__ = ["score_matrix_bytes", "attention_intensity", "peak_memory"]


def _positive_ints(**values: Any) -> None:
    for name, v in values.items():
        check_positive_int(v, name)


def score_matrix_bytes(
    *, batch: int, n_heads: int, q_len: int, kv_len: int | None = None, bytes_per_el: int = 4
) -> int:
    """Bytes of one ``(B, H, T, S)`` score (or weight) matrix."""
    kv_len = q_len if kv_len is None else kv_len
    _positive_ints(batch=batch, n_heads=n_heads, q_len=q_len, kv_len=kv_len, bytes_per_el=bytes_per_el)
    return batch * n_heads * q_len * kv_len * bytes_per_el


def attention_intensity(
    *,
    batch: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    q_len: int,
    kv_len: int,
    bytes_per_el: int = 2,
) -> dict[str, float]:
    """FLOPs, bytes moved and their ratio for one attention call (fused, weights never stored).

    FLOPs ``= 4 B H T S D`` (``q k^T`` and ``p v``, a multiply-add counted as 2); bytes
    ``= (B H T D [q] + 2 B G S D [k, v] + B H T D [out]) * bytes_per_el``.

    Returns:
        ``{"flops": ..., "bytes": ..., "intensity": flops / bytes}``.
    """
    _positive_ints(batch=batch, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
                   q_len=q_len, kv_len=kv_len, bytes_per_el=bytes_per_el)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
    flops = 4.0 * batch * n_heads * q_len * kv_len * head_dim
    elements = 2 * batch * n_heads * q_len * head_dim + 2 * batch * n_kv_heads * kv_len * head_dim
    moved = float(elements * bytes_per_el)
    return {"flops": flops, "bytes": moved, "intensity": flops / moved}


class _AllocationTracker(TorchDispatchMode):
    """Adds up the storage of tensors created by operators; subtracts it when it is freed."""

    def __init__(self, exclude: set[int]) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen = set(exclude)

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self._seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for t in tree_leaves((args, kwargs)):  # storage that existed before is not ours
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage().data_ptr()
                if key not in self._seen:
                    self._seen.add(key)
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or key in self._seen:  # a view, or an input's storage
                continue
            self._seen.add(key)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            # the storage object outlives every view of it: free when the memory really goes
            weakref.finalize(storage, self._free, key, nbytes)
        return out


def peak_memory(fn: Callable[[], Any], *, device: torch.device | str | None = None) -> int:
    """Peak bytes allocated while ``fn()`` runs, beyond what existed before (inputs excluded).

    On CUDA: ``torch.cuda.max_memory_allocated`` around the call. Elsewhere: dispatcher-level
    tracking of tensors created by the call (see the module docstring for what it misses).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    dev = torch.device(device) if device is not None else None
    if dev is not None and dev.type == "cuda":
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        result = fn()
        torch.cuda.synchronize(dev)
        peak = torch.cuda.max_memory_allocated(dev) - before
        del result
        return int(peak)
    tracker = _AllocationTracker(exclude=set())
    with tracker:
        result = fn()
    del result
    return int(tracker.peak)
