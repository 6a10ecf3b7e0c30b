"""Measurements chapter 9 takes from a trained model (shared by its experiments).

Every function reads the model where it lives (``llmviz.device()`` in the experiments) and
returns plain floats or lists of floats, so the results can be stored as data.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention.metrics import mass_by_distance
from ..training.evaluation import model_device

__all__ = ["window_losses", "sliding_losses", "uniform_far_mass", "attention_probe",
           "last_query_scores", "rope_score_ratios", "sinusoidal_norms"]


@torch.no_grad()
def window_losses(model, tokens: torch.Tensor, ends: torch.Tensor, length: int,
                  batch_tokens: int = 8192) -> torch.Tensor:
    """Next-token loss at every position of the window of ``length`` inputs ending at each end:
    ``(n_ends, length)`` on the CPU; column ``-1`` predicts ``tokens[end]``."""
    device = model_device(model)
    model.eval()
    idx = ends[:, None] - length + torch.arange(length + 1)  # (n_ends, L + 1)
    out = []
    per = max(1, batch_tokens // length)
    for k in range(0, len(ends), per):
        w = tokens[idx[k:k + per]].to(device)
        logits = model(w[:, :-1]).logits.float()  # (B, L, V)
        out.append(F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none").cpu())
    return torch.cat(out).double()


@torch.no_grad()
def sliding_losses(model, tokens: torch.Tensor, targets: torch.Tensor, context: int,
                   batch_windows: int = 512) -> torch.Tensor:
    """Loss of each target read with exactly ``context`` tokens before it (a sliding window):
    the in-distribution reference for a model trained at ``context``. ``(len(targets),)``."""
    device = model_device(model)
    model.eval()
    flat = targets.flatten()
    out = []
    for k in range(0, len(flat), batch_windows):
        t = flat[k:k + batch_windows]
        w = tokens[t[:, None] - context + torch.arange(context)].to(device)  # (B, context)
        logits = model(w).logits[:, -1].float()
        out.append(F.cross_entropy(logits, tokens[t].to(device), reduction="none").cpu())
    return torch.cat(out).double()


def uniform_far_mass(length: int, tail: int) -> float:
    """Share of attention at distance >= ``tail`` that *uniform* causal attention gives the last
    ``tail`` queries of a window of ``length``: the reference a trained model is read against."""
    queries = range(length - tail, length)  # 0-based positions; query p sees p + 1 keys
    return sum(max(0, p + 1 - tail) / (p + 1) for p in queries) / tail


@torch.no_grad()
def attention_probe(model, tokens: torch.Tensor, ends: torch.Tensor, length: int,
                    tail: int) -> dict[str, float]:
    """Last layer, scored queries (the last ``tail``) of windows of ``length``: the share of
    attention at distance >= ``tail``, and the mean entropy against uniform attention's."""
    device = model_device(model)
    model.eval()
    idx = ends[:, None] - length + torch.arange(length)
    w = model(tokens[idx].to(device), return_weights=True).weights[-1][:, :, -tail:, :].float()
    far = torch.stack([mass_by_distance(x) for x in w]).mean(dim=(0, 1))[tail:].sum()
    entropy = -(w * w.clamp_min(1e-30).log()).sum(-1).mean()  # nats, mean over B, H, queries
    uniform = sum(math.log(p + 1) for p in range(length - tail, length)) / tail
    return {"far_mass": float(far), "entropy": float(entropy), "uniform_entropy": uniform}


@torch.no_grad()
def last_query_scores(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Per layer of a RoPE model: the scaled scores q.k of the last query against every key,
    ``(B, H, L)``, recomputed from each layer's input (the softmax of a row is its weights)."""
    device = model_device(model)
    model.eval()
    ids = ids.to(device)
    length = ids.shape[1]
    captured: dict[int, torch.Tensor] = {}
    hooks = [layer.self_attn.register_forward_pre_hook(
        lambda m, a, k, i=i: captured.__setitem__(i, a[0] if a else k["x"]), with_kwargs=True)
        for i, layer in enumerate(model.layers)]
    try:
        model(ids)
    finally:
        for h in hooks:
            h.remove()
    out = []
    for i, layer in enumerate(model.layers):
        attn, x = layer.self_attn, captured[i]
        B = x.shape[0]
        q = attn.q_proj(x).view(B, length, attn.n_heads, -1).transpose(1, 2)
        k = attn.k_proj(x).view(B, length, attn.n_kv_heads, -1).transpose(1, 2)
        q, k = attn.rope(q, k, torch.arange(length, device=device), seq_len=length)
        k = k.repeat_interleave(attn.n_heads // attn.n_kv_heads, dim=1)
        out.append((q[:, :, -1:, :] @ k.transpose(-1, -2))[:, :, 0, :] / math.sqrt(q.shape[-1]))
    return out


def rope_score_ratios(model, tokens: torch.Tensor, ends: torch.Tensor, length: int,
                      train_len: int) -> list[float]:
    """Per layer: largest mean |q.k| of the last query past ``train_len`` over the largest within
    it (Chen et al.'s concern: scores at unseen distances blowing up). One float per layer."""
    idx = ends[:, None] - length + torch.arange(length)
    ratios = []
    for s in last_query_scores(model, tokens[idx]):
        by_distance = s.abs().mean(dim=(0, 1)).flip(0)  # index = distance
        ratios.append(float(by_distance[train_len:].max() / by_distance[:train_len].max()))
    return ratios


@torch.no_grad()
def sinusoidal_norms(model, used: torch.Tensor, train_len: int) -> dict[str, float]:
    """Mean norm of the (scaled) token embeddings of the bytes in use and of the position
    vectors added to them at positions below ``train_len``."""
    c = model.config
    scale = math.sqrt(c.d_model) if c.embed_scale else 1.0
    emb = model.embed_tokens.weight.detach().float()[used.to(model.embed_tokens.weight.device)]
    pos = model.embed_positions(torch.arange(train_len, device=emb.device)).float()
    return {"token": float((scale * emb).norm(dim=-1).mean()), "position": float(pos.norm(dim=-1).mean())}
