"""Chapter 9: the control the planted-copy test of :mod:`.ch09_context` lacks.

:func:`.ch09_context.copy_losses` plants the bytes of the segment a window ends with ``d`` bytes
earlier and measures how much that lowers the loss of the segment. A model can profit from the
planted bytes without reading them in order: the copy raises the frequency of exactly the bytes
the segment is made of, and a model that only tracks which bytes occurred recently gains from
that. :func:`shuffle_control` adds a second plant, the same bytes in a random order: a model that
retrieves the string gains more from the copy in order than from the shuffled one; a model whose
gain is the same for both is not retrieving anything.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..training.evaluation import model_device

__all__ = ["shuffle_control", "order_gain"]


@torch.no_grad()
def shuffle_control(model, tokens: torch.Tensor, ends: torch.Tensor, length: int, distance: int,
                    copy_len: int, seed: int = 0) -> dict[str, float]:
    """Mean loss of the last ``copy_len - 1`` targets of windows of ``length`` ending at ``ends``,
    whose last ``copy_len`` bytes are a segment from another window (as in
    :func:`.ch09_context.copy_losses`): ``none`` without a copy, ``plant`` with the segment also
    ``distance`` bytes earlier, ``shuffled`` with the segment's bytes planted there in a random
    order (one permutation per window, drawn from ``seed``)."""
    if copy_len < 2 or distance < copy_len:
        raise ValueError(f"need copy_len >= 2 and distance >= copy_len (no overlap), got "
                         f"copy_len={copy_len}, distance={distance}")
    start = length + 1 - copy_len - distance
    if start < 0:
        raise ValueError(f"distance {distance} + copy_len {copy_len} does not fit a window of "
                         f"{length}; use a distance up to {length + 1 - copy_len}")
    model.eval()
    n = len(ends)
    windows = tokens[ends[:, None] - length + torch.arange(length + 1)]  # (n, L + 1)
    source = ends.roll(n // 2)  # another window's last bytes, as copy_losses takes them
    segment = tokens[source[:, None] - copy_len + 1 + torch.arange(copy_len)]
    windows[:, -copy_len:] = segment
    gen = torch.Generator().manual_seed(seed)
    perm = torch.stack([torch.randperm(copy_len, generator=gen) for _ in range(n)])
    out = {}
    for key, plant in (("none", None), ("plant", segment), ("shuffled", segment.gather(1, perm))):
        w = windows.clone()
        if plant is not None:
            w[:, start:start + copy_len] = plant
        w = w.to(model_device(model))
        logits = model(w[:, :-1]).logits[:, 1 - copy_len:].float()  # they predict segment[1:]
        out[key] = float(F.cross_entropy(logits.transpose(1, 2), w[:, 1 - copy_len:]))
    return out


def order_gain(losses: dict[str, float]) -> dict[str, float]:
    """From :func:`shuffle_control`'s losses: ``gain`` (loss without a copy minus with it),
    ``shuffled_gain`` (the same for the shuffled copy) and ``order`` (the copy in order minus the
    shuffled one: what the order of the bytes is worth, the part of the gain that retrieval of
    the string can explain)."""
    missing = {"none", "plant", "shuffled"} - set(losses)
    if missing:
        raise ValueError(f"order_gain needs the losses 'none', 'plant' and 'shuffled' of "
                         f"shuffle_control; missing {sorted(missing)}")
    return {"gain": losses["none"] - losses["plant"],
            "shuffled_gain": losses["none"] - losses["shuffled"],
            "order": losses["shuffled"] - losses["plant"]}
