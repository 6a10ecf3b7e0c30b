"""The Kimi delta rule: the gated delta rule of :mod:`.linear` with one forget gate per key channel.

Gated DeltaNet (:func:`llmviz.attention.linear.gated_delta_rule`) forgets the whole state of a
head by one number per token, ``a_t = exp(log_decay_t)``. Kimi Delta Attention (KDA, Kimi
Linear) gives every key channel ``d`` of every head its own gate ``a_t[d]``: the rows of the
state ``S`` (one row per key channel, ``D_k x D_v``) fade at their own rates::

    S'_t = diag(a_t) S_{t-1}                       forget, row by row
    u_t  = b_t (v_t - S'_t^T k_t)                  what the state mispredicts for key k_t
    S_t  = S'_t + k_t u_t^T                        write the correction
    o_t  = S_t^T q_t                               read (q scaled by ``scale``, default D_k^-1/2)

A channel whose gate stays near 1 keeps a long memory while its neighbours forget within a few
tokens, which one gate per head cannot express. With ``a_t[d]`` equal across ``d`` it is Gated
DeltaNet again (a test checks it).

Two forms compute the same thing:

* :func:`kda_recurrent`: token by token, the definition above (decoding).
* :func:`kda_chunked`: chunks of ``C`` tokens. With ``G_t = sum_{j<=t} log a_j`` (per channel,
  since the chunk began) and ``S_0`` the state entering the chunk, unrolling gives
  ``S'_t = diag(e^{G_t}) S_0 + sum_{s<t} diag(e^{G_t - G_s}) k_s u_s^T``, so all ``u`` of a
  chunk solve one unit lower-triangular system
  ``(I + A) U = diag(b) V - diag(b) (K * e^G) S_0`` with
  ``A[t, s] = b_t sum_d k_t[d] k_s[d] e^{G_t[d] - G_s[d]}`` for ``s < t``; outputs and the
  next state are then matrix products. Where Gated DeltaNet's decay factors out of the dot
  product (one scalar per pair), here it sits inside it, per channel: the chunk holds a
  ``(C, C, D_k)`` table of decays, which is what the per-channel gate costs.

Shapes: ``q, k (B, H, T, D_k)``, ``v (B, H, T, D_v)``, ``beta (B, H, T)``,
``log_decay (B, H, T, D_k)``, state ``(B, H, D_k, D_v)``. The scans run in float32 (float64
stays float64), as transformers' reference does; the output comes back in the input dtype and
the state stays in the working precision (transformers keeps it in float32).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_choice, check_positive_int, check_real, check_tensor

__all__ = ["KDA_FORMS", "kda_chunked", "kda_recurrent", "kimi_delta_rule"]

#: the two forms of :func:`kimi_delta_rule`
KDA_FORMS = ("chunked", "recurrent")


def _prepare(q, k, v, beta, log_decay, state, scale):
    """Check shapes; return the inputs (q scaled) in the working precision, that precision and
    the output dtype (the input's)."""
    for name, t in (("q", q), ("k", k), ("v", v), ("beta", beta), ("log_decay", log_decay)):
        check_tensor(t, name, ndim=3 if name == "beta" else 4, floating=True)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape (B, H, T, D_k); got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must be (B, H, T, D_v) with the (B, H, T) of k; got v {tuple(v.shape)}, "
                         f"k {tuple(k.shape)}")
    if log_decay.shape != k.shape:
        raise ValueError(f"log_decay must be (B, H, T, D_k) = {tuple(k.shape)}, one gate per key "
                         f"channel; got {tuple(log_decay.shape)}")
    if beta.shape != k.shape[:3]:
        raise ValueError(f"beta must be (B, H, T) = {tuple(k.shape[:3])}; got {tuple(beta.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}; "
                        "cast them with .to(...)")
    B, H, _, Dk = k.shape
    Dv = v.shape[-1]
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = Dk ** -0.5 if scale is None else check_real(scale, "scale")
    if state is None:
        state = torch.zeros(B, H, Dk, Dv, dtype=work, device=q.device)
    else:
        check_tensor(state, "state", ndim=4, floating=True)
        if tuple(state.shape) != (B, H, Dk, Dv):
            raise ValueError(f"state must have shape (B, H, D_k, D_v) = {(B, H, Dk, Dv)}; got "
                             f"{tuple(state.shape)}")
    out_dtype = q.dtype
    q, k, v, beta, g, state = (t.to(work) for t in (q, k, v, beta, log_decay, state))
    return q * scale, k, v, beta, g, state, work, out_dtype


def kda_recurrent(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor, *,
                  state: Tensor | None = None, scale: float | None = None) -> tuple[Tensor, Tensor]:
    """The recurrence token by token: ``(out (B, H, T, D_v), final state (B, H, D_k, D_v))``."""
    q, k, v, beta, g, S, _, out_dtype = _prepare(q, k, v, beta, log_decay, state, scale)
    out = q.new_empty(*q.shape[:3], v.shape[-1])
    for t in range(q.shape[2]):
        S = S * g[:, :, t, :, None].exp()                              # diag(a_t) S
        k_t = k[:, :, t]
        u = beta[:, :, t, None] * (v[:, :, t] - (S * k_t[..., None]).sum(-2))  # b (v - S^T k)
        S = S + k_t[..., None] * u[..., None, :]                       # S += k u^T
        out[:, :, t] = (S * q[:, :, t, :, None]).sum(-2)               # o = S^T q
    return out.to(out_dtype), S


def kda_chunked(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor, *,
                state: Tensor | None = None, scale: float | None = None,
                chunk_size: int = 64) -> tuple[Tensor, Tensor]:
    """The same recurrence a chunk of ``chunk_size`` tokens at a time (module docstring); equal
    to :func:`kda_recurrent` up to rounding for any ``chunk_size`` (padding tokens neither
    write nor forget)."""
    check_positive_int(chunk_size, "chunk_size")
    q, k, v, beta, g, S, work, out_dtype = _prepare(q, k, v, beta, log_decay, state, scale)
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    C = min(chunk_size, max(T, 1))
    pad = (-T) % C
    if pad:  # q = k = v = 0, beta = 0, log decay 0
        q, k, v, g = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, g))
        beta = F.pad(beta, (0, pad))
    N = (T + pad) // C
    q, k, v, g = (x.reshape(B, H, N, C, x.shape[-1]) for x in (q, k, v, g))
    beta = beta.reshape(B, H, N, C)
    G = g.cumsum(-2)                                                   # (B, H, N, C, Dk)
    later = torch.ones(C, C, dtype=torch.bool, device=q.device).triu(1)  # s > t
    decay = (G.unsqueeze(-2) - G.unsqueeze(-3)).masked_fill(later[..., None], float("-inf")).exp()
    # decay[t, s, d] = e^{G_t[d] - G_s[d]} for s <= t, else 0
    kk = torch.einsum("bhntd,bhnsd,bhntsd->bhnts", k, k, decay)
    earlier = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)  # s < t
    A = beta.unsqueeze(-1) * kk.masked_fill(~earlier, 0.0)            # strictly lower
    eye = torch.eye(C, dtype=work, device=q.device)
    U_v = torch.linalg.solve_triangular(eye + A, beta.unsqueeze(-1) * v, upper=False, unitriangular=True)
    U_k = torch.linalg.solve_triangular(eye + A, beta.unsqueeze(-1) * k * G.exp(), upper=False,
                                        unitriangular=True)
    read = torch.einsum("bhntd,bhnsd,bhntsd->bhnts", q, k, decay)      # q_t . k_s, decayed; s <= t
    q0 = q * G.exp()                                                   # reads S_0
    k_end = k * (G[..., -1:, :] - G).exp()                             # writes the next state
    out = torch.empty(B, H, N, C, Dv, dtype=work, device=q.device)
    for n in range(N):
        U = U_v[:, :, n] - U_k[:, :, n] @ S
        out[:, :, n] = q0[:, :, n] @ S + read[:, :, n] @ U
        S = G[:, :, n, -1, :, None].exp() * S + k_end[:, :, n].transpose(-1, -2) @ U
    return out.reshape(B, H, N * C, Dv)[:, :, :T].to(out_dtype), S


def kimi_delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor, *,
                    state: Tensor | None = None, form: str = "chunked", scale: float | None = None,
                    chunk_size: int = 64) -> tuple[Tensor, Tensor]:
    """KDA's core in either form (:data:`KDA_FORMS`); ``chunk_size`` only matters to the chunked one."""
    check_choice(form, "form", KDA_FORMS)
    if form == "recurrent":
        check_positive_int(chunk_size, "chunk_size")
        return kda_recurrent(q, k, v, beta, log_decay, state=state, scale=scale)
    return kda_chunked(q, k, v, beta, log_decay, state=state, scale=scale, chunk_size=chunk_size)
