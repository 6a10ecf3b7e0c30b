"""The mixture-of-experts feed-forward layer: a router, E small gated MLPs, and optional shared
experts that every token passes through.

Shape letters: B batch, T sequence length, N = B*T tokens, C model width, E experts, F hidden
width of one expert, k experts per token.

``out = sum_{j<k} w_j * expert_{i_j}(x)  +  shared(x)``

Only the k chosen experts run for a token, so the *active* parameters per token are those of k
experts (plus the shared ones), while the *total* grows with E: that gap is the point of a
mixture of experts. *Fine-grained* experts (DeepSeekMoE) cut each expert into ``m`` narrower
ones and let a token pick ``m`` times as many: same total and active parameters, many more
combinations (:func:`fine_grained`).

Weights are stored as Hugging Face transformers 5 stores them: ``experts.gate_up_proj``
``(E, 2F, C)`` (gate rows first, then up rows) and ``experts.down_proj`` ``(E, C, F)``; the
router is ``gate.weight`` ``(E, C)``; shared experts are a :class:`~llmviz.ffn.GatedMLP` named
``shared_experts``. :mod:`llmviz.moe.convert` copies Mixtral, Qwen3-MoE and DeepSeek-V3 blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import (check_choice, check_dtype_matches, check_flags, check_positive,
                       check_positive_int, check_tensor)
from ..ffn import GatedMLP, activation
from .dispatch import DispatchPlan, combine, expert_capacity, plan_dispatch
from .router import Router, Routing

__all__ = ["Experts", "MoELayer", "MoEInfo", "fine_grained", "EXPERT_GLUS", "clamped_glu"]

#: How an expert combines its gate and up halves: ``"standard"`` ``act(gate) * up`` (SwiGLU
#: with silu), or ``"clamped"`` (gpt-oss, :func:`clamped_glu`).
EXPERT_GLUS = ("standard", "clamped")


def clamped_glu(gate: torch.Tensor, up: torch.Tensor, *, alpha: float = 1.702, limit: float = 7.0) -> torch.Tensor:
    """gpt-oss's expert GLU: ``g = min(gate, limit)``, ``u = clamp(up, -limit, limit)``,
    ``(u + 1) * g * sigmoid(alpha * g)``.

    It differs from SwiGLU three ways: the gate uses ``x * sigmoid(1.702 x)`` (the sigmoid
    approximation of GELU) instead of silu, both halves are clamped (the gate from above only),
    and the up half is shifted by one, so a zero up projection passes the gate through.
    """
    check_tensor(gate, "gate", floating=True)
    check_tensor(up, "up", floating=True)
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} must have one shape")
    check_positive(alpha, "alpha")
    check_positive(limit, "limit")
    g = gate.clamp(max=limit)
    return (up.clamp(min=-limit, max=limit) + 1) * (g * torch.sigmoid(g * alpha))


#: On the CPU the per-expert loop wins once experts get many rows: measured (torch 2.13, one
#: thread, C=256, F=512, 8 experts, forward + backward) grouped_mm took 0.4x the loop's time at
#: 8 rows per expert, about the same at 256, and 1.1x at 1024. Below this many rows per expert
#: (on average) the CPU path uses grouped_mm.
CPU_GROUPED_MAX_ROWS = 512


def _grouped_mm_ok(rows: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether to run the experts with ``F.grouped_mm``: it exists, an Ampere or newer GPU or the
    CPU (16-byte aligned data, fewer than :data:`CPU_GROUPED_MAX_ROWS` rows per expert),
    float32/bfloat16/float16 (not float64), not while compiling."""
    if not hasattr(F, "grouped_mm") or rows.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    if torch.compiler.is_compiling() or rows.dtype != weight.dtype or rows.shape[0] == 0:
        return False
    if rows.device.type == "cuda":
        return torch.cuda.get_device_capability(rows.device) >= (8, 0)
    if rows.device.type == "cpu":
        few_rows = rows.shape[0] < CPU_GROUPED_MAX_ROWS * weight.shape[0]
        return few_rows and rows.data_ptr() % 16 == 0 and weight.data_ptr() % 16 == 0
    return False


class Experts(nn.Module):
    """E gated MLPs held as two stacked tensors (one matmul per expert, no module per expert).

    Args:
        n_experts: E.
        d_model: C.
        d_expert: F, the hidden width of one expert.
        activation_name: gate activation (``"silu"``: SwiGLU experts, as Mixtral/Qwen3/DeepSeek).
        bias: biases ``gate_up_proj_bias (E, 2F)`` and ``down_proj_bias (E, C)`` (gpt-oss).
        glu: ``"standard"`` (``act(gate) * up``) or ``"clamped"`` (gpt-oss, :func:`clamped_glu`
            with ``alpha`` and ``limit``; ``activation_name`` is then unused).
    """

    def __init__(self, n_experts: int, d_model: int, d_expert: int, *, activation_name: str = "silu",
                 bias: bool = False, glu: str = "standard", alpha: float = 1.702, limit: float = 7.0) -> None:
        check_flags(bias=bias)
        super().__init__()
        for name, v in (("n_experts", n_experts), ("d_model", d_model), ("d_expert", d_expert)):
            check_positive_int(v, name)
        check_choice(glu, "glu", EXPERT_GLUS)
        check_positive(alpha, "alpha")
        check_positive(limit, "limit")
        self.n_experts, self.d_model, self.d_expert = n_experts, d_model, d_expert
        self.gate_up_proj = nn.Parameter(torch.empty(n_experts, 2 * d_expert, d_model))
        self.down_proj = nn.Parameter(torch.empty(n_experts, d_model, d_expert))
        nn.init.normal_(self.gate_up_proj, std=d_model**-0.5)
        nn.init.normal_(self.down_proj, std=d_expert**-0.5)
        if bias:
            self.gate_up_proj_bias = nn.Parameter(torch.zeros(n_experts, 2 * d_expert))
            self.down_proj_bias = nn.Parameter(torch.zeros(n_experts, d_model))
        else:
            self.gate_up_proj_bias = self.down_proj_bias = None
        self.glu, self.alpha, self.limit = glu, float(alpha), float(limit)
        self.act = activation(activation_name)

    def _combine(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        if self.glu == "clamped":
            return clamped_glu(gate, up, alpha=self.alpha, limit=self.limit)
        return self.act(gate) * up

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert ``e`` on rows ``x (M, C) -> (M, C)``: ``down(act(gate x) * up x)``."""
        b1 = None if self.gate_up_proj_bias is None else self.gate_up_proj_bias[e]
        b2 = None if self.down_proj_bias is None else self.down_proj_bias[e]
        gate, up = F.linear(x, self.gate_up_proj[e], b1).chunk(2, dim=-1)  # (M, F) each
        return F.linear(self._combine(gate, up), self.down_proj[e], b2)  # (M, C)

    def experts_as_functions(self) -> list[Callable[[torch.Tensor], torch.Tensor]]:
        """The E experts as separate callables (for :func:`~llmviz.moe.dispatch.dense_forward`)."""
        return [lambda x, e=e: self.expert(e, x) for e in range(self.n_experts)]

    def forward(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Rows grouped by expert, ``(M, C)``, with ``counts[e]`` rows for expert e -> ``(M, C)``.

        ``grouped_mm`` (one kernel for all experts) where torch has it for this dtype and
        device; otherwise a loop over the experts. The weights are taken apart with ``unbind``
        (one view each, one gradient buffer in the backward) rather than indexed per expert,
        which would allocate a full-size zero gradient for every expert.
        """
        if self.gate_up_proj_bias is not None:  # biased experts: the per-expert loop
            outs = [self.expert(e, block) for e, block in enumerate(rows.split(counts)) if block.shape[0]]
            return torch.cat(outs) if outs else rows.new_zeros(0, self.d_model)
        if _grouped_mm_ok(rows, self.gate_up_proj):
            offsets = torch.tensor(counts, device=rows.device).cumsum(0).to(torch.int32)  # (E,)
            h = F.grouped_mm(rows, self.gate_up_proj.transpose(1, 2), offs=offsets)  # (M, 2F)
            gate, up = h.chunk(2, dim=-1)
            return F.grouped_mm(self._combine(gate, up), self.down_proj.transpose(1, 2), offs=offsets)
        gate_ups, downs = self.gate_up_proj.unbind(0), self.down_proj.unbind(0)
        outs = []
        for e, block in enumerate(rows.split(counts)):
            if block.shape[0]:
                gate, up = F.linear(block, gate_ups[e]).chunk(2, dim=-1)  # (M_e, F) each
                outs.append(F.linear(self._combine(gate, up), downs[e]))  # (M_e, C)
        return torch.cat(outs) if outs else rows.new_zeros(0, self.d_model)

    def extra_repr(self) -> str:
        extra = ", bias=True" if self.gate_up_proj_bias is not None else ""
        extra += f", glu='clamped', alpha={self.alpha:g}, limit={self.limit:g}" if self.glu == "clamped" else ""
        return f"n_experts={self.n_experts}, d_model={self.d_model}, d_expert={self.d_expert}{extra}"


@dataclass
class MoEInfo:
    """What one forward pass routed: read it for the balancing losses and the book's figures.

    Attributes:
        routing: the router's :class:`~llmviz.moe.Routing` (logits, probs, indices, weights).
        plan: the :class:`~llmviz.moe.dispatch.DispatchPlan` (``load``, ``kept``, ``capacity``).
    """

    routing: Routing
    plan: DispatchPlan

    @property
    def load(self) -> torch.Tensor:
        """``(E,)`` assignments each expert was asked to take."""
        return self.plan.load

    @property
    def n_dropped(self) -> int:
        """Assignments the capacity dropped (0 without a capacity)."""
        return self.plan.n_dropped

    @property
    def dropped_fraction(self) -> float:
        """Dropped assignments over all ``N * k``."""
        return self.n_dropped / max(self.plan.kept.numel(), 1)


class MoELayer(nn.Module):
    """A sparse mixture-of-experts feed-forward layer (Mixtral, Qwen3-MoE, DeepSeek-V3 style).

    Args:
        d_model: model width C.
        n_experts: routed experts E.
        top_k: k experts per token.
        d_expert: hidden width F of one routed expert.
        n_shared: shared experts (DeepSeek: 1); they are one GatedMLP of width
            ``n_shared * d_expert`` that every token passes through, unweighted.
        d_shared: that width, if different (default ``n_shared * d_expert``).
        activation: gate activation of every expert.
        score, normalize, scaling, n_groups, topk_groups, bias_balancing, bias_rate: the router's
            (see :class:`~llmviz.moe.Router`).
        capacity_factor: None (no limit) or > 0; each expert takes at most
            ``ceil(factor * N * k / E)`` assignments per call and the overflow is dropped.
        shared_gate: scale the shared experts' output by ``sigmoid(shared_expert_gate(x))``, a
            learned per-token scalar (Qwen2-MoE, Qwen3-Next; ``shared_expert_gate`` is a
            bias-free ``Linear(C, 1)``).
        router_bias: a bias on the router logits (gpt-oss's ``router.bias``).
        expert_bias, glu, glu_alpha, glu_limit: the experts' (see :class:`Experts`).

    ``forward(x, *, return_info=False)``: ``x (..., C)`` -> same shape, or ``(out, MoEInfo)``.

    Training with balancing: take ``out, info = layer(x, return_info=True)``, add
    ``coef * load_balancing_loss(info.routing.probs, info.routing.indices)`` (and/or
    ``router_z_loss(info.routing.logits)``) to the loss; with ``bias_balancing``, call
    ``layer.gate.update_bias(info.load)`` after each optimiser step instead.
    """

    def __init__(
        self, d_model: int, n_experts: int, top_k: int, d_expert: int, *, n_shared: int = 0,
        d_shared: int | None = None, activation: str = "silu", score: str = "softmax",
        normalize: bool = True, scaling: float = 1.0, n_groups: int | None = None,
        topk_groups: int | None = None, bias_balancing: bool = False, bias_rate: float = 1e-3,
        capacity_factor: float | None = None, shared_gate: bool = False, router_bias: bool = False,
        expert_bias: bool = False, glu: str = "standard", glu_alpha: float = 1.702, glu_limit: float = 7.0,
    ) -> None:
        check_flags(normalize=normalize, bias_balancing=bias_balancing, shared_gate=shared_gate,
                    router_bias=router_bias, expert_bias=expert_bias)
        super().__init__()
        check_positive_int(n_shared, "n_shared", allow_zero=True)
        if capacity_factor is not None:
            check_positive(capacity_factor, "capacity_factor")
        self.gate = Router(
            d_model, n_experts, top_k, score=score, normalize=normalize, scaling=scaling,
            n_groups=n_groups, topk_groups=topk_groups, bias_balancing=bias_balancing,
            bias_rate=bias_rate, logit_bias=router_bias,
        )
        self.experts = Experts(n_experts, d_model, d_expert, activation_name=activation,
                               bias=expert_bias, glu=glu, alpha=glu_alpha, limit=glu_limit)
        if n_shared or d_shared:
            width = d_shared if d_shared is not None else n_shared * d_expert
            self.shared_experts = GatedMLP(d_model, width, activation=activation)
        else:
            self.shared_experts = None
        if shared_gate and self.shared_experts is None:
            raise ValueError("shared_gate=True needs shared experts: set n_shared or d_shared")
        self.shared_expert_gate = nn.Linear(d_model, 1, bias=False) if shared_gate else None
        self.d_model, self.n_experts, self.top_k, self.d_expert = d_model, n_experts, top_k, d_expert
        self.capacity_factor = None if capacity_factor is None else float(capacity_factor)

    def forward(
        self, x: torch.Tensor, *, return_info: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, MoEInfo]:
        check_flags(return_info=return_info)
        check_tensor(x, "x", min_ndim=1, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x has width {x.shape[-1]} but the layer was built for d_model={self.d_model}")
        check_dtype_matches(x, self.experts.gate_up_proj, "MoELayer")
        flat = x.reshape(-1, self.d_model)  # (N, C)
        N = flat.shape[0]
        routing = self.gate(flat)
        capacity = None if self.capacity_factor is None else expert_capacity(
            N, self.top_k, self.n_experts, self.capacity_factor)
        plan = plan_dispatch(routing.indices, self.n_experts, capacity=capacity)
        rows = self.experts(flat[plan.tokens], plan.counts)  # (M, C), grouped by expert
        out = combine(rows, plan, routing.weights, N)  # (N, C)
        if self.shared_experts is not None:
            shared = self.shared_experts(flat)  # (N, C)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(flat)) * shared
            out = out + shared
        out = out.view(x.shape)
        return (out, MoEInfo(routing, plan)) if return_info else out

    def parameter_counts(self) -> dict[str, int]:
        """Total parameters, and those one token uses (router + k experts + shared experts)."""
        per_expert = sum(p[0].numel() for p in self.experts.parameters())
        shared = sum(p.numel() for p in self.shared_experts.parameters()) if self.shared_experts else 0
        if self.shared_expert_gate is not None:
            shared += self.shared_expert_gate.weight.numel()
        router = sum(p.numel() for p in self.gate.parameters())
        return {
            "total": router + shared + self.n_experts * per_expert,
            "active": router + shared + self.top_k * per_expert,
            "per_expert": per_expert,
            "shared": shared,
            "router": router,
        }

    def extra_repr(self) -> str:
        cap = f", capacity_factor={self.capacity_factor:g}" if self.capacity_factor else ""
        return f"d_model={self.d_model}, d_expert={self.d_expert}{cap}"


def fine_grained(n_experts: int, d_expert: int, top_k: int, m: int) -> dict[str, int]:
    """Split every expert into ``m`` narrower ones (DeepSeekMoE's fine-grained segmentation).

    ``E -> m E`` experts of width ``F / m``, each token picking ``m k`` of them: total and
    active expert parameters stay the same, while the number of expert combinations a token
    can use grows from ``C(E, k)`` to ``C(mE, mk)``.

    Returns:
        ``{"n_experts", "d_expert", "top_k", "combinations"}`` for :class:`MoELayer`.
    """
    for name, v in (("n_experts", n_experts), ("d_expert", d_expert), ("top_k", top_k), ("m", m)):
        check_positive_int(v, name)
    if d_expert % m:
        raise ValueError(f"d_expert ({d_expert}) must be divisible by m ({m}) to split experts evenly")
    if top_k > n_experts:
        raise ValueError(f"top_k ({top_k}) must be <= n_experts ({n_experts})")
    return {"n_experts": n_experts * m, "d_expert": d_expert // m, "top_k": top_k * m,
            "combinations": math.comb(n_experts * m, top_k * m)}
