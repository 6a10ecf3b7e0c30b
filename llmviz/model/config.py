"""One frozen, typed configuration for every decoder-only model llmviz builds.

A :class:`ModelConfig` says everything :class:`llmviz.models.DecoderLM` needs: sizes, the
position scheme, the norm and where it sits, serial or parallel blocks, the feed-forward kind,
and the stability tricks (QK-norm, soft-capping, z-loss). It is validated once, in
``__post_init__``, so a model can never be built from an inconsistent config.

line budget: one validated field list, so that every model family reads its features here.

Shape letters: B batch, T query length, S key length, H heads, G kv heads, D head dim,
C model dim (``d_model``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .._checks import check_choice, check_positive, check_positive_int, check_real
from ..attention.module import QK_NORM_SCOPES, QK_NORMS
from ..ffn import FFN_ACTIVATIONS, FFN_KINDS, glu_hidden_size
from ..norm import MODEL_NORMS
from ..position import POSITIONS, resolve_t5_bias
from ..position.rope import LAYOUTS as ROPE_LAYOUTS
from .block import PLACEMENTS

# The valid kinds live with the code that implements them (one registry per kind):
# positions llmviz.position.POSITIONS, norms llmviz.norm.MODEL_NORMS, placements
# llmviz.model.block.PLACEMENTS, feed-forwards llmviz.ffn.FFN_KINDS and FFN_ACTIVATIONS,
# QK-norms llmviz.attention.module.QK_NORMS (None or a model norm) and QK_NORM_SCOPES.
__all__ = ["ModelConfig", "ATTN_KINDS"]

#: Attention kinds of the softmax layers: grouped (MHA/GQA/MQA) or multi-head latent (DeepSeek).
ATTN_KINDS = ("standard", "mla")


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of a decoder-only language model.

    ``None`` fields are resolved in ``__post_init__`` (``n_kv_heads`` -> ``n_heads``,
    ``head_dim`` -> ``d_model // n_heads``, ``d_ff`` -> 4 C for an MLP or the 2/3 rule for a GLU),
    so a built config is always concrete. Use :meth:`replace` to derive variants.
    """

    # --- sizes ------------------------------------------------------------------------------
    vocab_size: int = 256  # number of token ids (256: the byte tokenizer of llmviz.data)
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
    placement: str = "pre"  # one of llmviz.model.block.PLACEMENTS
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
    attn_sinks: bool = False  # a learned sink logit per head in every attention layer (gpt-oss)
    attn_output_gate: bool = False  # attention output times sigmoid(gate_proj(x)) (Qwen3-Next)
    linear_layers: tuple[int, ...] | None = None  # layers that are Gated DeltaNet, not softmax attention (Qwen3-Next: 3 of 4)
    linear_heads: int | None = None  # value heads of those layers; None -> n_heads
    linear_key_heads: int | None = None  # their query/key heads; None -> linear_heads
    linear_head_dim: int | None = None  # their head width (keys and values); None -> head_dim
    linear_conv_kernel: int = 4  # their short causal convolution
    attn_kind: str = "standard"  # "standard" (MHA/GQA/MQA) or "mla" (DeepSeek's multi-head latent attention)
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
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len"):
            check_positive_int(getattr(self, name), name)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        check_positive_int(self.n_kv_heads, "n_kv_heads")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be divisible by n_kv_heads ({self.n_kv_heads}); "
                "each key/value head serves a whole group of query heads"
            )
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}), "
                    "or give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        check_positive_int(self.head_dim, "head_dim")
        check_choice(self.position, "position", POSITIONS)
        object.__setattr__(self, "t5_bias", resolve_t5_bias(self.t5_bias, self.position))
        check_choice(self.norm, "norm", MODEL_NORMS)
        check_choice(self.placement, "placement", PLACEMENTS)
        check_choice(self.ffn, "ffn", tuple(FFN_KINDS))
        check_choice(self.activation, "activation", (None, *FFN_ACTIVATIONS))
        check_choice(self.qk_norm, "qk_norm", QK_NORMS)
        check_choice(self.rope_layout, "rope_layout", ROPE_LAYOUTS)
        if self.d_ff is None:
            d_ff = 4 * self.d_model if self.ffn == "mlp" else glu_hidden_size(self.d_model, multiple_of=8)
            object.__setattr__(self, "d_ff", d_ff)
        check_positive_int(self.d_ff, "d_ff")
        if self.attn_bias is None:
            object.__setattr__(self, "attn_bias", self.bias)
        if self.rotary_dim is not None:
            if self.position != "rope":
                raise ValueError(
                    f"rotary_dim ({self.rotary_dim}) only applies to position='rope', "
                    f"got position={self.position!r}"
                )
            check_positive_int(self.rotary_dim, "rotary_dim")
            if not (0 < self.rotary_dim <= self.head_dim) or self.rotary_dim % 2:
                raise ValueError(
                    f"rotary_dim ({self.rotary_dim}) must be even and in (0, head_dim={self.head_dim}]"
                )
        if self.position == "rope" and self.head_dim % 2:
            raise ValueError(f"RoPE rotates pairs of dims: head_dim ({self.head_dim}) must be even")
        if self.rope_scaling is not None and self.position != "rope":
            raise ValueError(
                f"rope_scaling is set but position={self.position!r}; it only applies to 'rope'"
            )
        check_positive(self.rope_base, "rope_base")
        check_positive(self.norm_eps, "norm_eps")
        check_positive(self.init_std, "init_std")
        for name in ("attn_softcap", "final_softcap", "query_pre_attn_scalar"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        if self.sliding_window is not None:
            check_positive_int(self.sliding_window, "sliding_window")
        if self.global_every is not None:
            check_positive_int(self.global_every, "global_every")
            if self.sliding_window is None:
                raise ValueError(
                    f"global_every ({self.global_every}) needs sliding_window: it says which "
                    "layers skip the window"
                )
        if not 0.0 <= check_real(self.dropout, "dropout") < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        check_positive(self.z_loss_weight, "z_loss_weight", allow_zero=True)
        self._check_layer_features()
        self._check_moe()
        self._check_mla()
        if self.placement == "deepnorm" and self.parallel:
            raise ValueError(
                "placement='deepnorm' is defined for serial blocks only; use parallel=False"
            )

    def _check_layer_features(self) -> None:
        # per-layer windows, local RoPE base, QK-norm scope, o_proj bias, the OLMo 2 placement
        if self.o_bias is None:
            object.__setattr__(self, "o_bias", self.attn_bias)
        check_choice(self.qk_norm_scope, "qk_norm_scope", QK_NORM_SCOPES)
        check_positive(self.qk_norm_eps, "qk_norm_eps")
        if self.local_rope_base is not None:
            check_positive(self.local_rope_base, "local_rope_base")
            if self.position != "rope":
                raise ValueError(
                    f"local_rope_base ({self.local_rope_base}) only applies to position='rope', "
                    f"got position={self.position!r}"
                )
        if self.nope_layers is not None:
            if self.position != "rope":
                raise ValueError(f"nope_layers ({self.nope_layers!r}) only applies to position='rope' "
                                 f"(the layers without rotation); got position={self.position!r}")
            layers = tuple(self.nope_layers)
            bad = [i for i in layers if isinstance(i, bool) or not isinstance(i, int)
                   or not 0 <= i < self.n_layers]
            if bad:
                raise ValueError(f"nope_layers must hold layer indices in [0, {self.n_layers}); got {bad}")
            object.__setattr__(self, "nope_layers", tuple(sorted(set(layers))))
        if self.linear_layers is not None:
            layers = tuple(self.linear_layers)
            bad = [i for i in layers if isinstance(i, bool) or not isinstance(i, int)
                   or not 0 <= i < self.n_layers]
            if bad:
                raise ValueError(f"linear_layers must hold layer indices in [0, {self.n_layers}); got {bad}")
            object.__setattr__(self, "linear_layers", tuple(sorted(set(layers))))
        for name in ("linear_heads", "linear_key_heads", "linear_head_dim"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        check_positive_int(self.linear_conv_kernel, "linear_conv_kernel")
        if self.layer_windows is not None:
            if self.sliding_window is not None or self.global_every is not None:
                raise ValueError(
                    "give either layer_windows or sliding_window/global_every, not both; "
                    f"got layer_windows={self.layer_windows!r}, sliding_window={self.sliding_window!r}"
                )
            windows = tuple(self.layer_windows)
            if len(windows) != self.n_layers:
                raise ValueError(
                    f"layer_windows has {len(windows)} entries but n_layers is {self.n_layers}; "
                    "give one window (or None for global attention) per layer"
                )
            for w in windows:
                if w is not None:
                    check_positive_int(w, "each layer_windows entry")
            object.__setattr__(self, "layer_windows", windows)
        if self.placement == "post_sublayer" and self.parallel:
            raise ValueError(
                "placement='post_sublayer' is defined for serial blocks only; use parallel=False"
            )

    def _check_moe(self) -> None:
        from ..moe.layer import EXPERT_GLUS
        from ..moe.router import SCORE_KINDS

        check_choice(self.moe_score, "moe_score", SCORE_KINDS)
        check_choice(self.expert_glu, "expert_glu", EXPERT_GLUS)
        check_positive(self.router_aux_loss_coef, "router_aux_loss_coef", allow_zero=True)
        check_positive(self.router_z_loss_coef, "router_z_loss_coef", allow_zero=True)
        if self.n_experts is None:
            if self.moe_layers is not None:
                raise ValueError(f"moe_layers ({self.moe_layers!r}) needs n_experts: set how many "
                                 "routed experts the sparse layers hold")
            return
        check_positive_int(self.n_experts, "n_experts")
        check_positive_int(self.experts_top_k, "experts_top_k")
        if self.experts_top_k > self.n_experts:
            raise ValueError(f"experts_top_k ({self.experts_top_k}) must be <= n_experts "
                             f"({self.n_experts}); lower experts_top_k or add experts")
        if self.expert_d_ff is None:
            object.__setattr__(self, "expert_d_ff", self.d_ff)
        check_positive_int(self.expert_d_ff, "expert_d_ff")
        check_positive_int(self.n_shared_experts, "n_shared_experts", allow_zero=True)
        if self.shared_expert_d_ff is not None:
            check_positive_int(self.shared_expert_d_ff, "shared_expert_d_ff")
        if self.shared_expert_gate and not (self.n_shared_experts or self.shared_expert_d_ff):
            raise ValueError("shared_expert_gate=True needs a shared expert: set n_shared_experts "
                             "or shared_expert_d_ff")
        check_positive(self.moe_bias_rate, "moe_bias_rate")
        if self.moe_capacity_factor is not None:
            check_positive(self.moe_capacity_factor, "moe_capacity_factor")
        if self.moe_layers is not None:
            layers = tuple(self.moe_layers)
            bad = [i for i in layers if isinstance(i, bool) or not isinstance(i, int)
                   or not 0 <= i < self.n_layers]
            if bad:
                raise ValueError(f"moe_layers must hold layer indices in [0, {self.n_layers}); got {bad}")
            object.__setattr__(self, "moe_layers", tuple(sorted(set(layers))))
        from ..moe.router import check_groups

        check_groups(self.n_experts, self.experts_top_k, self.moe_n_groups, self.moe_topk_groups)

    def _check_mla(self) -> None:
        check_choice(self.attn_kind, "attn_kind", ATTN_KINDS)
        dims = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        if self.attn_kind != "mla":
            given = [n for n in (*dims, "q_lora_rank") if getattr(self, n) is not None]
            if given:
                raise ValueError(f"{given} only apply to attn_kind='mla'; got attn_kind={self.attn_kind!r}")
            return
        missing = [n for n in dims if getattr(self, n) is None]
        if missing:
            raise ValueError(f"attn_kind='mla' needs {missing} (e.g. DeepSeek-V3: kv_lora_rank=512, "
                             "qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)")
        for n in dims:
            check_positive_int(getattr(self, n), n)
        if self.q_lora_rank is not None:
            check_positive_int(self.q_lora_rank, "q_lora_rank")
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be even: RoPE rotates pairs")
        bad = [n for n in ("attn_sinks", "attn_output_gate", "qk_norm", "attn_softcap", "rotary_dim",
                           "nope_layers", "local_rope_base") if getattr(self, n)]
        if bad or self.position != "rope":
            raise ValueError(f"attn_kind='mla' is built with RoPE on its rope features and none of "
                             f"{bad or ['position=' + repr(self.position)]}; drop them")
        if self.layer_windows is not None or self.sliding_window is not None:
            raise ValueError("attn_kind='mla' attends globally: drop sliding_window/layer_windows")
        if self.placement == "deepnorm":
            raise ValueError("placement='deepnorm' scales v_proj, which latent attention has not; "
                             "use another placement with attn_kind='mla'")

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
