"""Turning next-token logits into a token: greedy, temperature, top-k, top-p, min-p.

Every filter is a pure function ``logits (..., V) -> logits (..., V)`` that sets the removed
tokens to ``-inf`` and leaves the kept ones untouched, so filters compose (apply them in the
order :func:`sample` does: temperature, top-k, top-p, min-p, the same order as Hugging Face's
``generate``). Each filter always keeps at least one token per row: no row can become all
``-inf`` (which would make ``softmax`` return NaN).

Top-p (nucleus sampling, Holtzman et al. 2020) keeps the *smallest* set of most likely tokens
whose probability mass reaches ``p``; the token whose probability carries the running sum over
``p`` is part of that set. A common bug drops it, so the kept mass falls *below* ``p``
(and with a single dominant token, nothing is left at all).

Min-p (Nguyen et al. 2024) keeps tokens whose probability is at least ``min_p`` times the
probability of the most likely token: the cut adapts to how confident the model is.

Shape letters: B batch, V vocabulary.
"""

from __future__ import annotations

import torch

from .._checks import check_positive_int, check_real, check_tensor

__all__ = [
    "greedy",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "min_p_filter",
    "filter_logits",
    "filtered_probs",
    "sample",
]


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most likely token of each row: ``(..., V) -> (...)`` long.

    Raises ``ValueError`` if a logit is NaN: argmax would return the NaN's index as if it were
    the most likely token. (This reads one bool back from the device per call; decoding is
    driven from the host anyway.)
    """
    check_tensor(logits, "logits", min_ndim=1, floating=True)
    if bool(torch.isnan(logits).any()):
        raise ValueError(
            "logits contain NaN, so no token is the most likely; the model's forward produced "
            "NaN (check its weights and inputs) before decoding"
        )
    return logits.argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by ``temperature`` (> 0). Below 1 sharpens, above 1 flattens.

    Temperature 0 is not a division: ask :func:`sample` for ``temperature=0`` (greedy).
    """
    check_tensor(logits, "logits", floating=True)
    check_real(temperature, "temperature", hint=(
        "; a very large temperature samples almost uniformly: pass a large finite value "
        "(e.g. 100.0), or 0 for greedy decoding"))
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; use sample(..., temperature=0) or "
            "greedy() for argmax decoding"
        )
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row (ties with the k-th value are kept too).

    ``k`` at least the vocabulary size keeps everything.
    """
    check_tensor(logits, "logits", floating=True)
    check_positive_int(k, "top_k")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens with mass >= ``p``.

    A token is kept when the mass of the tokens strictly more likely than it is still below
    ``p``; that includes the token that crosses the threshold, so the kept mass is >= ``p``
    (never less), and the most likely token is always kept. ``p = 1`` keeps everything.
    """
    check_tensor(logits, "logits", floating=True)
    check_real(p, "top_p")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    if p >= 1.0:
        return logits
    # Probabilities of the logits as given (the same numbers ``softmax(logits)`` gives the
    # caller), then sorted: the boundary p == top probability is decided on those very numbers.
    probs, order = torch.sort(torch.softmax(logits.float(), dim=-1), dim=-1, descending=True)
    # Mass of the strictly more likely tokens, as an *exclusive* cumulative sum: a zero, then
    # the running sum of the tokens before. ``cumsum(probs) - probs`` would round (for p equal
    # to the top probability it can come out just below p and keep a second token).
    mass_before = torch.cumsum(probs, dim=-1)[..., :-1]  # (..., V-1)
    mass_before = torch.cat([torch.zeros_like(probs[..., :1]), mass_before], dim=-1)
    remove_sorted = mass_before >= p
    remove_sorted[..., 0] = False  # the top token always stays
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def min_p_filter(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Keep tokens with probability >= ``min_p`` times the top token's probability."""
    check_tensor(logits, "logits", floating=True)
    check_real(min_p, "min_p")
    if not 0.0 <= min_p <= 1.0:
        raise ValueError(f"min_p must be in [0, 1], got {min_p}")
    probs = torch.softmax(logits.float(), dim=-1)
    threshold = min_p * probs.max(dim=-1, keepdim=True).values  # (..., 1)
    return logits.masked_fill(probs < threshold, float("-inf"))


def filter_logits(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> torch.Tensor:
    """Temperature, then top-k, then top-p, then min-p (each optional); returns logits."""
    out = apply_temperature(logits, temperature)
    if top_k is not None:
        out = top_k_filter(out, top_k)
    if top_p is not None:
        out = top_p_filter(out, top_p)
    if min_p is not None:
        out = min_p_filter(out, min_p)
    return out


def filtered_probs(logits: torch.Tensor, **options) -> torch.Tensor:
    """The distribution :func:`sample` draws from: ``softmax(filter_logits(logits, **options))``.

    ``temperature=0`` gives a one-hot row at the argmax.
    """
    if options.get("temperature", 1.0) == 0:
        return torch.nn.functional.one_hot(greedy(logits), logits.shape[-1]).to(logits.dtype)
    return torch.softmax(filter_logits(logits, **options).float(), dim=-1).to(logits.dtype)


def sample(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token per row of ``logits`` (..., V) -> (...) long.

    ``temperature=0`` is greedy decoding (the filters are then irrelevant). ``generator`` makes
    the draw reproducible; it may live on another device than ``logits`` (the draw happens on
    the generator's device and the result comes back).
    """
    check_tensor(logits, "logits", min_ndim=1, floating=True)
    if temperature == 0:
        return greedy(logits)
    probs = filtered_probs(
        logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p
    ).float()
    flat = probs.reshape(-1, probs.shape[-1])  # (B*, V)
    if generator is not None and generator.device != flat.device:
        flat = flat.to(generator.device)
    try:
        ids = torch.multinomial(flat, 1, generator=generator)  # (B*, 1)
    except RuntimeError as err:  # NaN/inf probabilities: say where they came from
        raise ValueError(
            "cannot sample: the probabilities contain NaN or inf because the logits do; the "
            "model's forward produced them (check its weights and inputs)"
        ) from err
    return ids.reshape(probs.shape[:-1]).to(logits.device)
