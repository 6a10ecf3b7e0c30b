"""Which operators a call really runs: a fused kernel, or a composite of several.

A library call such as ``F.rms_norm`` may be one fused kernel on one device and a chain of
elementwise operators on another. :func:`compute_ops` asks torch's profiler: it runs the call
once and returns the aten operators that do arithmetic (the leaves of the profiler's call tree,
with allocation, view and dtype bookkeeping left out), in the order they ran.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["compute_ops", "BOOKKEEPING"]

#: aten operators that allocate, view or convert without arithmetic of their own
BOOKKEEPING = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::view", "aten::detach",
    "aten::to", "aten::_to_copy", "aten::result_type", "aten::fill_", "aten::copy_",
    "aten::zero_", "aten::expand", "aten::as_strided", "aten::reshape", "aten::lift_fresh",
    "aten::zeros", "aten::ones_like", "aten::resolve_conj", "aten::resolve_neg",
    "aten::_unsafe_view", "aten::t", "aten::transpose", "aten::unsqueeze", "aten::squeeze",
})


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's C++ start/stop lines) for the block."""
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (an embedded interpreter): nothing to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(null)
        os.close(saved)


def compute_ops(fn: Callable[[], Any], *, cuda: bool | None = None) -> list[str]:
    """The arithmetic operators ``fn()`` runs, without the ``aten::`` prefix, in order.

    Args:
        fn: a call with no arguments (e.g. ``lambda: F.rms_norm(x, (D,), w)``).
        cuda: also record CUDA activity; by default when CUDA is available.

    Returns:
        One name per operator call, e.g. ``["native_layer_norm"]`` for a fused LayerNorm or
        ``["pow", "sum", ...]`` for a composite; a composite operator whose children do the
        arithmetic is not listed itself.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a callable with no arguments, got {type(fn).__name__}; "
                        "wrap the call in a lambda")
    if cuda is None:
        cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with _quiet_stderr(), profile(activities=activities) as prof:
        fn()

    def counts(e: Any) -> bool:
        return e.name.startswith("aten::") and e.name not in BOOKKEEPING

    def has_compute_child(e: Any) -> bool:
        return any(counts(c) or has_compute_child(c) for c in e.cpu_children)

    return [e.name.removeprefix("aten::") for e in prof.events()
            if counts(e) and not has_compute_child(e)]
