"""Multi-query associative recall, and the token mixers compared on it.

The task (Arora et al., 2023, "Zoology"): a sequence of key-value pairs, then some of the keys
again; after each repeated key the model must produce the value that key was paired with::

    k3 v7 k0 v2 k5 v1 | k0 v2 k3 v7

Keys and values come from disjoint parts of the vocabulary (keys ``0 .. n_keys - 1``, values
``n_keys .. n_keys + n_values - 1``), keys are distinct within a sequence, and the loss (the
mask) counts only the positions whose target is a queried value. Guessing scores
``1 / n_values``.

:func:`recall_model` builds the same small decoder with one of four token mixers, so that the
comparison changes the mixer and nothing else: ``"softmax"`` attention in every layer,
``"linear"`` attention (the Gated DeltaNet layer with the delta rule and the gate taken out,
:class:`PlainLinearAttention`), ``"deltanet"`` (Gated DeltaNet in every layer) and
``"hybrid"`` (Gated DeltaNet layers with softmax attention in every ``ratio + 1``-th layer).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_flags, check_positive_int
from ..attention.deltanet import GatedDeltaNet
from ..attention.linear import l2_normalize, linear_attention
from .data import Task

__all__ = ["multi_query_recall", "recall_accuracy", "recall_by_position", "no_recall_baseline", "PlainLinearAttention", "recall_model",
           "hybrid_layers", "init_gate_step", "MIXER_VARIANTS", "ConvProjection", "conv_attention"]

#: The variants :func:`recall_model` builds.
MIXER_VARIANTS = ("softmax", "linear", "deltanet", "hybrid")


def multi_query_recall(
    *,
    batch_size: int,
    n_pairs: int,
    n_queries: int | None = None,
    n_keys: int = 16,
    n_values: int = 16,
    replace: bool = False,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Task:
    """A batch of multi-query associative recall (see the module text).

    Args:
        n_pairs: key-value pairs stated first (distinct keys), at most ``n_keys``.
        n_queries: keys asked again afterwards, distinct, at most ``n_pairs`` (None: all of them,
            in a shuffled order). With ``replace=True`` any number, drawn with replacement.
        replace: draw the queried keys with replacement, so that a key may be asked twice and
            another never: then no answer follows from the values already asked (elimination,
            see :func:`no_recall_baseline`), and only a lookup of the key helps.

    Returns:
        A :class:`Task` of length ``T = 2 * (n_pairs + n_queries) - 1``, vocabulary size
        ``n_keys + n_values``; the mask marks the ``n_queries`` value targets.
    """
    check_flags(replace=replace)
    check_positive_int(batch_size, "batch_size")
    check_positive_int(n_pairs, "n_pairs")
    check_positive_int(n_keys, "n_keys")
    check_positive_int(n_values, "n_values")
    n_queries = n_pairs if n_queries is None else check_positive_int(n_queries, "n_queries")
    if n_pairs > n_keys:
        raise ValueError(f"n_pairs={n_pairs} distinct keys need n_keys >= {n_pairs}, got "
                         f"n_keys={n_keys}; raise n_keys or lower n_pairs")
    if n_queries > n_pairs and not replace:
        raise ValueError(f"n_queries={n_queries} distinct queries need n_pairs >= {n_queries}, "
                         f"got n_pairs={n_pairs}; or pass replace=True")
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(-1)[:, :n_pairs]
    values = n_keys + torch.randint(0, n_values, (batch_size, n_pairs), generator=generator)
    if replace:
        pick = torch.randint(0, n_pairs, (batch_size, n_queries), generator=generator)
    else:
        pick = torch.rand(batch_size, n_pairs, generator=generator).argsort(-1)[:, :n_queries]
    rows = torch.arange(batch_size)[:, None]
    pairs = torch.stack([keys, values], 2).reshape(batch_size, 2 * n_pairs)
    asked = torch.stack([keys[rows, pick], values[rows, pick]], 2).reshape(batch_size, 2 * n_queries)
    full = torch.cat([pairs, asked], 1)  # (B, 2P + 2Q)
    mask = torch.zeros(batch_size, full.shape[1] - 1, dtype=torch.bool)
    mask[:, 2 * n_pairs::2] = True  # input: a queried key; target: its value
    return Task(full[:, :-1].to(device), full[:, 1:].to(device), mask.to(device))


@torch.no_grad()
def _query_hits(model: torch.nn.Module, task: Task) -> Tensor:
    """``(B, T)`` bool: where the model, scored in eval mode, puts its top token on the target.

    The one forward pass behind :func:`recall_accuracy` and :func:`recall_by_position` (the
    model's train/eval mode is restored afterwards; unmasked positions are included).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task (inputs, targets, mask), got {type(task).__name__}; "
                        "build one with multi_query_recall")
    was = model.training
    model.eval()
    try:
        out = model(task.inputs)
    finally:
        model.train(was)
    logits = out.logits if hasattr(out, "logits") else out
    return logits.argmax(-1) == task.targets


@torch.no_grad()
def recall_accuracy(model: torch.nn.Module, task: Task, *, per_sequence: bool = False) -> Tensor:
    """Share of masked positions where the model's top token is the target.

    ``per_sequence=True``: one accuracy per sequence ``(B,)`` (for paired comparisons);
    otherwise a scalar tensor.
    """
    hit = _query_hits(model, task) & task.mask
    if per_sequence:
        return hit.sum(1).float() / task.mask.sum(1).clamp_min(1).float()
    return hit.sum().float() / task.mask.sum().clamp_min(1).float()


@torch.no_grad()
def recall_by_position(model: torch.nn.Module, task: Task) -> Tensor:
    """Accuracy at each query position (the masked positions in order): ``(n_queries,)``.

    Every sequence of a :func:`multi_query_recall` task has its queries at the same positions.
    """
    if isinstance(task, Task) and not bool((task.mask == task.mask[0]).all()):
        raise ValueError("recall_by_position needs the query positions shared by every sequence")
    hit = _query_hits(model, task)
    pos = task.mask[0].nonzero().flatten()
    return hit[:, pos].float().mean(0)


def no_recall_baseline(task: Task, n_pairs: int) -> Tensor:
    """Per query position, the accuracy of the best answer that never matches a key.

    A model that has not learnt the lookup can still use what it sees: the values stated in the
    first ``n_pairs`` pairs, and the values already given in the query half. Two such strategies
    are scored exactly (in expectation over their random choice), and the better one is
    returned at each position: *elimination*, a uniform guess among the stated values not yet
    asked (strong when every key is asked once: the last query is then always right), and
    *frequency*, the most common stated value (strong when values repeat). ``(n_queries,)``.
    """
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task, got {type(task).__name__}")
    inp, tgt = task.inputs.cpu(), task.targets.cpu()
    pos = task.mask[0].nonzero().flatten().cpu()
    stated = inp[:, 1:2 * n_pairs:2]  # (B, P) the values of the stated pairs
    if stated.shape[1] != n_pairs or len(pos) == 0 or int(pos[0]) != 2 * n_pairs:
        raise ValueError(f"n_pairs={n_pairs} does not match the task's layout (first query at "
                         f"position {int(pos[0]) if len(pos) else None}, expected {2 * n_pairs})")
    B = inp.shape[0]
    rows = torch.arange(B)
    same = (stated[:, :, None] == stated[:, None, :]).sum(-1)  # (B, P) copies of each value
    top = same.max(1).values  # copies of the most common value
    n_modes = torch.tensor([stated[b][same[b] == top[b]].unique().numel() for b in range(B)])
    remaining = torch.ones(B, n_pairs, dtype=torch.bool)
    out = torch.zeros(len(pos))
    for j, p in enumerate(pos.tolist()):
        target = tgt[:, p]
        is_target = stated == target[:, None]
        match = is_target & remaining
        elim = match.sum(1).float() / remaining.sum(1).clamp_min(1).float()
        mode = (is_target.sum(1) == top).float() / n_modes.float()  # a mode, guessed among modes
        out[j] = torch.maximum(elim.mean(), mode.mean())
        has = match.any(1)  # the asked pair leaves the pool (one copy of its value)
        remaining[rows[has], match.float().argmax(1)[has]] = False
    return out


class PlainLinearAttention(GatedDeltaNet):
    """Gated DeltaNet with the delta rule and the gate taken out: plain causal linear attention.

    Same projections, short convolution, unit q and k, output norm and output gate (and so the
    same parameter count; ``a_proj``, ``b_proj``, ``A_log`` and ``dt_bias`` are kept but unused),
    but the state update is ``S_t = S_{t-1} + k_t v_t^T``: every write adds, nothing is forgotten
    or corrected. Built from a :class:`GatedDeltaNet` with :meth:`from_deltanet`.
    """

    @classmethod
    def from_deltanet(cls, layer: GatedDeltaNet) -> "PlainLinearAttention":
        new = cls(layer.d_model, layer.n_v_heads, layer.d_head_k, layer.d_head_v,
                  n_k_heads=layer.n_k_heads, conv_kernel=layer.conv_kernel, eps=layer.eps,
                  chunk_size=layer.chunk_size)
        new.load_state_dict(layer.state_dict())
        return new.to(layer.o_proj.weight.device, layer.o_proj.weight.dtype)

    def forward(self, x: Tensor, state=None, return_state: bool = False):
        if state is not None or return_state:
            raise ValueError("PlainLinearAttention is for training and scoring whole sequences: "
                             "call it with state=None, return_state=False")
        B, T, _ = x.shape
        Hk, Hv, Dk, Dv = self.n_k_heads, self.n_v_heads, self.d_head_k, self.d_head_v
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1).transpose(1, 2)
        padded = F.pad(mixed, (self.conv_kernel - 1, 0))
        mixed = F.silu(F.conv1d(padded, self.conv.weight, groups=self.conv_dim))
        q, k, v = mixed.transpose(1, 2).split([Hk * Dk, Hk * Dk, Hv * Dv], -1)
        q = q.reshape(B, T, Hk, Dk).transpose(1, 2)
        k = k.reshape(B, T, Hk, Dk).transpose(1, 2)
        v = v.reshape(B, T, Hv, Dv).transpose(1, 2)
        if Hv != Hk:
            q, k = (t.repeat_interleave(Hv // Hk, dim=1) for t in (q, k))
        out, _ = linear_attention(l2_normalize(q), l2_normalize(k), v, chunk_size=self.chunk_size)
        out = out.transpose(1, 2)
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm_weight
        z = self.z_proj(x).reshape(B, T, Hv, Dv)
        return self.o_proj((out * F.silu(z)).reshape(B, T, Hv * Dv))


def init_gate_step(layer: GatedDeltaNet, low: float = 1e-3, high: float = 1e-1) -> None:
    """Draw the forget gate's step bias as Mamba and the Gated DeltaNet authors' code do.

    The gate is ``log a = -exp(A_log) * softplus(a_proj x + dt_bias)``. Hugging Face's
    Qwen3-Next starts ``dt_bias`` at 1 (its weights are always loaded over it), which with
    ``A = exp(A_log)`` up to 16 forgets most of the state within a few tokens. Trained from
    scratch, the step ``softplus(dt_bias)`` is drawn log-uniformly in ``[low, high]`` per head,
    so the state starts out long-lived.
    """
    if not isinstance(layer, GatedDeltaNet):
        raise TypeError(f"layer must be a GatedDeltaNet (it owns dt_bias), got {type(layer).__name__}")
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high for the gate step, got low={low}, high={high}")
    with torch.no_grad():
        u = torch.rand(layer.dt_bias.shape, device=layer.dt_bias.device)
        dt = torch.exp(u * (math.log(high) - math.log(low)) + math.log(low))
        layer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) == dt


def hybrid_layers(n_layers: int, ratio: int) -> tuple[int, ...]:
    """Indices of the linear layers when every ``ratio + 1``-th layer is softmax attention.

    ``ratio`` linear layers per softmax layer, softmax last in each group (Qwen3-Next: ratio 3,
    layers 0, 1, 2 linear and 3 softmax). ``hybrid_layers(2, 1) == (0,)``.
    """
    check_positive_int(n_layers, "n_layers")
    check_positive_int(ratio, "ratio")
    return tuple(i for i in range(n_layers) if (i + 1) % (ratio + 1) != 0)


def recall_model(variant: str, *, vocab_size: int, d_model: int = 64, n_layers: int = 2,
                 n_heads: int = 4, max_seq_len: int = 64, ratio: int = 1, **config):
    """A :class:`~llmviz.model.lm.DecoderLM` whose token mixers are ``variant``.

    ``variant`` is one of :data:`MIXER_VARIANTS`; ``ratio`` (hybrid only) is linear layers per
    softmax layer. Extra keyword arguments go to :class:`~llmviz.model.config.ModelConfig`.
    Build under ``torch.manual_seed`` to fix the initial weights.
    """
    from ..model.config import ModelConfig
    from ..model.lm import DecoderLM

    if variant not in MIXER_VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {MIXER_VARIANTS}")
    linear = {"softmax": None, "linear": tuple(range(n_layers)),
              "deltanet": tuple(range(n_layers)), "hybrid": hybrid_layers(n_layers, ratio)}[variant]
    if variant == "hybrid" and not linear:
        raise ValueError(f"ratio={ratio} leaves no linear layer in {n_layers} layers")
    cfg = ModelConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                      max_seq_len=max_seq_len, linear_layers=linear, **config)
    model = DecoderLM(cfg)
    for module in model.modules():
        if isinstance(module, GatedDeltaNet):
            init_gate_step(module)
    if variant == "linear":
        for module in list(model.modules()):
            if getattr(module, "linear_attn", None) is not None:
                module.linear_attn = PlainLinearAttention.from_deltanet(module.linear_attn)
    return model


class ConvProjection(torch.nn.Linear):
    """A linear projection followed by the linear layers' short causal convolution.

    ``y = silu(conv(W x + b))`` with a depthwise causal convolution of ``kernel`` taps over time,
    the same operation a :class:`GatedDeltaNet` applies to its q, k and v (Primer's
    "multi-DConv-head attention", So et al., 2021, puts such a convolution after the q, k, v
    projections of softmax attention). It keeps ``weight`` and ``bias`` of the projection it
    wraps. For training and scoring whole sequences: a cached decode step would see one token.
    """

    def __init__(self, linear: torch.nn.Linear, kernel: int = 4):
        check_positive_int(kernel, "kernel")
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None,
                         device=linear.weight.device, dtype=linear.weight.dtype)
        self.load_state_dict(linear.state_dict())
        self.kernel = kernel
        self.conv = torch.nn.Conv1d(self.out_features, self.out_features, kernel,
                                    groups=self.out_features, bias=False,
                                    device=linear.weight.device, dtype=linear.weight.dtype)

    def forward(self, x: Tensor) -> Tensor:
        y = super().forward(x).transpose(-1, -2)  # (B, C, T)
        y = F.conv1d(F.pad(y, (self.kernel - 1, 0)), self.conv.weight, groups=self.out_features)
        return F.silu(y).transpose(-1, -2)


def conv_attention(model: torch.nn.Module, kernel: int = 4) -> torch.nn.Module:
    """Give every softmax-attention layer of ``model`` the linear layers' short convolution.

    Each ``q_proj``, ``k_proj`` and ``v_proj`` of a softmax layer (a block's ``self_attn``)
    becomes a :class:`ConvProjection`, so that softmax and linear layers mix the same few
    neighbouring tokens before their q, k and v meet; the model is changed in place and returned.
    The new convolutions are drawn from torch's current random state.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_positive_int(kernel, "kernel")
    for module in list(model.modules()):
        attn = getattr(module, "self_attn", None)
        if attn is None:
            continue
        for name in ("q_proj", "k_proj", "v_proj"):
            proj = getattr(attn, name)
            if not isinstance(proj, ConvProjection):
                setattr(attn, name, ConvProjection(proj, kernel))
    return model
