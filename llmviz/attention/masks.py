"""Boolean attention masks: which keys each query may look at.

Convention (the torch one): a mask is a ``bool`` tensor where **True = MAY ATTEND** and
False = blocked. Every mask here is ``(T, S)`` (or ``(B, 1, 1, S)`` for padding) and
broadcasts against attention scores of shape ``(B, H, T, S)``.

Shape letters: B batch, T query length, S key length, H heads.

Queries are the **last** ``T`` of the ``S`` key positions: query ``i`` sits at absolute
position ``S - T + i``. This is what a KV cache produces (``T`` new tokens appended to ``S - T``
cached ones), so every mask below stays correct when ``T != S``.

Two padding conventions exist in the wild and are easy to mix up:

* Hugging Face ``attention_mask``: integer ``(B, S)``, **1 = real token (keep)**, 0 = padding.
  Convert with :func:`padding_mask`.
* PyTorch ``nn.MultiheadAttention``'s ``key_padding_mask``: bool ``(B, S)``, **True = padding**
  (ignore). Convert with :func:`key_padding_to_mask`.

Masks as composable objects (``Causal() & Padding(m)``, ``SlidingWindow(w) | Sinks(4)``,
Llama 4's ``Chunked(c)``) and the per-layer mask kinds a model uses are in
:mod:`llmviz.attention.mask_kinds`.

Sparse patterns: sliding window (Longformer, Beltagy et al. 2020; Mistral 7B, Jiang et al.
2023), dilated windows (Longformer), strided (Sparse Transformer, Child et al. 2019) and
global + local (Longformer / BigBird, Zaheer et al. 2020).
"""

from __future__ import annotations

from typing import Sequence

import torch

from .._checks import check_flags, check_positive_int

__all__ = [
    "query_positions",
    "causal_mask",
    "padding_mask",
    "key_padding_to_mask",
    "sliding_window_mask",
    "dilated_mask",
    "strided_mask",
    "global_local_mask",
    "combine_masks",
    "receptive_field",
]


def query_positions(
    T: int, S: int | None = None, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Absolute positions of the queries: the last ``T`` of ``S`` key positions.

    Query ``i`` sits at ``S - T + i``: with a KV cache, ``T`` new tokens follow ``S - T``
    cached ones. Every mask, relative-position bias and attention metric places its queries
    with this function.

    Args:
        T: number of queries (>= 0).
        S: number of keys (default ``T``); must be ``>= T``.
        device: where to build the result.

    Returns:
        ``(T,)`` long tensor ``[S - T, ..., S - 1]``.
    """
    S = T if S is None else S
    check_positive_int(T, "T", allow_zero=True)
    check_positive_int(S, "S", allow_zero=True)
    if S < T:
        raise ValueError(
            f"S ({S}) must be >= T ({T}): queries are the last T of the S key positions; "
            "pass S = cached length + T"
        )
    return torch.arange(S - T, S, device=device)  # (T,)


def _offsets(T: int, S: int | None, device) -> torch.Tensor:
    """Query-minus-key distance ``d[i, j] = (S - T + i) - j`` as a ``(T, S)`` long tensor."""
    S = T if S is None else S
    check_positive_int(T, "T")
    check_positive_int(S, "S")
    q_pos = query_positions(T, S, device=device)  # (T,); checks S >= T
    k_pos = torch.arange(S, device=device)  # (S,)
    return q_pos[:, None] - k_pos[None, :]  # (T, S)



def causal_mask(T: int, S: int | None = None, *, device=None) -> torch.Tensor:
    """Causal mask: query ``i`` (at position ``S - T + i``) may attend to keys ``0..S-T+i``.

    Args:
        T: number of queries.
        S: number of keys (default ``T``); must be ``>= T``.
        device: where to build the mask.

    Returns:
        ``(T, S)`` bool, True = may attend. With ``T == S`` it is lower-triangular.
    """
    return _offsets(T, S, device) >= 0


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Hugging Face ``attention_mask`` (``(B, S)``, 1 = keep, 0 = pad) -> ``(B, 1, 1, S)`` bool.

    The result is True where the key is a real token (may attend) and broadcasts over heads
    and queries.
    """
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(
            f"attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}"
        )
    if attention_mask.ndim != 2:
        raise ValueError(
            f"attention_mask must be (B, S), got shape {tuple(attention_mask.shape)}"
        )
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(
            f"attention_mask must hold integers or bools (1 = keep, 0 = pad), got dtype "
            f"{attention_mask.dtype}; a float additive mask belongs in bias="
        )
    # Values are checked only where reading them back is free (CPU, eager): on a GPU it would
    # stall the stream on every forward, under torch.compile it would break the graph.
    readable = attention_mask.device.type == "cpu" and not torch.compiler.is_compiling()
    if (
        readable
        and attention_mask.dtype != torch.bool
        and bool(((attention_mask != 0) & (attention_mask != 1)).any())
    ):
        raise ValueError("attention_mask must contain only 0 (pad) and 1 (keep)")
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, S)


def key_padding_to_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """PyTorch ``key_padding_mask`` (``(B, S)`` bool, **True = padding**) -> ``(B, 1, 1, S)``
    bool with True = may attend (the opposite polarity)."""
    if not isinstance(key_padding_mask, torch.Tensor):
        raise TypeError(
            f"key_padding_mask must be a torch.Tensor, got {type(key_padding_mask).__name__}"
        )
    if key_padding_mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask must be bool (True = padded), got dtype {key_padding_mask.dtype}; "
            "for a Hugging Face 0/1 attention_mask (1 = keep) use padding_mask()"
        )
    if key_padding_mask.ndim != 2:
        raise ValueError(
            f"key_padding_mask must be (B, S), got shape {tuple(key_padding_mask.shape)}"
        )
    return ~key_padding_mask[:, None, None, :]  # (B, 1, 1, S)


def sliding_window_mask(
    T: int, S: int | None = None, *, window: int, causal: bool = True, device=None
) -> torch.Tensor:
    """Each query sees the ``window`` most recent keys, itself included.

    Same rule as Hugging Face / Mistral (``q - window < k <= q``). With ``causal=False`` the
    window is symmetric: ``|q - k| < window``.

    Returns:
        ``(T, S)`` bool, True = may attend.
    """
    check_flags(causal=causal)
    check_positive_int(window, "window")
    d = _offsets(T, S, device)  # (T, S)
    if causal:
        return (d >= 0) & (d < window)
    return d.abs() < window


def dilated_mask(
    T: int,
    S: int | None = None,
    *,
    window: int,
    dilation: int,
    causal: bool = True,
    device=None,
) -> torch.Tensor:
    """Dilated sliding window (Longformer): ``window`` keys spaced ``dilation`` apart.

    Query at position ``q`` sees keys ``q, q - dilation, ..., q - (window - 1) * dilation``
    (and the mirror images when ``causal=False``). ``dilation=1`` is :func:`sliding_window_mask`.
    """
    check_flags(causal=causal)
    check_positive_int(window, "window")
    check_positive_int(dilation, "dilation")
    d = _offsets(T, S, device)  # (T, S)
    hit = (d.abs() % dilation == 0) & (d.abs() < window * dilation)
    return hit & (d >= 0) if causal else hit


def strided_mask(
    T: int, S: int | None = None, *, stride: int, causal: bool = True, device=None
) -> torch.Tensor:
    """Strided pattern of the Sparse Transformer (Child et al. 2019), both parts joined.

    A query sees the previous ``stride`` keys (local part) and every key an exact multiple of
    ``stride`` positions back (strided part). Stacking layers lets information reach any
    earlier position in two hops.
    """
    check_flags(causal=causal)
    check_positive_int(stride, "stride")
    d = _offsets(T, S, device)  # (T, S)
    hit = (d.abs() < stride) | (d.abs() % stride == 0)
    return hit & (d >= 0) if causal else hit


def global_local_mask(
    T: int,
    S: int | None = None,
    *,
    window: int | None = None,
    global_tokens: int | Sequence[int] = 1,
    causal: bool = True,
    device=None,
    local=None,
) -> torch.Tensor:
    """A local mask plus global tokens (Longformer, BigBird).

    Global tokens attend to every key and every query attends to them (subject to
    causality when ``causal=True``).

    Args:
        window: local sliding-window size, as in :func:`sliding_window_mask`.
        global_tokens: an int ``n`` (the first ``n`` positions are global) or a sequence of
            absolute positions.
        local: instead of ``window``, any local mask called as ``local(T, S, device=...)``,
            e.g. :class:`llmviz.attention.mask_kinds.Chunked` (Llama 4's chunks).
    """
    S_ = T if S is None else S
    if (window is None) == (local is None):
        raise ValueError("global_local_mask needs exactly one local part: window=... (a sliding "
                         f"window) or local=... (a mask such as Chunked(8)); got window={window!r}, "
                         f"local={local!r}")
    if local is None:
        local = sliding_window_mask(T, S, window=window, causal=causal, device=device)
    elif callable(local):
        local = local(T, S_, device=device)
    else:
        raise TypeError(f"local must be a mask callable as local(T, S, device=...), got {type(local).__name__}")
    if isinstance(global_tokens, int) and not isinstance(global_tokens, bool):
        if not 0 <= global_tokens <= S_:
            raise ValueError(f"global_tokens ({global_tokens}) must be in [0, S={S_}]")
        idx = torch.arange(global_tokens, device=device)
    else:
        if not isinstance(global_tokens, Sequence) or isinstance(global_tokens, str):
            raise TypeError(f"global_tokens must be an int or a sequence of positions, got "
                            f"{global_tokens!r}")
        idx = torch.as_tensor(list(global_tokens), dtype=torch.long, device=device)
        if idx.numel() and (idx.min() < 0 or idx.max() >= S_):
            raise ValueError(f"global token positions must lie in [0, {S_}), got {idx.tolist()}")
    is_global_key = torch.zeros(S_, dtype=torch.bool, device=device)
    is_global_key[idx] = True
    q_pos = torch.arange(S_ - T, S_, device=device)  # (T,)
    is_global_query = is_global_key[q_pos]  # (T,)
    full = causal_mask(T, S_, device=device) if causal else torch.ones_like(local)
    return local | ((is_global_key[None, :] | is_global_query[:, None]) & full)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks with broadcasting; ``None`` entries are skipped.

    Returns None when every mask is None (nothing blocked).
    """
    out = None
    for i, m in enumerate(masks):
        if m is None:
            continue
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool:
            got = m.dtype if isinstance(m, torch.Tensor) else type(m).__name__
            raise TypeError(
                f"mask {i} must be a bool tensor (True = may attend), got {got}; convert a "
                "HF 0/1 attention_mask with padding_mask()"
            )
        if out is None:
            out = m
            continue
        try:
            shape = torch.broadcast_shapes(out.shape, m.shape)
        except RuntimeError:
            raise ValueError(
                f"mask {i} of shape {tuple(m.shape)} does not broadcast with the others "
                f"{tuple(out.shape)}"
            ) from None
        out = out.expand(shape) & m
    return out


def receptive_field(mask: torch.Tensor, depth: int) -> torch.Tensor:
    """Which keys can influence each query after ``depth`` stacked layers with ``mask``.

    Args:
        mask: ``(T, T)`` bool self-attention mask (True = may attend).
        depth: number of layers (>= 1).

    Returns:
        ``(T, T)`` bool: True where position ``j`` reaches query ``i`` through some path of at
        most ``depth`` attention hops (the boolean matrix power ``mask ** depth``).
    """
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.ndim != 2 or (
        mask.shape[0] != mask.shape[1]
    ):
        raise ValueError("mask must be a square (T, T) bool tensor")
    check_positive_int(depth, "depth")
    m = mask.float()
    reach = m.clone()
    for _ in range(depth - 1):
        reach = ((reach @ m) > 0).float()  # (T, T): one more hop
    return reach > 0
