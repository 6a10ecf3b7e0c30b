"""xIELU, a trainable activation (Huang & Schlag 2024, "Deriving Activation Functions Using
Integration"), and the plain MLP built on it (Apertus).

For ``x > 0`` it is a parabola, for ``x <= 0`` an ELU-like curve with a linear tail::

    xielu(x) = a_p x^2 + beta x                               x > 0
             = a_n (expm1(min(x, eps)) - x) + beta x          x <= 0

with ``a_p = softplus(alpha_p)`` and ``a_n = beta + softplus(alpha_n)``, so both stay positive
(and ``a_n > beta``) whatever the two trained scalars ``alpha_p``, ``alpha_n`` become.
``beta`` (0.5) and ``eps`` (-1e-6, keeps ``expm1`` off 0 for the gradient) are fixed and kept
as buffers, as transformers keeps them in checkpoints. Gradients: ``2 a_p x + beta`` on the
right, ``a_n (e^x - 1) + beta`` on the left: continuous at 0, where both are ``beta``.

The feed-forward kind ``"xielu"`` (registered by :mod:`llmviz.model.kinds_extra`) is
``down_proj(xielu(up_proj(x)))``: two matrices and the activation's two scalars.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_positive_int, check_real
from .ffn import MLP

__all__ = ["XIELU", "xielu_mlp", "xielu_mlp_params"]


def _softplus_inverse(y: float) -> float:
    return math.log(math.expm1(y))


class XIELU(nn.Module):
    """The xIELU activation with trainable ``alpha_p``, ``alpha_n`` (shape ``(1,)`` each, as
    stored by transformers) and fixed buffers ``beta``, ``eps``.

    Args:
        alpha_p_init, alpha_n_init: the initial ``a_p`` and ``a_n`` (0.8 each); ``alpha_n_init``
            must exceed ``beta``.
        beta: slope of the linear part (0.5).
        eps: the cap on ``x`` inside ``expm1`` (-1e-6).
    """

    def __init__(self, alpha_p_init: float = 0.8, alpha_n_init: float = 0.8, beta: float = 0.5,
                 eps: float = -1e-6) -> None:
        super().__init__()
        for name, value in (("alpha_p_init", alpha_p_init), ("alpha_n_init", alpha_n_init),
                            ("beta", beta), ("eps", eps)):
            check_real(value, name)
        if alpha_p_init <= 0 or alpha_n_init <= beta:
            raise ValueError(f"xIELU needs alpha_p_init > 0 and alpha_n_init > beta; got "
                             f"alpha_p_init={alpha_p_init}, alpha_n_init={alpha_n_init}, beta={beta}")
        self.alpha_p = nn.Parameter(torch.tensor([_softplus_inverse(alpha_p_init)]))
        self.alpha_n = nn.Parameter(torch.tensor([_softplus_inverse(alpha_n_init - beta)]))
        self.register_buffer("beta", torch.tensor(float(beta)))
        self.register_buffer("eps", torch.tensor(float(eps)))

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or not x.is_floating_point():
            got = f"a {x.dtype} tensor" if isinstance(x, Tensor) else type(x).__name__
            raise TypeError(f"XIELU needs a floating-point tensor, got {got}; convert it with x.float()")
        a_p = F.softplus(self.alpha_p)
        a_n = self.beta + F.softplus(self.alpha_n)
        right = a_p * x * x + self.beta * x
        left = (torch.expm1(torch.minimum(x, self.eps)) - x) * a_n + self.beta * x
        return torch.where(x > 0, right, left)


def xielu_mlp(d_model: int, d_ff: int, *, activation: str | None = None, bias: bool | None = None,
              dropout: float = 0.0) -> MLP:
    """``down_proj(xielu(up_proj(x)))`` (bias-free unless ``bias``); its activation is
    always a fresh :class:`XIELU` (``activation`` may only name it)."""
    if activation not in (None, "xielu"):
        raise ValueError(f"the 'xielu' feed-forward has its own activation; got activation={activation!r}")
    return MLP(d_model, d_ff, activation=XIELU(), bias=bool(bias), dropout=dropout)


def xielu_mlp_params(d_model: int, d_ff: int, *, bias: bool | None = None, **_: object) -> int:
    """``2 C F`` (+ ``F + C`` with biases) + the activation's 2 scalars."""
    check_positive_int(d_model, "d_model")
    check_positive_int(d_ff, "d_ff")
    return 2 * d_model * d_ff + (d_ff + d_model if bias else 0) + 2
