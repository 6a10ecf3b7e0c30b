"""One attention module for MHA, GQA and MQA, plus the pure functions it is built on.

Shape letters: B batch, T query length, S key length, H query heads, G key/value heads
(``H % G == 0``), D head dim, C model dim.

The pure functions (:func:`scaled_dot_product_attention`, :func:`attention_weights`,
:func:`repeat_kv`) live in :mod:`llmviz.attention.functional` and are re-exported here; their conventions
(True = may attend, contiguous GQA groups, zero output for fully masked rows, soft-capping)
are documented there. :class:`MultiHeadAttention` holds the projections (Hugging Face names
``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``) and adds the causal / sliding-window mask,
RoPE, ALiBi, QK-norm and the KV cache. Its structural mask is one
:class:`~llmviz.attention.mask_kinds.Mask` object (causal, sliding, chunked, composed). :func:`gqa_from_mha` converts a trained MHA layer to
GQA by mean-pooling kv heads (Ainslie et al. 2023).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .._checks import (
    check_choice,
    check_flags,
    check_hidden,
    check_int_in,
    check_positive,
    check_positive_int,
    check_real,
)
from ..norm import MODEL_NORMS, NormSpec
from ._checks import check_mask
from .functional import (
    attention_weights,
    repeat_kv,
    scaled_dot_product_attention,
)
from .mask_kinds import Causal, Full, Mask, SlidingWindow
from .masks import combine_masks

__all__ = [
    "repeat_kv",
    "attention_weights",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "gqa_from_mha",
    "QK_NORMS",
    "QK_NORM_SCOPES",
]

#: QK-norm kinds: None, or any per-token model norm of :data:`llmviz.norm.MODEL_NORMS`.
QK_NORMS = (None, *MODEL_NORMS)
#: What one QK-norm normalises: each head's D features, or the whole H*D projection.
QK_NORM_SCOPES = ("head", "all")


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with grouped key/value heads (MHA, GQA, MQA).

    Args:
        d_model: model width C.
        n_heads: query heads H.
        n_kv_heads: key/value heads G (default H = MHA; 1 = MQA). ``H % G == 0``.
        head_dim: per-head width D (default ``C // H``; may differ, as in Gemma).
        bias: whether the projections have biases.
        rope: a rotary module called as ``rope(q, k, positions) -> (q, k)`` (e.g.
            ``llmviz.position.rotary.RotaryEmbedding``), or None.
        alibi: add ALiBi biases (Press et al. 2022) built by ``llmviz.position.alibi``.
        qk_norm: None or a per-token norm kind of :data:`llmviz.norm.MODEL_NORMS` (the
            registry :data:`llmviz.norm.NORMS`): norm of q and k (``q_norm``, ``k_norm``)
            before RoPE, as in OLMo 2 / Qwen 3 / Gemma 3; or a :class:`llmviz.norm.NormSpec`
            (kind, eps and options in one object).
        qk_norm_eps: its epsilon.
        qk_norm_scope: ``"head"``: one norm over D shared by every head (Qwen 3, Gemma 3);
            ``"all"``: one norm over the whole projection, H*D for q and G*D for k (OLMo 2).
        o_bias: bias of ``o_proj`` (default ``bias``; Qwen 2 has q/k/v biases only).
        softcap: Gemma 2 attention-logit soft-cap.
        scale: multiplies ``q @ k^T``; default ``1 / sqrt(head_dim)``. Gemma 2 uses
            ``query_pre_attn_scalar ** -0.5`` (27B: 144 ** -0.5 with head_dim 128).
        sliding_window: each query sees this many most recent keys (Mistral); the same as
            ``layer_mask=SlidingWindow(sliding_window)``.
        layer_mask: the layer's structural mask as a :class:`llmviz.attention.mask_kinds.Mask`
            (``Causal()``, ``SlidingWindow(w)``, ``Chunked(c)`` for Llama 4, compositions with
            ``&``/``|``); default from ``causal`` and ``sliding_window``.
        dropout: dropout on attention weights in training mode.
        causal: apply the causal mask.
        sinks: a learned sink logit per head (gpt-oss, parameter ``sinks``, shape ``(H,)``):
            it joins each row's softmax and takes mass away from the keys. The reference
            attention path runs (torch's fused kernel has no sink input).
        output_gate: multiply the heads' output by ``sigmoid(gate_proj(x))`` before ``o_proj``
            (Qwen3-Next's gated attention).

    ``forward(x, *, mask, score_bias, positions, cache, layer_idx, return_weights)``: x
    ``(B, T, C)``; mask bool broadcastable to ``(B, H, T, S)`` (True = may attend), e.g. from
    :func:`llmviz.attention.masks.padding_mask`; score_bias float broadcastable to ``(B, H, T, S)``, added
    to the scores (ALiBi, a T5 relative bias; the constructor's ``bias`` is the projections');
    positions ``(T,)`` or ``(B, T)``, default
    ``cache offset + arange(T)``. Returns ``(B, T, C)`` or ``(out, weights (B, H, T, S))``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = False,
        rope: Callable | None = None,
        alibi: bool = False,
        qk_norm: str | None = None,
        qk_norm_eps: float = 1e-6,
        qk_norm_scope: str = "head",
        o_bias: bool | None = None,
        softcap: float | None = None,
        scale: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        causal: bool = True,
        sinks: bool = False,
        output_gate: bool = False,
        layer_mask: Mask | None = None,
    ) -> None:
        check_flags(bias=bias, alibi=alibi, causal=causal, sinks=sinks, output_gate=output_gate)
        check_positive(qk_norm_eps, "qk_norm_eps")
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            check_positive_int(value, name)
        if n_heads % n_kv_heads:
            raise ValueError(
                f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})"
            )
        if head_dim is None:
            if d_model % n_heads:
                raise ValueError(
                    f"d_model ({d_model}) must be divisible by n_heads ({n_heads}), "
                    "or pass head_dim explicitly"
                )
            head_dim = d_model // n_heads
        else:
            check_positive_int(head_dim, "head_dim")
        if isinstance(qk_norm, NormSpec):  # a spec carries its own eps and options
            qk_spec, qk_norm = qk_norm, qk_norm.kind
        else:
            qk_spec = None if qk_norm is None else NormSpec(qk_norm, qk_norm_eps)
        check_choice(qk_norm, "qk_norm", QK_NORMS)
        check_choice(qk_norm_scope, "qk_norm_scope", QK_NORM_SCOPES)
        if rope is not None and alibi:
            raise ValueError("use either rope or alibi, not both")
        if rope is not None and not callable(rope):
            raise TypeError(f"rope must be callable as rope(q, k, positions), got {type(rope).__name__}")
        if softcap is not None:
            check_positive(softcap, "softcap")
        if scale is not None:
            check_positive(scale, "scale")
        if sliding_window is not None:
            check_positive_int(sliding_window, "sliding_window")
        if layer_mask is not None and not isinstance(layer_mask, Mask):
            raise TypeError(f"layer_mask must be a llmviz.attention.mask_kinds.Mask (e.g. Chunked(8)), "
                            f"got {type(layer_mask).__name__}")
        if layer_mask is not None and sliding_window is not None:
            raise ValueError("give the window either as sliding_window or inside layer_mask, not both")
        check_real(dropout, "dropout")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d_model, n_heads, n_kv_heads, head_dim
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * head_dim, d_model, bias=bias if o_bias is None else o_bias)
        # gpt-oss: a learned logit per head that competes in the softmax and takes mass away
        self.sinks = nn.Parameter(torch.zeros(n_heads)) if sinks else None
        # Qwen3-Next: out * sigmoid(gate_proj(x)) per feature, before o_proj
        self.gate_proj = nn.Linear(d_model, n_heads * head_dim, bias=False) if output_gate else None
        if qk_norm is None:
            self.q_norm = self.k_norm = None
        else:  # "head": one norm over D for every head (Qwen 3); "all": over H*D (OLMo 2)
            q_width, k_width = (head_dim, head_dim) if qk_norm_scope == "head" else (
                n_heads * head_dim, n_kv_heads * head_dim)
            self.q_norm, self.k_norm = qk_spec.build(q_width), qk_spec.build(k_width)
        self.qk_norm_scope = qk_norm_scope
        self.rope = rope
        self.alibi = alibi
        if alibi:
            from ..position.alibi import (
                alibi_slopes,  # lazy: position package is optional here
            )

            self.register_buffer("alibi_slopes", alibi_slopes(n_heads), persistent=False)
        self.softcap = softcap
        self.scale = None if scale is None else float(scale)
        self.qk_norm, self.qk_norm_spec = qk_norm, qk_spec
        if layer_mask is None:
            layer_mask = (SlidingWindow(sliding_window, causal) if sliding_window is not None
                          else Causal() if causal else Full())
        self.layer_mask = layer_mask
        self.dropout = dropout
        self.causal = causal

    @property
    def sliding_window(self) -> int | None:
        """The window of a plain sliding-window layer, else None (read :attr:`layer_mask`)."""
        return self.layer_mask.window if isinstance(self.layer_mask, SlidingWindow) else None

    @property
    def n_rep(self) -> int:
        """Query heads per key/value head, ``H // G``."""
        return self.n_heads // self.n_kv_heads

    def _alibi(self, T: int, S: int, device, dtype) -> torch.Tensor:
        from ..position.alibi import alibi_bias

        slopes = self.alibi_slopes.to(device=device)
        # (H, T, S): only the rows of the T queries (the last T positions), never S x S.
        return alibi_bias(T, S, slopes=slopes, causal=self.causal, device=device, dtype=dtype)

    def forward(
        self,
        x: torch.Tensor,
        *,
        mask: torch.Tensor | None = None,
        score_bias: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache=None,
        layer_idx: int = 0,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        check_flags(return_weights=return_weights)
        check_int_in(layer_idx, "layer_idx", 0)
        check_hidden(x, self.d_model, self.q_proj.weight, "MultiHeadAttention", ndim=3)
        B, T, C = x.shape
        H, G, D = self.n_heads, self.n_kv_heads, self.head_dim
        q, k = self.q_proj(x), self.k_proj(x)  # (B, T, H*D), (B, T, G*D)
        if self.q_norm is not None and self.qk_norm_scope == "all":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        v = self.v_proj(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, D)
        if self.q_norm is not None and self.qk_norm_scope == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        offset = cache.length(layer_idx) if cache is not None else 0
        if self.rope is not None:
            if positions is None:
                positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
            if hasattr(self.rope, "cos_sin"):  # a RotaryEmbedding: length from shapes, no read
                q, k = self.rope(q, k, positions, seq_len=offset + T)
            else:
                q, k = self.rope(q, k, positions)
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)  # (B, G, S, D)
        S = k.shape[2]
        # The structure in its cheapest form (see llmviz.attention.functional): a window that
        # covers all S keys is no window; plain causal goes as is_causal (no (T, S) tensor).
        layout = self.layer_mask.simplify(S)
        is_causal = isinstance(layout, Causal)
        structural = None if is_causal or isinstance(layout, Full) else layout(T, S, device=x.device)
        if mask is not None:
            check_mask(mask, (B, H, T, S))
        mask = combine_masks(structural, mask)
        if self.alibi:
            ab = self._alibi(T, S, x.device, q.dtype)
            score_bias = ab if score_bias is None else score_bias + ab
        result = scaled_dot_product_attention(
            q, k, v, mask=mask, bias=score_bias, scale=self.scale, softcap=self.softcap,
            dropout_p=self.dropout if self.training else 0.0, return_weights=return_weights,
            is_causal=is_causal, sinks=self.sinks,
        )
        out, weights = result if return_weights else (result, None)
        out = out.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
        if self.gate_proj is not None:
            out = out * torch.sigmoid(self.gate_proj(x))
        out = self.o_proj(out)  # (B, T, C)
        return (out, weights) if return_weights else out


@torch.no_grad()
def gqa_from_mha(mha: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """Build a GQA layer from a trained MHA layer by mean-pooling its key/value heads.

    The uptraining recipe of Ainslie et al. (2023): each group of ``H // G`` consecutive kv
    heads is averaged into one; query and output projections are copied unchanged.
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention, got {type(mha).__name__}")
    if mha.n_kv_heads != mha.n_heads:
        raise ValueError(
            f"mha must be plain multi-head (n_kv_heads == n_heads), got "
            f"n_kv_heads={mha.n_kv_heads}, n_heads={mha.n_heads}"
        )
    if mha.alibi:
        raise ValueError("gqa_from_mha does not support alibi layers yet; build the GQA layer by hand")
    has_bias = mha.q_proj.bias is not None
    gqa = MultiHeadAttention(
        mha.d_model, mha.n_heads, n_kv_heads=n_kv_heads, head_dim=mha.head_dim, bias=has_bias,
        rope=mha.rope, softcap=mha.softcap, layer_mask=mha.layer_mask,
        dropout=mha.dropout, causal=mha.causal,
        qk_norm=mha.qk_norm_spec, qk_norm_scope=mha.qk_norm_scope, scale=mha.scale,
    ).to(device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    gqa.q_proj.load_state_dict(mha.q_proj.state_dict())
    gqa.o_proj.load_state_dict(mha.o_proj.state_dict())
    if mha.q_norm is not None:
        gqa.q_norm.load_state_dict(mha.q_norm.state_dict())
        gqa.k_norm.load_state_dict(mha.k_norm.state_dict())
    r, D, C = mha.n_heads // n_kv_heads, mha.head_dim, mha.d_model
    for name in ("k_proj", "v_proj"):
        src, dst = getattr(mha, name), getattr(gqa, name)
        w = src.weight.view(n_kv_heads, r, D, C).mean(dim=1)  # (G, D, C)
        dst.weight.copy_(w.reshape(n_kv_heads * D, C))
        if has_bias:
            dst.bias.copy_(src.bias.view(n_kv_heads, r, D).mean(dim=1).reshape(-1))
    return gqa
