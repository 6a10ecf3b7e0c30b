"""The Gated DeltaNet layer: the delta rule of :mod:`.linear` inside Qwen3-Next's token mixer.

Around the scan sit a short causal convolution over q, k and v, unit-length q and k, a
data-dependent gate and write strength, and an output gate; :class:`DeltaState` is all the
layer carries from one call to the next (a fixed size, where softmax attention keeps a cache
that grows with every token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_hidden, check_positive_int
from .linear import gated_delta_rule, l2_normalize

__all__ = ["DeltaState", "GatedDeltaNet"]


@dataclass
class DeltaState:
    """What a :class:`GatedDeltaNet` layer carries between calls: a fixed size, whatever T.

    ``conv`` holds the last ``kernel - 1`` inputs of the short causal convolution
    ``(B, channels, kernel - 1)``; ``recurrent`` is the delta-rule state ``(B, H_v, D_k, D_v)``.
    """

    conv: Tensor
    recurrent: Tensor

    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size() + (
            self.recurrent.numel() * self.recurrent.element_size())


class GatedDeltaNet(nn.Module):
    """A Gated DeltaNet token mixer in the form Qwen3-Next uses (Yang et al., 2024).

    For each token: project to queries, keys and values (``n_k_heads`` query/key heads, each
    shared by ``n_v_heads / n_k_heads`` value heads, like grouped-query attention turned
    around), run them through a short causal depthwise convolution and SiLU, normalise q and k
    to unit length, and feed the delta rule with a write strength ``beta = sigmoid(b_proj x)``
    and a gate ``log a = -exp(A_log) * softplus(a_proj x + dt_bias)`` (a learned per-head
    rate times a data-dependent step, as in Mamba). The read-out is RMS-normalised per head and
    multiplied by ``silu(z_proj x)``, an output gate, before ``o_proj``.

    ``forward(x, state=None, return_state=False)``: ``x (B, T, C) -> (B, T, C)``; with
    ``return_state=True`` also the :class:`DeltaState` to continue from (decoding one token at a
    time uses the recurrent form, longer inputs the chunked one; the two agree).
    """

    def __init__(
        self,
        d_model: int,
        n_v_heads: int,
        d_head_k: int,
        d_head_v: int | None = None,
        *,
        n_k_heads: int | None = None,
        conv_kernel: int = 4,
        eps: float = 1e-6,
        chunk_size: int = 64,
    ) -> None:
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_positive_int(n_v_heads, "n_v_heads")
        check_positive_int(d_head_k, "d_head_k")
        d_head_v = d_head_k if d_head_v is None else check_positive_int(d_head_v, "d_head_v")
        n_k_heads = n_v_heads if n_k_heads is None else check_positive_int(n_k_heads, "n_k_heads")
        if n_v_heads % n_k_heads:
            raise ValueError(f"n_v_heads={n_v_heads} must be a multiple of n_k_heads={n_k_heads} "
                             f"(each query/key head serves a whole group of value heads)")
        check_positive_int(conv_kernel, "conv_kernel")
        check_positive_int(chunk_size, "chunk_size")
        self.d_model, self.n_v_heads, self.n_k_heads = d_model, n_v_heads, n_k_heads
        self.d_head_k, self.d_head_v = d_head_k, d_head_v
        self.conv_kernel, self.eps, self.chunk_size = conv_kernel, eps, chunk_size
        key_dim, value_dim = n_k_heads * d_head_k, n_v_heads * d_head_v
        self.q_proj = nn.Linear(d_model, key_dim, bias=False)
        self.k_proj = nn.Linear(d_model, key_dim, bias=False)
        self.v_proj = nn.Linear(d_model, value_dim, bias=False)
        self.z_proj = nn.Linear(d_model, value_dim, bias=False)   # output gate
        self.b_proj = nn.Linear(d_model, n_v_heads, bias=False)   # write strength
        self.a_proj = nn.Linear(d_model, n_v_heads, bias=False)   # step of the forget gate
        self.conv_dim = 2 * key_dim + value_dim
        self.conv = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim,
                              bias=False)
        self.A_log = nn.Parameter(torch.empty(n_v_heads).uniform_(1.0, 16.0).log())
        self.dt_bias = nn.Parameter(torch.ones(n_v_heads))
        self.norm_weight = nn.Parameter(torch.ones(d_head_v))
        self.o_proj = nn.Linear(value_dim, d_model, bias=False)

    def new_state(self, batch: int, *, device=None, dtype=None) -> DeltaState:
        """An empty state: zero convolution history and a zero delta-rule state."""
        w = self.o_proj.weight
        device, dtype = device or w.device, dtype or w.dtype
        return DeltaState(
            torch.zeros(batch, self.conv_dim, self.conv_kernel - 1, device=device, dtype=dtype),
            torch.zeros(batch, self.n_v_heads, self.d_head_k, self.d_head_v, device=device,
                        dtype=dtype),
        )

    def forward(self, x: Tensor, state: DeltaState | None = None, return_state: bool = False):
        check_hidden(x, self.d_model, self.o_proj.weight, "GatedDeltaNet", ndim=3)
        B, T, _ = x.shape
        Hk, Hv, Dk, Dv = self.n_k_heads, self.n_v_heads, self.d_head_k, self.d_head_v
        if state is not None and state.conv.shape != (B, self.conv_dim, self.conv_kernel - 1):
            raise ValueError(f"state.conv has shape {tuple(state.conv.shape)}, expected "
                             f"{(B, self.conv_dim, self.conv_kernel - 1)}: a state from "
                             f"new_state({B}) or from a call on a batch of {B}")
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1).transpose(1, 2)
        history = (state.conv if state is not None
                   else mixed.new_zeros(B, self.conv_dim, self.conv_kernel - 1))
        padded = torch.cat([history, mixed], -1)                 # (B, channels, K - 1 + T)
        mixed = F.silu(F.conv1d(padded, self.conv.weight, groups=self.conv_dim))
        q, k, v = mixed.transpose(1, 2).split([Hk * Dk, Hk * Dk, Hv * Dv], -1)
        q = q.reshape(B, T, Hk, Dk).transpose(1, 2)
        k = k.reshape(B, T, Hk, Dk).transpose(1, 2)
        v = v.reshape(B, T, Hv, Dv).transpose(1, 2)
        if Hv != Hk:  # each query/key head serves Hv / Hk consecutive value heads
            q, k = (t.repeat_interleave(Hv // Hk, dim=1) for t in (q, k))
        up = torch.float64 if x.dtype == torch.float64 else torch.float32  # norms and gates
        q, k = l2_normalize(q.to(up)).to(x.dtype), l2_normalize(k.to(up)).to(x.dtype)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)     # (B, Hv, T)
        log_decay = (-self.A_log.to(up).exp()
                     * F.softplus(self.a_proj(x).to(up) + self.dt_bias.to(up))).transpose(1, 2)
        recurrent = state.recurrent if state is not None else None
        form = "recurrent" if T == 1 else "chunked"
        out, new_rec = gated_delta_rule(q, k, v, beta.to(x.dtype), log_decay.to(x.dtype),
                                        state=recurrent, form=form, chunk_size=self.chunk_size)
        out = out.transpose(1, 2)                                # (B, T, Hv, Dv)
        o32 = out.to(up)
        o32 = o32 * torch.rsqrt(o32.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.norm_weight * o32.to(x.dtype)
        z = self.z_proj(x).reshape(B, T, Hv, Dv)
        out = (out * F.silu(z.to(up))).to(x.dtype).reshape(B, T, Hv * Dv)
        y = self.o_proj(out)
        if not return_state:
            return y
        return y, DeltaState(padded[..., padded.shape[-1] - (self.conv_kernel - 1):], new_rec)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_v_heads={self.n_v_heads}, n_k_heads={self.n_k_heads}, "
                f"d_head_k={self.d_head_k}, d_head_v={self.d_head_v}, conv_kernel={self.conv_kernel}")
