"""Kimi Delta Attention as a token mixer: the layer around :func:`llmviz.attention.kda.kimi_delta_rule`.

Kimi Linear puts it in three of every four layers (latent attention in the fourth). Per token,
with ``H`` heads of width ``D``:

    q, k, v = silu(conv(q_proj x | k_proj x | v_proj x))      short causal depthwise convolution
    q, k    = q / sqrt(|q|^2 + 1e-6), the same for k          unit length, per head
    log a   = -exp(A_log) * softplus(f_b(f_a x) + dt_bias)    one gate per head AND key channel
    beta    = sigmoid(b_proj x)                                one write strength per head
    o       = kimi_delta_rule(q, k, v, beta, log a)            the per-channel gated delta rule
    y       = o_proj(RMSNorm(o) * w * sigmoid(g_b(g_a x)))     per-head norm, output gate

The gate's input and the output gate each pass a rank-``D`` bottleneck (``f_a``/``g_a``: C -> D,
``f_b``/``g_b``: D -> H D), so the per-channel gate costs ``2 C D + 2 D H D`` weights rather
than ``2 C H D``. Compared with Qwen3-Next's :class:`~llmviz.attention.deltanet.GatedDeltaNet`:
one gate value per key channel instead of one per head, a sigmoid output gate instead of a
SiLU one, and no grouping of query/key heads. ``A_log`` is stored per head (transformers keeps
it as ``(1, 1, H, 1)``).

The arithmetic follows transformers' ``KimiLinearDeltaAttention`` in its PyTorch path (the one
it runs without the ``fla`` kernels): the gate, the norms and the scan in float32 (float64 stays
float64), prefill and multi-token calls in the chunked form, single-token decoding with a state
in the recurrent one. The layer takes the keyword arguments a block passes its attention
(``mask`` a ``(B, 1, 1, S)`` key-padding mask: padded positions are zeroed first, as
transformers does); its decoding state (:class:`~llmviz.attention.deltanet.DeltaState`: the
convolution's last ``kernel - 1`` inputs and the ``(B, H, D, D)`` delta-rule state) lives in
the model's cache (:meth:`~llmviz.attention.kv_cache.KVCache.set_linear_state`), a fixed size
whatever the length. It has no attention weights (``None`` when asked for).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._checks import check_flags, check_hidden, check_int_in, check_positive, check_positive_int
from .deltanet import DeltaState
from .kda import kimi_delta_rule

__all__ = ["KimiDeltaAttention", "kda_params"]


def kda_params(d_model: int, n_heads: int, head_dim: int, conv_kernel: int = 4) -> int:
    """``3 C HD`` (q, k, v) ``+ 3 HD K`` (convolution) ``+ 2 (C D + D HD)`` (gate and output-gate
    bottlenecks) ``+ HD + H`` (dt_bias, A_log) ``+ C H`` (b_proj) ``+ D`` (norm) ``+ HD C`` (o_proj)."""
    C, H, D = (check_positive_int(v, n) for v, n in ((d_model, "d_model"), (n_heads, "n_heads"),
                                                      (head_dim, "head_dim")))
    K, HD = check_positive_int(conv_kernel, "conv_kernel"), n_heads * head_dim
    return 3 * C * HD + 3 * HD * K + 2 * (C * D + D * HD) + HD + H + C * H + D + HD * C


def _softplus(x: Tensor) -> Tensor:
    """``log(1 + e^x)``, ``x`` itself above 20: transformers' forget gate writes it so."""
    return torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))


def _unit(x: Tensor) -> Tensor:
    """``x / sqrt(|x|^2 + 1e-6)`` over the last axis (the fla kernels' l2norm)."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


class KimiDeltaAttention(nn.Module):
    """Kimi Delta Attention (module docstring).

    Args:
        d_model: C.
        n_heads: H (queries, keys and values alike).
        head_dim: D (keys and values alike; also the rank of the two gate bottlenecks).
        conv_kernel: taps of the short causal convolution (Kimi Linear: 4).
        eps: epsilon of the per-head output RMSNorm (transformers: ``rms_norm_eps``).
        chunk_size: tokens per chunk of the chunked form.

    ``forward(x, *, mask=None, cache=None, layer_idx=0, return_weights=False)``:
    ``x (B, T, C) -> (B, T, C)``, or ``(out, None)`` with ``return_weights``.
    """

    def __init__(self, d_model: int, n_heads: int, head_dim: int, *, conv_kernel: int = 4,
                 eps: float = 1e-6, chunk_size: int = 64) -> None:
        super().__init__()
        C, H, D = d_model, n_heads, head_dim
        kda_params(C, H, D, conv_kernel)  # checks the sizes
        check_positive(eps, "eps")
        self.d_model, self.n_heads, self.head_dim = C, H, D
        self.conv_kernel, self.eps = conv_kernel, float(eps)
        self.chunk_size = check_positive_int(chunk_size, "chunk_size")
        HD = H * D
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(C, HD, bias=False) for _ in range(3))
        self.conv = nn.Conv1d(3 * HD, 3 * HD, conv_kernel, groups=3 * HD, bias=False)
        self.f_a_proj, self.f_b_proj = nn.Linear(C, D, bias=False), nn.Linear(D, HD, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(HD))
        self.A_log = nn.Parameter(torch.empty(H).uniform_(1.0, 16.0).log())
        self.b_proj = nn.Linear(C, H, bias=False)
        self.g_a_proj, self.g_b_proj = nn.Linear(C, D, bias=False), nn.Linear(D, HD, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(D))
        self.o_proj = nn.Linear(HD, C, bias=False)
        with torch.no_grad():  # the step of Mamba's gate: softplus(dt_bias) in [1e-3, 1e-1]
            dt = torch.empty(HD).uniform_(-6.907755, -2.302585).exp().clamp_min(1e-4)
            self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def new_state(self, batch: int, *, device=None, dtype=None) -> DeltaState:
        """An empty state: zero convolution history, a zero (float32 or float64) delta-rule state."""
        check_positive_int(batch, "batch")
        w = self.o_proj.weight
        device, dtype = device or w.device, dtype or w.dtype
        up = torch.float64 if dtype == torch.float64 else torch.float32
        H, D = self.n_heads, self.head_dim
        return DeltaState(torch.zeros(batch, 3 * H * D, self.conv_kernel - 1, device=device, dtype=dtype),
                          torch.zeros(batch, H, D, D, device=device, dtype=up))

    def log_decay(self, x: Tensor) -> Tensor:
        """``log a (B, T, H, D)``: each head's and key channel's forget gate, in float32 (float64)."""
        check_hidden(x, self.d_model, self.o_proj.weight, "KimiDeltaAttention", ndim=3)
        up = torch.float64 if x.dtype == torch.float64 else torch.float32
        B, T, _ = x.shape
        step = self.f_b_proj(self.f_a_proj(x)).to(up) + self.dt_bias.to(up)
        rate = self.A_log.to(up).exp()[:, None]                         # (H, 1)
        return -rate * _softplus(step.view(B, T, self.n_heads, self.head_dim))

    def forward(self, x: Tensor, *, mask: Tensor | None = None, score_bias: Tensor | None = None,
                positions: Tensor | None = None, cache=None, layer_idx: int = 0,
                return_weights: bool = False):
        check_hidden(x, self.d_model, self.o_proj.weight, "KimiDeltaAttention", ndim=3)
        check_flags(return_weights=return_weights)
        check_int_in(layer_idx, "layer_idx", 0)
        if score_bias is not None:
            raise ValueError(f"layer {layer_idx} is Kimi delta attention: it has no scores to add "
                             "score_bias to")
        B, T, _ = x.shape
        H, D, K = self.n_heads, self.head_dim, self.conv_kernel
        if mask is not None:
            if not isinstance(mask, Tensor) or mask.dim() != 4 or mask.shape[1:3] != (1, 1) or (
                    mask.shape[0] not in (1, B) or mask.shape[3] < T):
                raise ValueError(f"layer {layer_idx} is Kimi delta attention: it takes a key-padding "
                                 f"mask (B, 1, 1, S) with S >= T = {T}, got "
                                 f"{tuple(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__}")
            x = x * mask[:, 0, 0, mask.shape[3] - T:, None].to(x.dtype)
        state = None if cache is None else cache.linear_state(layer_idx)
        if state is not None and (not isinstance(state, DeltaState)
                                  or state.conv.shape != (B, 3 * H * D, K - 1)):
            raise ValueError(f"the cache's state of layer {layer_idx} is not a KimiDeltaAttention "
                             f"state for a batch of {B}; start a new cache (model.new_cache())")
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1).transpose(1, 2)
        history = state.conv if state is not None else mixed.new_zeros(B, 3 * H * D, K - 1)
        padded = torch.cat([history, mixed], -1)                        # (B, 3HD, K - 1 + T)
        mixed = F.silu(F.conv1d(padded, self.conv.weight, groups=3 * H * D))
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in mixed.transpose(1, 2).split(H * D, -1))
        up = torch.float64 if x.dtype == torch.float64 else torch.float32
        beta = torch.sigmoid(self.b_proj(x)).to(up).transpose(1, 2)    # (B, H, T)
        log_a = self.log_decay(x).transpose(1, 2)                       # (B, H, T, D)
        form = "recurrent" if state is not None and T == 1 else "chunked"
        out, S = kimi_delta_rule(_unit(q.to(up)), _unit(k.to(up)), v.to(up), beta, log_a,
                                 state=None if state is None else state.recurrent, form=form,
                                 chunk_size=self.chunk_size)
        o = out.to(x.dtype).transpose(1, 2).to(up)                      # (B, T, H, D)
        o = self.norm_weight.to(up) * (o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + self.eps))
        gate = self.g_b_proj(self.g_a_proj(x)).view(B, T, H, D)
        o = (o * torch.sigmoid(gate.to(up))).to(x.dtype).reshape(B, T, H * D)
        if cache is not None:
            cache.set_linear_state(layer_idx, DeltaState(padded[..., padded.shape[-1] - (K - 1):], S), T)
        y = self.o_proj(o)
        return (y, None) if return_weights else y

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
                f"conv_kernel={self.conv_kernel}")
