"""Linear attention, the delta rule and its gated form: attention as a fixed-size recurrence.

Softmax attention keeps every past key and value (the KV cache grows with the sequence).
Linear attention drops the softmax, and then the sum over the past collapses into one matrix,
the *state* ``S`` of shape ``(D_k, D_v)`` per head, updated once per token::

    linear:        S_t = a_t S_{t-1} + b_t k_t v_t^T                     o_t = S_t^T q_t
    delta rule:    S_t = a_t S_{t-1} + k_t u_t^T,
                   u_t = b_t (v_t - a_t S_{t-1}^T k_t)                   o_t = S_t^T q_t

``a_t = exp(log_decay_t)`` in (0, 1] is the gate (forget a little of the state each step;
``log_decay=None`` means a_t = 1, no forgetting) and ``b_t = beta_t`` the write strength. The
delta rule writes only the *correction* ``v_t - S^T k_t``: what the state already predicts
for key ``k_t`` is replaced, not added to. With unit keys and ``beta = 1`` a repeated key
overwrites its old value, where plain linear attention would return the sum of the two. That
is Gated DeltaNet (Yang et al., 2024), the linear layer of Qwen3-Next.

Two forms compute the same thing:

* :func:`recurrent_scan`: one token at a time, the definition above. What decoding uses.
* :func:`chunked_scan`: the sequence cut into chunks of ``C`` tokens. Inside a chunk, with
  ``g_t`` the cumulative log decay since the chunk began and ``S_0`` the state entering it,
  unrolling the recurrence gives ``S_t = e^{g_t} S_0 + sum_{s<=t} e^{g_t - g_s} k_s u_s^T``;
  putting that into ``u_t`` gives a unit lower-triangular system for all ``u`` of the chunk
  at once, ``(I + A) U = diag(b) V - diag(b e^g) K S_0`` with
  ``A[t, s] = b_t e^{g_t - g_s} k_t . k_s`` for ``s < t``, which one triangular solve
  answers. Outputs and the next state are then matrix products; only the chunks are walked
  in order. Matrix products instead of T small steps is what makes training fast.

Shapes: ``q, k (B, H, T, D_k)``, ``v (B, H, T, D_v)``, ``beta, log_decay (B, H, T)``, state
``(B, H, D_k, D_v)``. Queries are scaled by ``scale`` (default ``D_k ** -0.5``) before the
read, as Hugging Face's Qwen3-Next does. The scans run in float32 (float64 stays float64) and
return the input dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .._checks import check_flags, check_positive_int, check_real, check_tensor

__all__ = [
    "recurrent_scan",
    "chunked_scan",
    "gated_delta_rule",
    "linear_attention",
    "l2_normalize",
    "state_bytes",
]

_FORMS = ("chunked", "recurrent")


def l2_normalize(x: Tensor, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(|x|^2 + eps)`` over the last axis: unit keys keep the delta rule's state bounded."""
    check_real(eps, "eps")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    check_tensor(x, "x", min_ndim=1, floating=True)
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _prepare(q, k, v, beta, log_decay, state, scale):
    """Check shapes and values; return float tensors (compute dtype) and the output dtype."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, ndim=4, floating=True)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape (B, H, T, D_k); got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must be (B, H, T, D_v) with the (B, H, T) of k; got v {tuple(v.shape)}, "
                         f"k {tuple(k.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}; "
                        f"cast them with .to(...)")
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    out_dtype = q.dtype
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    if scale is None:
        scale = Dk ** -0.5
    else:
        check_real(scale, "scale")

    def per_token(x, name, default):
        if x is None:
            return torch.full((B, H, T), default, dtype=work, device=q.device)
        check_tensor(x, name, ndim=3, floating=True)
        if tuple(x.shape) != (B, H, T):
            raise ValueError(f"{name} must have shape (B, H, T) = {(B, H, T)}; got {tuple(x.shape)}")
        return x.to(work)

    beta_w = per_token(beta, "beta", 1.0)
    decay_w = per_token(log_decay, "log_decay", 0.0)
    if state is None:
        state_w = torch.zeros(B, H, Dk, Dv, dtype=work, device=q.device)
    else:
        check_tensor(state, "state", ndim=4, floating=True)
        if tuple(state.shape) != (B, H, Dk, Dv):
            raise ValueError(f"state must have shape (B, H, D_k, D_v) = {(B, H, Dk, Dv)}; got "
                             f"{tuple(state.shape)}")
        state_w = state.to(work)
    return (q.to(work) * scale, k.to(work), v.to(work), beta_w, decay_w, state_w, out_dtype)


def recurrent_scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor | None = None,
    log_decay: Tensor | None = None,
    *,
    state: Tensor | None = None,
    delta: bool = True,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """The recurrence, token by token: ``(out (B, H, T, D_v), final state (B, H, D_k, D_v))``.

    ``delta=False`` is (gated) linear attention, ``delta=True`` the (gated) delta rule. Pass the
    returned state back in to continue a sequence (decoding): the state is all the layer keeps.
    """
    check_flags(delta=delta)
    q, k, v, beta, decay, S, out_dtype = _prepare(q, k, v, beta, log_decay, state, scale)
    T = q.shape[2]
    out = q.new_empty(*q.shape[:3], v.shape[-1])
    for t in range(T):
        S = S * decay[:, :, t, None, None].exp()                      # forget: a_t S
        k_t, b_t = k[:, :, t], beta[:, :, t, None]                     # (B, H, Dk), (B, H, 1)
        if delta:                                                      # u = b (v - S^T k)
            u = b_t * (v[:, :, t] - torch.einsum("bhkv,bhk->bhv", S, k_t))
        else:                                                          # u = b v
            u = b_t * v[:, :, t]
        S = S + k_t.unsqueeze(-1) * u.unsqueeze(-2)                    # S += k u^T
        out[:, :, t] = torch.einsum("bhkv,bhk->bhv", S, q[:, :, t])    # o = S^T q
    return out.to(out_dtype), S.to(out_dtype)


def chunked_scan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor | None = None,
    log_decay: Tensor | None = None,
    *,
    state: Tensor | None = None,
    delta: bool = True,
    scale: float | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The same recurrence, a chunk of ``chunk_size`` tokens at a time (see the module text).

    Equal to :func:`recurrent_scan` up to rounding, for any ``chunk_size`` (the sequence is
    padded with tokens that neither write nor forget).
    """
    check_flags(delta=delta)
    check_positive_int(chunk_size, "chunk_size")
    q, k, v, beta, decay, S, out_dtype = _prepare(q, k, v, beta, log_decay, state, scale)
    B, H, T, Dk = k.shape
    Dv = v.shape[-1]
    C = min(chunk_size, max(T, 1))  # a sequence shorter than a chunk is one chunk of its length
    pad = (-T) % C
    if pad:  # padded tokens: q = k = v = 0, beta = 0, decay 1: no write, no forgetting
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        beta, decay = (F.pad(x, (0, pad)) for x in (beta, decay))
    N = (T + pad) // C
    q, k, v = (x.reshape(B, H, N, C, x.shape[-1]) for x in (q, k, v))
    beta, decay = beta.reshape(B, H, N, C), decay.reshape(B, H, N, C)

    g = decay.cumsum(-1)                                               # (B, H, N, C) log decay since chunk start
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()  # s <= t
    gap = (g.unsqueeze(-1) - g.unsqueeze(-2)).masked_fill(~lower, float("-inf"))
    decay_ts = gap.exp()                                               # e^{g_t - g_s} for s <= t, else 0
    bv = beta.unsqueeze(-1) * v                                        # b_t v_t
    bk0 = (beta * g.exp()).unsqueeze(-1) * k                           # b_t e^{g_t} k_t (multiplies S_0)
    if delta:
        strict = decay_ts.masked_fill(torch.eye(C, dtype=torch.bool, device=q.device), 0.0)
        A = beta.unsqueeze(-1) * (k @ k.transpose(-1, -2)) * strict     # (B, H, N, C, C), strictly lower
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        U_v = torch.linalg.solve_triangular(eye + A, bv, upper=False, unitriangular=True)
        U_k = torch.linalg.solve_triangular(eye + A, bk0, upper=False, unitriangular=True)
    else:
        U_v, U_k = bv, None
    read = (q @ k.transpose(-1, -2)) * decay_ts                        # (B, H, N, C, C): q_t . k_s e^{g_t-g_s}
    q0 = g.exp().unsqueeze(-1) * q                                     # e^{g_t} q_t (reads S_0)
    k_end = (g[..., -1:] - g).exp().unsqueeze(-1) * k                   # e^{g_C - g_s} k_s (writes the next S)
    out = torch.empty(B, H, N, C, Dv, dtype=q.dtype, device=q.device)
    for n in range(N):
        U = U_v[:, :, n] if U_k is None else U_v[:, :, n] - U_k[:, :, n] @ S
        out[:, :, n] = q0[:, :, n] @ S + read[:, :, n] @ U
        S = g[:, :, n, -1, None, None].exp() * S + k_end[:, :, n].transpose(-1, -2) @ U
    out = out.reshape(B, H, N * C, Dv)[:, :, :T]
    return out.to(out_dtype), S.to(out_dtype)


def _scan(
    form: str,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor | None,
    log_decay: Tensor | None,
    *,
    state: Tensor | None,
    delta: bool,
    scale: float | None,
    chunk_size: int,
) -> tuple[Tensor, Tensor]:
    """Check ``form`` (and, for the delta rule, that ``beta`` is given); run the matching scan.

    ``chunk_size`` only matters to the chunked form.
    """
    if form not in _FORMS:
        raise ValueError(f"form={form!r} is not supported; choose one of {_FORMS}")
    if delta and beta is None:
        raise ValueError("gated_delta_rule needs beta (B, H, T), the write strength in [0, 1]; "
                         "for beta = 1 everywhere pass torch.ones(B, H, T)")
    if form == "recurrent":
        return recurrent_scan(q, k, v, beta, log_decay, state=state, delta=delta, scale=scale)
    return chunked_scan(q, k, v, beta, log_decay, state=state, delta=delta, scale=scale,
                        chunk_size=chunk_size)


def gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_decay: Tensor | None = None,
    *,
    state: Tensor | None = None,
    form: str = "chunked",
    scale: float | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """Gated DeltaNet's core: the delta rule with a per-token gate, in either form."""
    return _scan(form, q, k, v, beta, log_decay, state=state, delta=True, scale=scale,
                 chunk_size=chunk_size)


def linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_decay: Tensor | None = None,
    *,
    state: Tensor | None = None,
    form: str = "chunked",
    scale: float | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """Causal linear attention ``o_t = sum_{s<=t} (prod a) (q_t . k_s) v_s``: no softmax, no delta."""
    return _scan(form, q, k, v, None, log_decay, state=state, delta=False, scale=scale,
                 chunk_size=chunk_size)


def state_bytes(n_heads: int, d_k: int, d_v: int, *, bytes_per_value: int = 2) -> int:
    """Bytes of one sequence's recurrent state in one layer: ``H * D_k * D_v`` values, whatever T.

    Compare with a KV cache's ``2 * G * D * T`` values per layer, which grows with T.
    """
    for name, val in (("n_heads", n_heads), ("d_k", d_k), ("d_v", d_v),
                      ("bytes_per_value", bytes_per_value)):
        check_positive_int(val, name)
    return n_heads * d_k * d_v * bytes_per_value

