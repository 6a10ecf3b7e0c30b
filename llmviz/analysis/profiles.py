"""Per-layer profiles of a model: how gradients and the residual stream change with depth.

:func:`depth_profiles` runs one forward and backward pass of the next-token loss and returns,
per block, the gradient norm of its parameters and the RMS of the residual stream after it:
the two curves that separate post-norm, pre-norm, sandwich and DeepNorm placements (Xiong et
al. 2020, "On Layer Normalization in the Transformer Architecture"; Wang et al. 2022,
"DeepNet").

:func:`stability_stats` reads off a trained model the quantities the stability tricks bound
(QK-norm and attention soft-capping: the attention scores, hence the attention entropy; z-loss:
log Z; logit soft-capping: the logits), with the held-out loss.

Shape letters: B batch, T tokens, H heads, S keys, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["depth_profiles", "stability_stats"]


def depth_profiles(model: nn.Module, input_ids: torch.Tensor) -> dict[str, list[float]]:
    """Per-layer gradient norm and residual-stream RMS of a :class:`~llmviz.model.DecoderLM`.

    One forward and backward pass of the next-token loss on ``input_ids``; the model's
    parameters' ``.grad`` are overwritten (set to this pass's gradients).

    Args:
        model: a decoder with a ``layers`` list of blocks whose forward returns the residual
            stream (or a tuple starting with it) and ``model(ids, labels=ids).loss``.
        input_ids: ``(B, T)`` token ids.

    Returns:
        ``{"grad_norm": [...], "residual_rms": [...]}``, one entry per block: the L2 norm of the
        gradient of all the block's parameters, and the RMS of the block's output.
    """
    if not hasattr(model, "layers"):
        raise TypeError(
            f"model must have a .layers list of blocks (a DecoderLM), got {type(model).__name__}"
        )
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise ValueError(
            "input_ids must be a (B, T) tensor of token ids, got "
            f"{getattr(input_ids, 'shape', type(input_ids).__name__)}"
        )
    rms: list[float] = []

    def record(_module: nn.Module, _inputs: tuple, out) -> None:
        hidden = out[0] if isinstance(out, tuple) else out  # (B, T, C)
        rms.append(float(hidden.detach().float().pow(2).mean().sqrt()))

    hooks = [layer.register_forward_hook(record) for layer in model.layers]
    try:
        model.zero_grad(set_to_none=True)
        out = model(input_ids, labels=input_ids)
        out.loss.backward()
    finally:
        for h in hooks:
            h.remove()
    grads = []
    for layer in model.layers:
        sq = sum(float(p.grad.pow(2).sum()) for p in layer.parameters() if p.grad is not None)
        grads.append(sq**0.5)
    return {"grad_norm": grads, "residual_rms": rms}


@torch.no_grad()
def stability_stats(
    model: nn.Module, input_ids: torch.Tensor, targets: torch.Tensor | None = None
) -> dict[str, float]:
    """What the stability tricks bound, measured on one batch (no gradients, model unchanged).

    Args:
        model: a :class:`~llmviz.model.DecoderLM` (``model(ids, return_weights=True)`` returns
            ``.logits`` ``(B, T, V)`` and ``.weights``, one ``(B, H, T, S)`` per layer).
        input_ids: ``(B, T)`` token ids.
        targets: optional ``(B, T)`` next tokens; adds ``"loss"`` (mean cross-entropy, nats).

    Returns:
        ``{"min_attention_entropy": ..., "log_z": ..., "max_abs_logit": ...[, "loss": ...]}``:
        the lowest, over layers, of the mean attention entropy (nats; 0 = one-hot attention),
        the mean of ``logsumexp(logits)`` over positions, and the largest |logit|.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
        raise ValueError(
            "input_ids must be a (B, T) tensor of token ids, got "
            f"{getattr(input_ids, 'shape', type(input_ids).__name__)}"
        )
    if input_ids.numel() == 0:
        raise ValueError(f"input_ids {tuple(input_ids.shape)} holds no token; pass at least one")
    if targets is not None and (not isinstance(targets, torch.Tensor)
                                or targets.shape != input_ids.shape):
        raise ValueError(
            f"targets must be a (B, T) tensor like input_ids {tuple(input_ids.shape)}, got "
            f"{getattr(targets, 'shape', type(targets).__name__)}"
        )
    was_training = model.training
    model.eval()
    try:
        out = model(input_ids, return_weights=True)
    finally:
        model.train(was_training)
    weights = getattr(out, "weights", None)
    if not weights:
        raise TypeError(
            f"{type(model).__name__}(ids, return_weights=True) returned no attention weights; "
            "pass a llmviz DecoderLM"
        )
    entropies = [float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean()) for w in weights]
    logits = out.logits.float()  # (B, T, V)
    stats = {
        "min_attention_entropy": min(entropies),
        "log_z": float(torch.logsumexp(logits, dim=-1).mean()),
        "max_abs_logit": float(logits.abs().max()),
    }
    if targets is not None:
        stats["loss"] = float(nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))
    return stats
