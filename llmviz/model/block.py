"""The transformer block: attention and feed-forward sublayers, residuals, and where the norms go.

With ``A`` the attention sublayer, ``F`` the feed-forward, ``N`` a norm (a fresh one each time
it appears, except in parallel blocks, which share one) and ``a`` DeepNet's residual weight:

=========  =========================================  =======================================
placement  serial (GPT-2, Llama, ...)                  parallel (GPT-J, PaLM)
=========  =========================================  =======================================
post       h = N(x + A(x));     y = N(h + F(h))       y = N(x + A(x) + F(x))
pre        h = x + A(N(x));     y = h + F(N(h))       y = x + A(N(x)) + F(N(x)), one N
sandwich   h = x + N(A(N(x)));  y = h + N(F(N(h)))    y = x + N(A(N(x))) + N(F(N(x)))
deepnorm   h = N(a x + A(x));   y = N(a h + F(h))     (not defined)
post_sub.  h = x + N(A(x));     y = h + N(F(h))       (not defined)
=========  =========================================  =======================================

Pre-norm and sandwich stacks need one final norm after the last block (the model adds it);
post-norm and DeepNorm blocks already end with one. Post-LN is the original Transformer
(Vaswani et al. 2017), pre-LN GPT-2 (Xiong et al. 2020 analyse it), sandwich is Gemma 2's
pre+post norm, DeepNorm is Wang et al. 2022 ("DeepNet": ``a = (2N)^(1/4)`` for an N-layer
decoder, and v/o/feed-forward weights initialised smaller by ``b = (8N)^(-1/4)``).
``post_sublayer`` (OLMo 2, Groeneveld et al. 2024; Swin v2's res-post-norm) normalises each
sublayer's output before it joins the residual stream, and the stack ends with a final norm.

Shape letters: B batch, T query length, S key length, H heads, C model dim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from .._checks import check_choice, check_flags, check_int_in, check_positive, check_positive_int
from ..attention.deltanet import GatedDeltaNet
from ..attention.module import MultiHeadAttention
from ..ffn import FFN_KINDS, make_ffn
from ..norm import MODEL_NORMS, NormSpec

from .builder import block_modules, block_options, moe_kwargs
from .kinds import MIXER_KINDS, PLACEMENTS, mla_kwargs
from .parts import BlockModules, block_norms

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = ["TransformerBlock", "BlockModules", "block_norms", "PLACEMENTS", "MIXERS"]

#: Token mixers a block can hold (the names of :data:`llmviz.model.kinds.MIXER_KINDS`).
MIXERS = tuple(MIXER_KINDS)


class TransformerBlock(nn.Module):
    """One decoder block (see the module docstring for the equations).

    Args:
        d_model: C.
        n_heads: H.
        n_kv_heads: G (default H).
        head_dim: D (default C // H).
        d_ff: feed-forward hidden width.
        norm: norm kind, one of :data:`llmviz.norm.MODEL_NORMS` (built by
            :func:`llmviz.norm.make_norm`).
        norm_eps: its epsilon.
        placement: one of :data:`PLACEMENTS` (the table in the module docstring).
        parallel: attention and feed-forward read the same (normed) input and are summed.
        ffn: feed-forward kind for :func:`llmviz.ffn.make_ffn`.
        activation: its activation (None = the kind's default).
        bias: biases in the feed-forward.
        attn_bias: biases in the attention projections (default ``bias``).
        o_bias: bias of ``o_proj`` alone (default ``attn_bias``).
        rope: a rotary module shared by the layers, or None.
        alibi: add ALiBi biases inside attention.
        qk_norm: None or one of :data:`llmviz.norm.MODEL_NORMS`.
        qk_norm_eps, qk_norm_scope: its epsilon, and ``"head"`` or ``"all"`` (see the attention).
        attn_softcap: Gemma 2 attention-score soft-cap.
        attn_scale: attention score scale (default ``1 / sqrt(head_dim)``).
        sliding_window: this layer's local window (None = global).
        dropout: on attention weights and on each sublayer's output.
        deepnorm_alpha: the residual weight ``a`` used when ``placement="deepnorm"``.
        sinks, output_gate: learned sink logits (gpt-oss) and the sigmoid output gate
            (Qwen3-Next) of the attention.
        mixer: ``"attention"`` (softmax, ``self_attn``) or ``"linear"``: a Gated DeltaNet
            (``linear_attn``, Qwen3-Next's linear layers) with ``linear_heads`` value heads,
            ``linear_key_heads`` query/key heads of width ``linear_head_dim`` and a
            ``linear_conv_kernel``-tap convolution. It keeps a fixed-size state in the cache
            instead of keys and values, and has no attention weights (``None`` is returned).
        moe: keyword arguments of :class:`llmviz.moe.MoELayer` (without ``d_model``) to make the
            feed-forward a mixture of experts (``mlp.gate``, ``mlp.experts``,
            ``mlp.shared_experts``); None = the dense ``ffn``. After each forward the layer's
            routing is in :attr:`moe_info` (a :class:`llmviz.moe.MoEInfo`).
        mla: keyword arguments of :class:`llmviz.attention.latent.MultiHeadLatentAttention`
            (without ``d_model``, ``n_heads``) to make ``self_attn`` latent attention (DeepSeek);
            its cache slot holds the latents and rope keys instead of keys and values.

    Submodules follow Hugging Face Llama where they can: ``self_attn`` (``q_proj`` ...),
    ``mlp`` (``gate_proj``, ``up_proj``, ``down_proj``); norms are ``attn_norm`` and
    ``ffn_norm`` (the pre- or post-norm of each sublayer; parallel blocks only have
    ``attn_norm``), plus ``post_attn_norm`` and ``post_ffn_norm`` for the sandwich.

    Two ways to make one: :meth:`from_modules` (or ``modules=``) with built modules, which is
    how :meth:`from_config` makes a model's blocks (:func:`llmviz.model.builder.block_modules`); or the
    keyword arguments above, kept for existing callers (they build the same modules).
    """

    def __init__(
        self,
        d_model: int | None = None,
        n_heads: int | None = None,
        *,
        n_kv_heads: int | None = None,
        head_dim: int | None = None,
        d_ff: int | None = None,
        norm: str = "rms",
        norm_eps: float = 1e-5,
        placement: str = "pre",
        parallel: bool = False,
        ffn: str = "swiglu",
        activation: str | None = None,
        bias: bool = False,
        attn_bias: bool | None = None,
        o_bias: bool | None = None,
        rope: nn.Module | None = None,
        alibi: bool = False,
        qk_norm: str | None = None,
        qk_norm_eps: float = 1e-6,
        qk_norm_scope: str = "head",
        attn_softcap: float | None = None,
        attn_scale: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        deepnorm_alpha: float = 1.0,
        sinks: bool = False,
        output_gate: bool = False,
        mixer: str = "attention",
        linear_heads: int | None = None,
        linear_key_heads: int | None = None,
        linear_head_dim: int | None = None,
        linear_conv_kernel: int = 4,
        moe: dict | None = None,
        mla: dict | None = None,
        modules: BlockModules | None = None,
    ) -> None:
        check_flags(parallel=parallel, bias=bias, alibi=alibi, sinks=sinks, output_gate=output_gate)
        check_positive(deepnorm_alpha, "deepnorm_alpha")
        check_positive_int(linear_conv_kernel, "linear_conv_kernel")
        super().__init__()
        if modules is not None:  # the builder's path: modules made from a config
            self._assemble(modules, placement, parallel, dropout, deepnorm_alpha)
            return
        if d_model is None or n_heads is None or d_ff is None:
            raise TypeError("TransformerBlock needs d_model, n_heads and d_ff (or modules=, "
                            "see TransformerBlock.from_config)")
        check_choice(mixer, "mixer", MIXERS)
        check_choice(norm, "norm", MODEL_NORMS)
        check_choice(ffn, "ffn", tuple(FFN_KINDS))
        # the keyword form, kept for existing callers: the same modules, made here
        attn = lin = None
        if mixer == "attention" and mla is not None:
            from ..attention.latent import MultiHeadLatentAttention

            attn = MultiHeadLatentAttention(d_model, n_heads, **mla)
        elif mixer == "attention":
            attn = MultiHeadAttention(
                d_model, n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim,
                bias=bias if attn_bias is None else attn_bias, rope=rope, alibi=alibi,
                o_bias=o_bias, qk_norm=qk_norm, qk_norm_eps=qk_norm_eps,
                qk_norm_scope=qk_norm_scope, softcap=attn_softcap, scale=attn_scale,
                sliding_window=sliding_window, dropout=dropout, sinks=sinks,
                output_gate=output_gate,
            )
        else:
            heads = n_heads if linear_heads is None else linear_heads
            width = (head_dim or d_model // n_heads) if linear_head_dim is None else linear_head_dim
            lin = GatedDeltaNet(d_model, heads, width, n_k_heads=linear_key_heads,
                                conv_kernel=linear_conv_kernel, eps=norm_eps)
        if moe is not None:
            from ..moe import MoELayer

            mlp = MoELayer(d_model, **moe)
        else:
            mlp = make_ffn(ffn, d_model, d_ff, activation=activation, bias=bias)
        spec = NormSpec(norm, norm_eps)
        self._assemble(block_norms(spec, d_model, placement, parallel, mixer=attn or lin, mlp=mlp,
                                   latent=attn is not None and mla is not None),
                       placement, parallel, dropout, deepnorm_alpha)

    def _assemble(self, m: BlockModules, placement: str, parallel: bool, dropout: float,
                  deepnorm_alpha: float) -> None:
        check_choice(placement, "placement", PLACEMENTS)
        if placement in ("deepnorm", "post_sublayer") and parallel:
            raise ValueError(
                f"placement={placement!r} is defined for serial blocks only; use parallel=False"
            )
        if not isinstance(m, BlockModules):
            raise TypeError(f"modules must be a BlockModules, got {type(m).__name__}")
        self.placement, self.parallel = placement, parallel
        self.alpha = float(deepnorm_alpha) if placement == "deepnorm" else 1.0
        self.mixer = "linear" if isinstance(m.mixer, GatedDeltaNet) else "attention"
        self.self_attn = m.mixer if self.mixer == "attention" else None
        self.linear_attn = m.mixer if self.mixer == "linear" else None
        self.moe_info = None
        self.mlp = m.mlp
        from ..moe import MoELayer

        self._moe = isinstance(m.mlp, MoELayer)
        self.latent = m.latent
        self.attn_norm, self.ffn_norm = m.attn_norm, m.ffn_norm
        self.post_attn_norm, self.post_ffn_norm = m.post_attn_norm, m.post_ffn_norm
        self.drop = nn.Dropout(dropout)

    @classmethod
    def from_modules(cls, modules: BlockModules, *, placement: str = "pre", parallel: bool = False,
                     dropout: float = 0.0, deepnorm_alpha: float = 1.0) -> "TransformerBlock":
        """A block around built modules (torchtune's way): it takes what it uses."""
        return cls(modules=modules, placement=placement, parallel=parallel, dropout=dropout,
                   deepnorm_alpha=deepnorm_alpha)

    @classmethod
    def from_config(
        cls, config: ModelConfig, layer_idx: int = 0, *, rope: nn.Module | None = None
    ) -> "TransformerBlock":
        """The block ``layer_idx`` of a model built from ``config``: its modules made by
        :func:`llmviz.model.builder.block_modules`, wired by :meth:`from_modules`."""
        return cls.from_modules(block_modules(config, layer_idx, rope=rope), **block_options(config))

    @staticmethod
    def _moe_kwargs(c: ModelConfig) -> dict:
        return moe_kwargs(c)

    @staticmethod
    def _mla_kwargs(c: ModelConfig) -> dict:
        return mla_kwargs(c)

    @property
    def is_moe(self) -> bool:
        """Whether the feed-forward is a mixture of experts."""
        return self._moe

    def _ffn(self, h: torch.Tensor) -> torch.Tensor:
        if not self.is_moe:
            return self.mlp(h)
        out, self.moe_info = self.mlp(h, return_info=True)
        return out

    def _attn(self, h: torch.Tensor, attn_kwargs: dict, return_weights: bool):
        if self.linear_attn is not None:
            return self._linear(h, attn_kwargs), None
        if self.latent:  # latent attention: no score bias to add
            if attn_kwargs["score_bias"] is not None:
                raise ValueError("latent attention (attn_kind='mla') takes no score_bias")
            attn_kwargs = {k: v for k, v in attn_kwargs.items() if k != "score_bias"}
            if attn_kwargs["cache"] is not None:
                from ..attention.latent import LatentSlots

                attn_kwargs["cache"] = LatentSlots(attn_kwargs["cache"])
        if return_weights:
            return self.self_attn(h, return_weights=True, **attn_kwargs)
        return self.self_attn(h, **attn_kwargs), None

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
        """``x (B, T, C) -> (B, T, C)``, or ``(out, weights (B, H, T, S))`` if asked.

        ``mask`` (bool, True = may attend), ``score_bias`` (float, added to the scores),
        ``positions``, ``cache`` and ``layer_idx`` are passed to
        :class:`llmviz.attention.MultiHeadAttention`.
        """
        check_flags(return_weights=return_weights)
        check_int_in(layer_idx, "layer_idx", 0)
        kw = {"mask": mask, "score_bias": score_bias, "positions": positions, "cache": cache,
              "layer_idx": layer_idx}
        p = self.placement
        if self.parallel:
            h = x if p == "post" else self.attn_norm(x)
            a, weights = self._attn(h, kw, return_weights)
            f = self._ffn(h)
            if p == "sandwich":
                a, f = self.post_attn_norm(a), self.post_ffn_norm(f)
            y = x + self.drop(a) + self.drop(f)
            if p == "post":
                y = self.attn_norm(y)
        elif p in ("post", "deepnorm"):
            a, weights = self._attn(x, kw, return_weights)
            h = self.attn_norm(self.alpha * x + self.drop(a))
            y = self.ffn_norm(self.alpha * h + self.drop(self._ffn(h)))
        elif p == "post_sublayer":
            a, weights = self._attn(x, kw, return_weights)
            h = x + self.drop(self.attn_norm(a))
            y = h + self.drop(self.ffn_norm(self._ffn(h)))
        else:  # pre, sandwich
            a, weights = self._attn(self.attn_norm(x), kw, return_weights)
            if p == "sandwich":
                a = self.post_attn_norm(a)
            h = x + self.drop(a)
            f = self._ffn(self.ffn_norm(h))
            if p == "sandwich":
                f = self.post_ffn_norm(f)
            y = h + self.drop(f)
        return (y, weights) if return_weights else y

    def _linear(self, h: torch.Tensor, kw: dict) -> torch.Tensor:
        """The Gated DeltaNet sublayer: padding zeroed (HF's rule), the state kept in the cache."""
        mask, cache, i = kw["mask"], kw["cache"], kw["layer_idx"]
        if kw["score_bias"] is not None:
            raise ValueError(f"layer {i} is linear attention: it has no scores to add score_bias to")
        T = h.shape[1]
        if mask is not None:  # (B, 1, 1, S) key padding: the last T columns are these tokens
            if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != 1:
                raise ValueError(f"layer {i} is linear attention: it takes a key-padding mask "
                                 f"(B, 1, 1, S), got {tuple(mask.shape)}")
            h = h * mask[:, 0, 0, -T:, None].to(h.dtype)
        if cache is None:
            return self.linear_attn(h)
        y, state = self.linear_attn(h, state=cache.linear_state(i), return_state=True)
        cache.set_linear_state(i, state, T)
        return y

    def deepnorm_init_(self, beta: float) -> None:
        """Scale the value, output and feed-forward weights by ``beta`` (DeepNet init)."""
        with torch.no_grad():
            mixer = self.self_attn if self.self_attn is not None else self.linear_attn
            for lin in (mixer.v_proj, mixer.o_proj):
                lin.weight.mul_(beta)
            for name in ("gate_proj", "up_proj", "down_proj"):
                lin = getattr(self.mlp, name, None)
                if lin is not None:
                    lin.weight.mul_(beta)

    def extra_repr(self) -> str:
        kind = "parallel" if self.parallel else "serial"
        alpha = f", alpha={self.alpha:.3f}" if self.placement == "deepnorm" else ""
        mixer = ", mixer='linear'" if self.mixer == "linear" else ""
        return f"placement={self.placement!r}, {kind}{alpha}{mixer}"
