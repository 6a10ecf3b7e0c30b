"""Generation: extend a prompt token by token, with or without the KV cache.

The prompt runs once; then each step feeds only the newest token through the cache (O(S) per
step instead of re-running the prefix). Sampling rules live in :mod:`llmviz.model.sampling`.
What happens when the sequence outgrows the model's ``max_seq_len`` is chosen with
``context=`` (:data:`CONTEXTS`): run on past it, refuse, or keep a rolling window.

Shape letters: B batch, T prompt length, V vocabulary.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .._checks import check_choice, check_flags, check_positive_int, check_tensor
from ..attention.kv_cache import KVCache
from .sampling import sample

__all__ = ["generate", "CONTEXTS"]

# What generate() does once prompt + new tokens pass the model's max_seq_len (see its docstring).
CONTEXTS = ("extend", "error", "window")


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    sampler: Callable[[torch.Tensor], torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    attention_mask: torch.Tensor | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    context: str = "extend",
) -> torch.Tensor:
    """Extend ``input_ids`` ``(B, T)`` by ``max_new_tokens`` tokens; returns ``(B, T + new)``.

    **Batches of prompts of different lengths** are left-padded, with ``attention_mask``
    (Hugging Face convention, ``(B, T)``, 1 = real token, 0 = padding; padding first). Each row
    then gets its own positions (``cumsum(attention_mask) - 1``, so its first real token is at
    position 0), padding is never attended to, and greedy decoding gives each row exactly the
    tokens its prompt gives alone (tested for MHA/GQA, sliding window, ALiBi, learned positions
    and every RoPE scaling). Relative structures (sliding window, ALiBi) are built over indices,
    which equal position differences between the real tokens of a left-padded row.

    With ``eos_token_id`` a row stops when it emits it: later tokens of that row are
    ``pad_token_id`` (default: ``eos_token_id``), and generation ends early once every row has
    stopped, so the result may be shorter than ``T + max_new_tokens``.

    Dynamic NTK scaling is the one exception to "cache equals full forward": its frequencies
    depend on the length reached, so once the sequence passes the trained length, keys already
    in the cache keep the rotation of the length at which they were computed, while a full
    forward re-rotates every key. Hugging Face behaves the same way. In a padded batch the
    length is that of the longest row, so shorter rows may also differ from their run alone
    past the trained length.

    **Past max_seq_len** (``L = model.config.max_seq_len``), ``context`` decides:

    * ``"extend"`` (default): the model runs on the whole sequence, past ``L`` where its
      positions allow it (sinusoidal, RoPE, ALiBi, T5 buckets and no positions extrapolate;
      whether the text stays good is the model's affair). A learned position table has only
      ``L`` rows, so there a request longer than ``L`` raises ``ValueError`` up front.
    * ``"error"``: any request with prompt + ``max_new_tokens`` over ``L`` raises
      ``ValueError`` up front, whatever the positions.
    * ``"window"``: a rolling window. Every next token is predicted from the last ``L``
      tokens only, exactly as running the model on ``out[:, -L:]`` alone (positions from 0
      again; in a padded batch, the last ``L`` slots with their mask). A prompt longer than
      ``L`` is cut to its last ``L`` tokens the same way; the full output is still returned.
      Up to ``L`` tokens the cache works as usual; once the window slides, cached keys sit at
      positions the window no longer gives them, so each further step re-runs the ``L``
      tokens of the window (O(L^2) per step) and the cache is dropped.

    With ``use_cache`` the prompt is run once and then one token per step through the KV cache
    (each step costs O(S) instead of re-running the whole prefix); without it every step
    re-runs the full sequence. Both give the same tokens (tested).

    Args:
        model: a :class:`DecoderLM` (anything whose forward takes ``cache=`` and returns .logits).
        input_ids: the prompt.
        max_new_tokens: number of tokens to add (>= 0).
        temperature, top_k, top_p, min_p: see :func:`llmviz.model.sampling.sample`;
            ``temperature=0`` is greedy.
        sampler: optional ``logits (B, V) -> ids (B,)`` replacing the built-in sampling.
        generator: a seeded ``torch.Generator`` for reproducible draws.
        use_cache: decode with a KV cache.
        attention_mask: ``(B, T)`` 1 = real token, 0 = left padding; None = no padding.
        eos_token_id: a row stops after emitting this id.
        pad_token_id: written after a row stopped (default ``eos_token_id``).
        context: ``"extend"``, ``"error"`` or ``"window"``: what happens past
            ``max_seq_len`` (above). ``"error"`` and ``"window"`` need ``model.config.max_seq_len``.
    """
    check_flags(use_cache=use_cache)
    check_tensor(input_ids, "input_ids", ndim=2)
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise TypeError(
            f"input_ids must be integer token ids, got dtype {input_ids.dtype}; pass "
            "input_ids.long()"
        )
    if input_ids.dtype not in (torch.long, torch.int32):
        input_ids = input_ids.long()  # uint8/int8/int16 ids: new tokens may not fit their dtype
    if input_ids.shape[1] == 0:
        raise ValueError(
            f"the prompt is empty (input_ids has shape {tuple(input_ids.shape)}); give at least "
            "one token, e.g. a beginning-of-sequence id"
        )
    check_positive_int(max_new_tokens, "max_new_tokens", allow_zero=True)
    check_choice(context, "context", CONTEXTS)
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    uses_table = getattr(getattr(model, "config", None), "position", None) == "learned"
    if context != "extend" and limit is None:
        raise ValueError(
            f"context={context!r} needs the model's length limit (model.config.max_seq_len), "
            f"which {type(model).__name__} does not have; use context='extend'"
        )
    if (context == "error" or (context == "extend" and uses_table)) and (
        input_ids.shape[1] + max_new_tokens > limit
    ):
        raise ValueError(
            f"prompt ({input_ids.shape[1]}) + max_new_tokens ({max_new_tokens}) exceeds "
            f"max_seq_len ({limit})" + (" of the learned position table" if uses_table else "")
            + f"; ask for fewer tokens, or pass context='window' to predict each token from "
            f"the last {limit} only"
        )

    if attention_mask is not None:
        attention_mask = _check_left_padded(attention_mask, input_ids)
    if pad_token_id is None:
        pad_token_id = eos_token_id
    for name, value in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
        if value is not None:
            check_positive_int(value, name, allow_zero=True)

    def pick(logits: torch.Tensor) -> torch.Tensor:
        if sampler is not None:
            ids = sampler(logits)
            if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.shape != logits.shape[:1]:
                got = (f"{ids.dtype} {tuple(ids.shape)}" if isinstance(ids, torch.Tensor)
                       else type(ids).__name__)
                raise TypeError(
                    f"sampler must return (B,) = {tuple(logits.shape[:1])} integer token ids, "
                    f"got {got}; e.g. return torch.multinomial(probs, 1)[:, 0]"
                )
            return ids
        return sample(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                      generator=generator)

    was_training = model.training
    model.eval()
    try:
        out = input_ids
        cache = KVCache() if use_cache else None
        step_input = input_ids
        mask = attention_mask  # (B, S) over everything so far, or None
        positions = None if mask is None else (mask.cumsum(-1) - 1).clamp_min(0)  # (B, T)
        step_positions = positions
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(max_new_tokens):
            kw = {} if mask is None else {"attention_mask": mask, "positions": step_positions}
            if context == "window" and out.shape[1] > limit:
                # the window slides: the model sees the last `limit` tokens alone, positions
                # from 0; cached keys were computed at other positions, so run without them
                cache = None
                if mask is not None:
                    window = mask[:, -limit:]  # (B, L)
                    kw = {"attention_mask": window,
                          "positions": (window.cumsum(-1) - 1).clamp_min(0)}
                logits = model(out[:, -limit:], **kw).logits[:, -1]  # (B, V)
            elif use_cache:
                logits = model(step_input, cache=cache, **kw).logits[:, -1]  # (B, V)
            else:
                if mask is not None:
                    kw["positions"] = positions
                logits = model(out, **kw).logits[:, -1]  # (B, V)
            nxt = pick(logits.float()).to(out.device)  # (B,)
            if eos_token_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
                done = done | (nxt == eos_token_id)
            out = torch.cat([out, nxt[:, None]], dim=1)
            step_input = nxt[:, None]
            if mask is not None:
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)  # (B, S + 1)
                step_positions = positions[:, -1:] + 1  # (B, 1)
                positions = torch.cat([positions, step_positions], dim=1)
            if eos_token_id is not None and bool(done.all()):  # one read per step, as HF
                break
    finally:
        model.train(was_training)
    return out


def _check_left_padded(attention_mask: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Validate a HF ``(B, T)`` attention_mask for generation (read once, before decoding)."""
    check_tensor(attention_mask, "attention_mask", ndim=2)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask {tuple(attention_mask.shape)} must have the shape of input_ids "
            f"{tuple(input_ids.shape)}"
        )
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(
            f"attention_mask must hold integers or bools (1 = real token, 0 = pad), got dtype "
            f"{attention_mask.dtype}"
        )
    m = attention_mask.long()
    if bool(((m != 0) & (m != 1)).any()):
        raise ValueError("attention_mask must contain only 0 (pad) and 1 (real token)")
    if bool((m[:, -1] == 0).any()) or bool((m[:, 1:] < m[:, :-1]).any()):
        raise ValueError(
            "generate() needs left padding: each row of attention_mask must be 0s then 1s and "
            "end with a real token; pad prompts on the left (tokenizer.padding_side = 'left')"
        )
    return m.to(input_ids.device)
