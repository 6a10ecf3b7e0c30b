"""One frozen, typed configuration for every decoder-only model llmviz builds.

A :class:`ModelConfig` says everything :class:`llmviz.model.DecoderLM` needs: sizes, the
position scheme, the norm and where it sits, serial or parallel blocks, the feed-forward kind,
and the stability tricks (QK-norm, soft-capping, z-loss). It is validated once, in
``__post_init__``, so a model can never be built from an inconsistent config.

Shape letters: B batch, T query length, S key length, H heads, G kv heads, D head dim,
C model dim (``d_model``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..ffn import glu_hidden_size
from ..position import resolve_t5_bias
from .kinds import ATTENTIONS
from .validation import validate

# The valid kinds live with the code that implements them (one registry per kind):
# positions llmviz.position.POSITION_SCHEMES, norms llmviz.norm.NORMS (MODEL_NORMS), placements
# and attention kinds llmviz.model.kinds, feed-forwards llmviz.ffn.FFNS and FFN_ACTIVATIONS,
# QK-norms llmviz.attention.module.QK_NORMS (None or a model norm) and QK_NORM_SCOPES. The rules
# between fields are in llmviz.model.validation.
__all__ = ["ModelConfig", "ATTN_KINDS"]

#: Attention kinds of the softmax layers: grouped (MHA/GQA/MQA) or multi-head latent (DeepSeek).
ATTN_KINDS = tuple(ATTENTIONS)


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of a decoder-only language model.

    ``None`` fields are resolved in ``__post_init__`` (``n_kv_heads`` -> ``n_heads``,
    ``head_dim`` -> ``d_model // n_heads``, ``d_ff`` -> 4 C for an MLP or the 2/3 rule for a GLU),
    so a built config is always concrete. Use :meth:`replace` to derive variants.
    """

    # --- sizes ------------------------------------------------------------------------------
    vocab_size: int = 256  # number of token ids (256: the byte tokenizer of llmviz.training.data)
    d_model: int = 64  # C, width of the residual stream
    n_layers: int = 2  # number of transformer blocks (depth)
    n_heads: int = 4  # H, query heads per attention layer
    n_kv_heads: int | None = None  # G, key/value heads: H = MHA, 1 = MQA, in between = GQA
    head_dim: int | None = None  # D, width of one head; None -> d_model // n_heads
    d_ff: int | None = None  # hidden width of the feed-forward; None -> 4C (MLP) or 2/3 of 4C (GLU)
    max_seq_len: int = 256  # longest sequence (learned positions have exactly this many rows)
    # --- position -----------------------------------------------------------------------------
    position: str = "rope"  # one of llmviz.position.POSITIONS
    rope_base: float = 10000.0  # RoPE theta (Llama 2: 1e4, Llama 3: 5e5)
    rope_scaling: Any = None  # llmviz.position.rope.RopeScaling or None (context extension)
    rope_layout: str = "half"  # "half" (GPT-NeoX/Llama, rotate-half) or "interleaved" (GPT-J)
    rotary_dim: int | None = None  # partial rotary: rotate only the first rotary_dim dims of a head
    local_rope_base: float | None = None  # RoPE base of sliding-window layers (Gemma 3: 1e4, global 1e6); None -> rope_base
    nope_layers: tuple[int, ...] | None = None  # layers with no RoPE at all (SmolLM3: every 4th, Llama 4)
    t5_bias: Any = None  # position="t5": llmviz.position.t5_bias.T5BiasSettings; None -> T5's (32 buckets, 128)
    # --- normalisation ------------------------------------------------------------------------
    norm: str = "rms"  # one of llmviz.norm.MODEL_NORMS ("rms_gemma" scales by 1 + weight; "layer_nobias": PaLM, OLMo)
    norm_eps: float = 1e-5  # epsilon inside the square root
    placement: str = "pre"  # one of llmviz.model.kinds.PLACEMENTS (the table in llmviz.model.block)
    embed_norm: bool = False  # a norm right after the token embedding (BLOOM's stability trick)
    # --- block --------------------------------------------------------------------------------
    parallel: bool = False  # GPT-J/PaLM: y = x + Attn(N(x)) + FFN(N(x)) with one shared norm
    ffn: str = "swiglu"  # one of llmviz.ffn.FFN_KINDS
    activation: str | None = None  # None: the ffn kind's own (mlp gelu, swiglu silu, geglu gelu, reglu relu)
    bias: bool = False  # biases in the feed-forward (and attention, unless attn_bias says otherwise)
    attn_bias: bool | None = None  # biases in q/k/v/o projections; None -> same as bias
    o_bias: bool | None = None  # bias of o_proj alone; None -> same as attn_bias (Qwen 2: q/k/v only)
    tie_embeddings: bool = True  # lm_head shares the token-embedding matrix
    embed_scale: bool = False  # multiply token embeddings by sqrt(C) (Gemma)
    # --- attention ----------------------------------------------------------------------------
    qk_norm: str | None = None  # None or one of llmviz.norm.MODEL_NORMS: norm on q and k before RoPE (OLMo 2, Qwen 3, Gemma 3)
    qk_norm_eps: float = 1e-6  # epsilon of the QK-norm
    qk_norm_scope: str = "head"  # "head" or "all" (llmviz.attention.module.QK_NORM_SCOPES): "head" (Qwen 3, Gemma 3) or "all" (OLMo 2)
    attn_softcap: float | None = None  # scores -> cap * tanh(scores / cap) (Gemma 2: 50)
    query_pre_attn_scalar: float | None = None  # scores scaled by its -1/2 power (Gemma 2); None: head_dim
    sliding_window: int | None = None  # each query sees at most this many most recent keys
    global_every: int | None = None  # with sliding_window: every k-th layer attends globally
    layer_windows: tuple[int | None, ...] | None = None  # window of each layer (None = global); replaces the two above
    local_attention: str = "sliding"  # what a window means (llmviz.attention.mask_kinds.MASK_KINDS): "sliding" or "chunked" (Llama 4's attention_chunk_size)
    attn_sinks: bool = False  # a learned sink logit per head in every attention layer (gpt-oss)
    attn_output_gate: bool = False  # attention output times sigmoid(gate_proj(x)) (Qwen3-Next)
    linear_layers: tuple[int, ...] | None = None  # layers that are Gated DeltaNet, not softmax attention (Qwen3-Next: 3 of 4)
    linear_heads: int | None = None  # value heads of those layers; None -> n_heads
    linear_key_heads: int | None = None  # their query/key heads; None -> linear_heads
    linear_head_dim: int | None = None  # their head width (keys and values); None -> head_dim
    linear_conv_kernel: int = 4  # their short causal convolution
    attn_kind: str = "standard"  # one of llmviz.model.kinds.ATTENTIONS: "standard" (MHA/GQA/MQA), "mla" (DeepSeek) or "qk_norm_after_rope" (HunYuan)
    q_lora_rank: int | None = None  # mla: width of the compressed query (None: a plain q_proj)
    kv_lora_rank: int | None = None  # mla: width of the cached latent (DeepSeek-V3: 512)
    qk_nope_head_dim: int | None = None  # mla: per-head query/key features without position
    qk_rope_head_dim: int | None = None  # mla: per-head features with RoPE (one shared rope key)
    v_head_dim: int | None = None  # mla: per-head value width
    # --- mixture of experts (llmviz.moe.MoELayer as the feed-forward of sparse layers) ----------
    n_experts: int | None = None  # routed experts E; None = dense feed-forward everywhere
    experts_top_k: int = 2  # k experts per token
    expert_d_ff: int | None = None  # hidden width of one routed expert; None -> d_ff
    n_shared_experts: int = 0  # shared experts every token passes through (DeepSeek: 1)
    shared_expert_d_ff: int | None = None  # their total width; None -> n_shared_experts * expert_d_ff
    shared_expert_gate: bool = False  # shared output times sigmoid(x . w) (Qwen2-MoE, Qwen3-Next)
    moe_score: str = "softmax"  # router scores: "softmax" (Mixtral, Qwen3-MoE) or "sigmoid" (DeepSeek-V3)
    moe_normalize: bool = True  # renormalise the k kept scores to sum to 1
    moe_scaling: float = 1.0  # routed weights times this (DeepSeek-V3's routed_scaling_factor)
    moe_n_groups: int | None = None  # group-limited routing: expert groups (DeepSeek-V3: 8)
    moe_topk_groups: int | None = None  # groups a token may use (DeepSeek-V3: 4)
    moe_bias_balancing: bool = False  # choice bias e_score_correction_bias (auxiliary-loss-free balancing)
    moe_bias_rate: float = 1e-3  # its update step after each optimiser step
    moe_capacity_factor: float | None = None  # expert capacity; None = no token dropped
    moe_layers: tuple[int, ...] | None = None  # sparse layers; None = all (when n_experts is set)
    router_bias: bool = False  # a bias on the router logits (gpt-oss)
    expert_bias: bool = False  # biases in the expert projections (gpt-oss)
    expert_glu: str = "standard"  # "standard" act(gate) * up, or "clamped" (gpt-oss; see llmviz.moe.layer)
    expert_glu_alpha: float = 1.702  # clamped GLU: gate * sigmoid(alpha * gate)
    expert_glu_limit: float = 7.0  # clamped GLU: gate <= limit, |up| <= limit
    router_aux_loss_coef: float = 0.0  # loss += coef * load-balancing loss, summed over sparse layers
    router_z_loss_coef: float = 0.0  # loss += coef * router z-loss, summed over sparse layers
    # --- output and training ------------------------------------------------------------------
    final_softcap: float | None = None  # logits -> cap * tanh(logits / cap) (Gemma 2: 30)
    z_loss_weight: float = 0.0  # loss += w * mean(logsumexp(logits)^2) (PaLM: 1e-4)
    dropout: float = 0.0  # dropout on attention weights and sublayer outputs
    init_std: float = 0.02  # std of the normal initialisation of every weight matrix

    def __post_init__(self) -> None:
        validate(self)

    # ------------------------------------------------------------------------- derived values
    @property
    def n_rep(self) -> int:
        """Query heads per key/value head (H / G)."""
        return self.n_heads // self.n_kv_heads

    @property
    def has_final_norm(self) -> bool:
        """Pre-norm and sandwich stacks end with one more norm; post-norm stacks already do."""
        return self.placement in ("pre", "sandwich", "post_sublayer")

    @property
    def deepnorm_alpha(self) -> float:
        """DeepNet residual up-weighting for a decoder-only stack of N layers: (2N)^(1/4)."""
        return (2 * self.n_layers) ** 0.25

    @property
    def deepnorm_beta(self) -> float:
        """DeepNet init down-scaling of v/o and feed-forward weights: (8N)^(-1/4)."""
        return (8 * self.n_layers) ** -0.25

    @property
    def attn_scale(self) -> float | None:
        """Scale of ``q @ k^T``: ``query_pre_attn_scalar ** -0.5`` if set, else None (1/sqrt(D))."""
        return None if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar ** -0.5

    def window_for(self, layer_idx: int) -> int | None:
        """The sliding window of layer ``layer_idx`` (None = global attention)."""
        if self.layer_windows is not None:
            return self.layer_windows[layer_idx]
        if self.sliding_window is None:
            return None
        if self.global_every is not None and layer_idx % self.global_every == self.global_every - 1:
            return None
        return self.sliding_window

    def mask_for(self, layer_idx: int):
        """The structural mask of layer ``layer_idx`` as a :class:`~llmviz.attention.mask_kinds.Mask`:
        ``local_attention``'s kind sized by :meth:`window_for`, or causal for a global layer."""
        from ..attention.mask_kinds import layer_mask

        return layer_mask(self.local_attention, self.window_for(layer_idx))

    @property
    def norm_spec(self):
        """The block norms as a :class:`llmviz.norm.NormSpec` (kind and eps): the builder's one source."""
        from ..norm import NormSpec

        return NormSpec(self.norm, self.norm_eps)

    @property
    def qk_norm_spec(self):
        """The QK-norm as a :class:`llmviz.norm.NormSpec`, or None without one."""
        from ..norm import NormSpec

        return None if self.qk_norm is None else NormSpec(self.qk_norm, self.qk_norm_eps)

    def is_moe_layer(self, layer_idx: int) -> bool:
        """Whether layer ``layer_idx`` has a mixture of experts as its feed-forward."""
        if self.n_experts is None:
            return False
        return self.moe_layers is None or layer_idx in self.moe_layers

    def mixer_for(self, layer_idx: int) -> str:
        """``"linear"`` (Gated DeltaNet) or ``"attention"`` (softmax) for layer ``layer_idx``."""
        return "linear" if self.linear_layers is not None and layer_idx in self.linear_layers else "attention"

    def replace(self, **changes: Any) -> "ModelConfig":
        """A copy with ``changes`` applied and validated again.

        Derived fields (``n_kv_heads``, ``head_dim``, ``d_ff``, ``attn_bias``) that held their
        automatic value are recomputed unless given, so ``cfg.replace(d_model=128)`` scales the
        feed-forward too; explicitly set values (Gemma's head_dim) are kept.
        """
        base = asdict(self)
        auto_ff = 4 * self.d_model if self.ffn == "mlp" else glu_hidden_size(self.d_model, multiple_of=8)
        if self.head_dim * self.n_heads == self.d_model:
            base["head_dim"] = None
        if self.d_ff == auto_ff:
            base["d_ff"] = None
        if self.o_bias == self.attn_bias:
            base["o_bias"] = None
        if self.attn_bias == self.bias:
            base["attn_bias"] = None
        if self.n_kv_heads == self.n_heads:
            base["n_kv_heads"] = None
        if self.n_experts is not None and self.expert_d_ff == self.d_ff:
            base["expert_d_ff"] = None
        base["rope_scaling"] = self.rope_scaling
        base["t5_bias"] = None if self.t5_bias == resolve_t5_bias(None, "t5") else self.t5_bias
        base.update(changes)
        return ModelConfig(**base)
