"""Feed-forward networks and their activations: the MLP and the gated (GLU) family.

Shapes: inputs ``(..., C)`` with C = ``d_model``; the hidden layer has ``d_ff`` units.

* ``MLP``: ``down_proj(act(up_proj(x)))``, two matrices (GPT-2: GELU, ``d_ff = 4 C``).
* ``GatedMLP``: ``down_proj(act(gate_proj(x)) * up_proj(x))``, three matrices. With ReLU,
  GELU or SiLU as ``act`` it is ReGLU, GeGLU or SwiGLU (Shazeer 2020, "GLU Variants Improve
  Transformer"; the gate idea is Dauphin et al. 2017). To keep the parameter count of a
  ``4 C`` MLP, the hidden size shrinks to ``2/3 * 4 C``: see :func:`glu_hidden_size`.

Activations (Hendrycks & Gimpel 2016 for GELU; Ramachandran et al. 2017 for Swish;
So et al. 2021, "Primer", for squared ReLU): ``relu``, ``gelu`` (exact, with erf),
``gelu_tanh`` (the tanh approximation GPT-2 used), ``silu`` (= Swish with beta 1),
``swish`` (``x * sigmoid(beta x)``, beta fixed or learned) and ``relu2`` (``relu(x) ** 2``).
Parameter names follow Hugging Face Llama (``gate_proj``, ``up_proj``, ``down_proj``).

line budget: the activations, the two layer kinds and their one registry, as the design lists them.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import (check_choice, check_flags, check_hidden, check_positive, check_positive_int,
                      check_real, check_tensor)
from ._registry import Registry

__all__ = [
    "relu", "gelu", "gelu_tanh", "silu", "swish", "relu2", "ACTIVATION_FNS", "FFN_ACTIVATIONS",
    "Activation", "Swish", "activation", "activation_curve", "MLP", "GatedMLP", "glu_hidden_size",
    "make_ffn", "FFN_KINDS", "FFNS", "output_rms", "match_output_rms_",
]


# ----------------------------------------------------------------------------- activations
def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    check_tensor(x, "x", floating=True)
    return torch.clamp_min(x, 0.0)


def gelu(x: Tensor) -> Tensor:
    """Exact GELU: ``x * Phi(x)`` with the normal CDF ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``."""
    check_tensor(x, "x", floating=True)
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation (GPT-2, HF ``gelu_new``/``gelu_pytorch_tanh``)."""
    check_tensor(x, "x", floating=True)
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def silu(x: Tensor) -> Tensor:
    """SiLU: ``x * sigmoid(x)``, i.e. Swish with beta = 1."""
    check_tensor(x, "x", floating=True)
    return x * torch.sigmoid(x)


def swish(x: Tensor, beta: float | Tensor = 1.0) -> Tensor:
    """Swish: ``x * sigmoid(beta * x)``. beta -> 0 gives ``x / 2``; beta -> inf gives ReLU;
    beta = 1.702 is close to GELU."""
    check_tensor(x, "x", floating=True)
    if not isinstance(beta, Tensor):
        check_real(beta, "beta")
    return x * torch.sigmoid(beta * x)


def relu2(x: Tensor) -> Tensor:
    """Squared ReLU: ``relu(x) ** 2`` (Primer)."""
    check_tensor(x, "x", floating=True)
    return torch.clamp_min(x, 0.0).pow(2)


#: Name -> function of every activation :func:`activation` builds (``"swish"`` takes ``beta``).
ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": relu,
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "silu": silu,
    "swish": swish,
    "relu2": relu2,
}
#: The registry of activation names a feed-forward (:class:`Activation`, :func:`make_ffn`,
#: ``ModelConfig.activation``) accepts: those without a parameter (Swish has ``beta``).
FFN_ACTIVATIONS: tuple[str, ...] = tuple(k for k in ACTIVATION_FNS if k != "swish")

# The faster torch kernels computing the same functions (tested equal).
_FUSED: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


class Activation(nn.Module):
    """A named activation as a module (so it prints and can sit in ``nn.Sequential``).

    Args:
        name: one of ``relu, gelu, gelu_tanh, silu, relu2``.
        fused: use the torch kernel where one exists (same values as the formula).
    """

    def __init__(self, name: str, *, fused: bool = True) -> None:
        check_flags(fused=fused)
        super().__init__()
        check_choice(name, "activation", FFN_ACTIVATIONS)
        self.name = name
        self.fn = _FUSED.get(name, ACTIVATION_FNS[name]) if fused else ACTIVATION_FNS[name]

    def forward(self, x: Tensor) -> Tensor:
        check_tensor(x, "x", floating=True)
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.name


class Swish(nn.Module):
    """``x * sigmoid(beta * x)`` with a fixed or learnable scalar beta.

    Args:
        beta: the (initial) value; 1.0 makes it SiLU.
        learnable: make beta an ``nn.Parameter`` (initialised to ``beta``, 1.0 by default:
            a deterministic start that equals SiLU, not a random draw).
    """

    def __init__(self, beta: float = 1.0, *, learnable: bool = False) -> None:
        check_flags(learnable=learnable)
        super().__init__()
        check_real(beta, "beta")
        self.learnable = learnable
        if learnable:
            self.beta = nn.Parameter(torch.tensor(float(beta)))
        else:
            self.register_buffer("beta", torch.tensor(float(beta)), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return swish(x, self.beta.to(x.dtype))

    def extra_repr(self) -> str:
        return f"beta={float(self.beta):g}, learnable={self.learnable}"


def activation(name: str, *, beta: float = 1.0, learnable: bool = False) -> nn.Module:
    """Activation module by name: ``relu``, ``gelu``, ``gelu_tanh``, ``silu``, ``swish``, ``relu2``.

    ``beta``/``learnable`` apply to ``"swish"`` only.
    """
    check_flags(learnable=learnable)
    check_choice(name, "activation", tuple(ACTIVATION_FNS))
    check_real(beta, "beta")
    if name == "swish":
        return Swish(beta, learnable=learnable)
    return Activation(name)


def activation_curve(
    act: str | Callable[[Tensor], Tensor], x: Tensor, *, beta: float = 1.0
) -> tuple[Tensor, Tensor]:
    """An activation and its derivative on the points ``x``, the derivative by autograd.

    Args:
        act: a name from :data:`ACTIVATION_FNS` (``beta`` applies to ``"swish"``) or any
            elementwise function.
        x: ``(N,)`` floating points to evaluate at.

    Returns:
        ``(act(x), d act / dx)``, both ``(N,)`` and detached.
    """
    check_tensor(x, "x", ndim=1, floating=True)
    fn = activation(act, beta=beta) if isinstance(act, str) else act
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        y = fn(x)
        (slope,) = torch.autograd.grad(y.sum(), x)  # elementwise act: d sum / dx_i = act'(x_i)
    return y.detach(), slope


def _check_dropout(p: float) -> float:
    check_real(p, "dropout")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {p}; use 0.0 to switch it off")
    return p


def _as_module(act: str | nn.Module | Callable) -> nn.Module:
    if isinstance(act, str):
        return activation(act)
    if isinstance(act, nn.Module):
        return act
    if callable(act):
        return _Lambda(act)
    raise TypeError(f"activation must be a name, an nn.Module or a callable, got {type(act).__name__}")


class _Lambda(nn.Module):
    def __init__(self, fn: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x)


# ----------------------------------------------------------------------------- blocks
class MLP(nn.Module):
    """Two-layer feed-forward network ``down_proj(act(up_proj(x)))``.

    Args:
        d_model: model width C.
        d_ff: hidden width (GPT-2: ``4 * d_model``).
        activation: a name (see :func:`activation`), a module or a callable.
        bias: biases on both projections (GPT-2: yes).
        dropout: dropout on the output (0 = off).
    """

    def __init__(
        self, d_model: int, d_ff: int, *, activation: str | nn.Module | Callable = "gelu",
        bias: bool = True, dropout: float = 0.0,
    ) -> None:
        check_flags(bias=bias)
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(d_ff, "d_ff")
        self.d_model, self.d_ff = d_model, d_ff
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.act = _as_module(activation)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(_check_dropout(dropout))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_hidden(x, self.d_model, self.up_proj.weight, "MLP")
        return self.dropout(self.down_proj(self.act(self.up_proj(x))))


class GatedMLP(nn.Module):
    """Gated feed-forward ``down_proj(act(gate_proj(x)) * up_proj(x))`` (the GLU family).

    ``activation="silu"`` is SwiGLU (Llama, Mistral), ``"gelu"``/``"gelu_tanh"`` GeGLU (Gemma
    uses the tanh form), ``"relu"`` ReGLU. Same computation as Hugging Face ``LlamaMLP``.

    Args:
        d_model: model width C.
        d_ff: hidden width; :func:`glu_hidden_size` gives the parameter-matched value.
        activation: applied to the gate branch.
        bias: biases on the three projections (Llama: none).
        dropout: dropout on the output.
    """

    def __init__(
        self, d_model: int, d_ff: int, *, activation: str | nn.Module | Callable = "silu",
        bias: bool = False, dropout: float = 0.0,
    ) -> None:
        check_flags(bias=bias)
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(d_ff, "d_ff")
        self.d_model, self.d_ff = d_model, d_ff
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.act = _as_module(activation)
        self.dropout = nn.Dropout(_check_dropout(dropout))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C) -> (..., C)``."""
        check_hidden(x, self.d_model, self.up_proj.weight, "GatedMLP")
        return self.dropout(self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x)))


def glu_hidden_size(
    d_model: int, *, mult: int = 4, multiple_of: int = 1, ffn_dim_multiplier: float | None = None
) -> int:
    """Hidden size of a gated MLP with the parameters of a ``mult * d_model`` MLP.

    A plain MLP has ``2 * C * (mult C)`` weights, a gated one ``3 * C * h``; equal when
    ``h = 2/3 * mult * C``. Meta's Llama code computes it as::

        hidden = int(2 * (mult * d_model) / 3)
        if ffn_dim_multiplier is not None:         # Llama 2 34B/70B, Llama 3
            hidden = int(ffn_dim_multiplier * hidden)
        hidden = multiple_of * ceil(hidden / multiple_of)   # round UP for fast kernels

    e.g. Llama 7B: d_model 4096, multiple_of 256 -> 11008.

    Args:
        d_model: model width C.
        mult: the plain MLP's expansion (4).
        multiple_of: round the result up to a multiple of this (1 = no rounding).
        ffn_dim_multiplier: Llama's optional extra factor.
    """
    check_positive_int(d_model, "d_model")
    check_positive_int(mult, "mult")
    check_positive_int(multiple_of, "multiple_of")
    hidden = int(2 * (mult * d_model) / 3)
    if ffn_dim_multiplier is not None:
        check_positive(ffn_dim_multiplier, "ffn_dim_multiplier")
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def _ffn_params(gated: bool) -> Callable[..., int]:
    """Closed form of a feed-forward's parameters: 2CF (+F+C) or 3CF (+2F+C) with biases."""
    def params(d_model: int, d_ff: int, *, bias: bool | None = None, **_: object) -> int:
        bias = (not gated) if bias is None else bias
        return (3 if gated else 2) * d_model * d_ff + ((2 if gated else 1) * d_ff + d_model if bias else 0)
    return params


#: The registry of feed-forward kinds: ``build(d_model, d_ff, activation=, bias=, dropout=)``,
#: ``params(d_model, d_ff, bias=)``, and the kind's default ``activation`` (in ``info``).
FFNS = Registry("ffn kind")
FFNS.register("mlp", build=lambda C, F, *, bias=None, **kw: MLP(C, F, bias=True if bias is None else bias, **kw),
              params=_ffn_params(False), summary="two matrices (GPT-2)", activation="gelu")
for _name, _act in (("swiglu", "silu"), ("geglu", "gelu"), ("reglu", "relu")):
    FFNS.register(_name, build=lambda C, F, *, bias=None, **kw: GatedMLP(C, F, bias=bool(bias), **kw),
                  params=_ffn_params(True), summary=f"gated, {_act}", activation=_act)
#: Names accepted by :func:`make_ffn` -> default activation (read from :data:`FFNS`).
FFN_KINDS = {name: kind.info["activation"] for name, kind in FFNS.items()}


def make_ffn(
    kind: str, d_model: int, d_ff: int, *, activation: str | nn.Module | None = None,
    bias: bool | None = None, dropout: float = 0.0,
) -> nn.Module:
    """Build a feed-forward block by name.

    Args:
        kind: one of :data:`FFNS`: ``"mlp"`` (GELU by default, bias by default), or a gated
            kind ``"swiglu"``, ``"geglu"``, ``"reglu"`` (no bias by default).
        d_model, d_ff: widths.
        activation: override the kind's activation (e.g. ``"gelu_tanh"`` for Gemma's GeGLU,
            ``"relu2"`` for a Primer MLP).
        bias: override the kind's bias default.
        dropout: output dropout.
    """
    entry = FFNS.kind(kind)
    act = activation if activation is not None else entry.info["activation"]
    return entry.build(d_model, d_ff, activation=act, bias=bias, dropout=dropout)


# ----------------------------------------------------------------------------- init scale
def _down_proj(ffn: nn.Module, name: str) -> nn.Linear:
    down = getattr(ffn, "down_proj", None)
    if not isinstance(down, nn.Linear):
        raise TypeError(
            f"{name} must be a feed-forward with a down_proj Linear (MLP or GatedMLP), "
            f"got {type(ffn).__name__}"
        )
    return down


@torch.no_grad()
def output_rms(ffn: nn.Module, x: Tensor) -> float:
    """Root mean square of ``ffn(x)`` over every element: the size of what the block adds to
    the residual stream for inputs ``x`` ``(..., C)``."""
    _down_proj(ffn, "ffn")
    check_tensor(x, "x", floating=True)
    return float(ffn(x).pow(2).mean().sqrt())


@torch.no_grad()
def match_output_rms_(ffn: nn.Module, reference: nn.Module, x: Tensor) -> float:
    """Scale ``ffn.down_proj`` in place so that ``output_rms(ffn, x) == output_rms(reference, x)``.

    At a small initialisation (std 0.02) a gated MLP multiplies two small pre-activations, so
    its output starts several times smaller than a plain MLP's; this removes that difference
    without changing what the block computes up to a scale (the output is linear in
    ``down_proj``; with a bias on ``down_proj`` the bias is scaled too). Returns the factor.

    Raises:
        TypeError: a module without a ``down_proj`` Linear, or ``x`` not a float tensor.
        ValueError: ``ffn``'s output is exactly zero on ``x`` (nothing to scale).
    """
    down = _down_proj(ffn, "ffn")
    _down_proj(reference, "reference")
    have, want = output_rms(ffn, x), output_rms(reference, x)
    if have == 0.0:
        raise ValueError("ffn's output is exactly zero on x, so no scale can match the reference; "
                         "pass inputs the block responds to (e.g. torch.randn(..., C))")
    factor = want / have
    down.weight.mul_(factor)
    if down.bias is not None:
        down.bias.mul_(factor)
    return factor
