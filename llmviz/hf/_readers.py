"""Family readers for :func:`llmviz.hf.config_from_hf`: the shared field readers, and the
families through 2024 (plus OLMo 3, OLMo 2's block with sliding layers).

Each reader takes a transformers config and returns :class:`~llmviz.model.config.ModelConfig`
fields, checking every field that would change the computation: a value llmviz cannot represent
raises ``NotImplementedError`` (a feature llmviz lacks) or ``ValueError`` (a value that
contradicts the family), naming the field. The 2025-26 families are in :mod:`._readers_2025`.
"""

from __future__ import annotations

from typing import Any

from ._layout import FUSED_GATE_UP, FUSED_QKV, stores
from .rope import rope_parameters_of, rope_spec

__all__ = ["ACT", "READERS", "activation", "attr", "check_glu_silu", "decoder", "every_layer_window",
           "gemma", "gemma2", "gemma3_text", "gpt2", "llama", "mistral", "olmo2", "olmo3", "phi3",
           "qwen2", "qwen3", "require", "rope_by_layer_type", "smollm3", "windows"]

ACT = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
       "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu", "relu2": "relu2"}


# ----------------------------------------------------------------------------- helpers
def attr(c: Any, name: str, default: Any = None) -> Any:
    value = getattr(c, name, default)
    return default if value is None else value


def require(c: Any, name: str, allowed: Any, why: str) -> None:
    value = getattr(c, name, None)
    ok = value in allowed if isinstance(allowed, tuple) else value == allowed
    if not ok:
        raise NotImplementedError(f"{c.model_type}: {name}={value!r} is not supported ({why})")


def activation(c: Any, name: str) -> str:
    value = getattr(c, name, None)
    if value not in ACT:
        raise NotImplementedError(
            f"{c.model_type}: {name}={value!r} is not supported; llmviz has {sorted(ACT)}"
        )
    return ACT[value]


def windows(c: Any) -> tuple[int | None, ...] | None:
    """Per-layer windows from ``layer_types`` ("full_attention" / "sliding_attention")."""
    types = getattr(c, "layer_types", None)
    if types is None:
        return None
    if len(types) != c.num_hidden_layers:
        raise ValueError(
            f"{c.model_type}: layer_types has {len(types)} entries for {c.num_hidden_layers} layers"
        )
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise NotImplementedError(f"{c.model_type}: layer types {unknown} are not supported")
    window = getattr(c, "sliding_window", None)
    if "sliding_attention" in types and not window:
        raise ValueError(f"{c.model_type}: sliding_attention layers but sliding_window={window!r}")
    out = tuple(window if t == "sliding_attention" else None for t in types)
    return out if any(w is not None for w in out) else None


def decoder(c: Any, *, allow_partial: bool = False, rope_params: dict | None = None,
            d_ff: int | None = None) -> dict[str, Any]:
    """Fields every RoPE decoder family shares (Llama's layout)."""
    if getattr(c, "use_bidirectional_attention", None):
        raise NotImplementedError(f"{c.model_type}: use_bidirectional_attention=True (llmviz is causal)")
    n_heads = c.num_attention_heads
    head_dim = attr(c, "head_dim", c.hidden_size // n_heads)
    params = rope_parameters_of(c) if rope_params is None else rope_params
    if set(params) & {"full_attention", "sliding_attention"}:
        raise NotImplementedError(
            f"{c.model_type}: rope_parameters per layer type is only read for gemma3_text and olmo3"
        )
    rope = rope_spec(params, head_dim=head_dim, max_position_embeddings=c.max_position_embeddings,
                     allow_partial=allow_partial, where=f"{c.model_type} rope_parameters")
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=n_heads, n_kv_heads=attr(c, "num_key_value_heads", n_heads), head_dim=head_dim,
        d_ff=c.intermediate_size if d_ff is None else d_ff, max_seq_len=c.max_position_embeddings,
        position="rope", rope_base=rope.base, rope_scaling=rope.scaling, rotary_dim=rope.rotary_dim,
        rope_layout="half", norm="rms", norm_eps=float(_eps(c)), placement="pre",
        ffn="swiglu", activation=activation(c, "hidden_act") if hasattr(c, "hidden_act") else None,
        bias=False, attn_bias=bool(getattr(c, "attention_bias", False)),
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)), layer_windows=windows(c),
    )


def _eps(c: Any) -> float:
    """The norms' epsilon: ``rms_norm_eps``, or ``layer_norm_eps`` in LayerNorm families."""
    for name in ("rms_norm_eps", "layer_norm_eps", "norm_epsilon"):
        try:
            value = getattr(c, name, None)
        except AttributeError:  # a field a config class removes raises on access
            value = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    raise ValueError(f"{c.model_type}: the config has no rms_norm_eps or layer_norm_eps")


def every_layer_window(c: Any) -> tuple[int, ...] | None:
    """``sliding_window`` on every layer (Mistral, Phi-3, Qwen3-MoE), or None when it is unset."""
    window = getattr(c, "sliding_window", None)
    return None if window is None else (int(window),) * c.num_hidden_layers


def check_glu_silu(c: Any, fields: dict) -> dict:
    if fields["activation"] != "silu":
        raise NotImplementedError(f"{c.model_type}: hidden_act={c.hidden_act!r}; this family uses silu")
    return fields


# ----------------------------------------------------------------------------- families
def llama(c: Any) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c))
    f["bias"] = bool(getattr(c, "mlp_bias", False))  # attn_bias keeps attention_bias
    return f


def mistral(c: Any) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c))
    f["layer_windows"] = every_layer_window(c)
    return f


def qwen2(c: Any) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c))
    f.update(attn_bias=True, o_bias=False)  # q/k/v always biased, o_proj never
    return f


def qwen3(c: Any) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c))
    f.update(qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="head")
    return f


def olmo2(c: Any, rope_params: dict | None = None) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c, rope_params=rope_params))
    f.update(placement="post_sublayer", qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="all")
    return f


def olmo3(c: Any) -> dict[str, Any]:
    """OLMo 2's block with sliding and full layers (``layer_types``), RoPE per layer type."""
    full, local_base = rope_by_layer_type(c)
    f = olmo2(c, rope_params=full)
    f["local_rope_base"] = local_base if f["layer_windows"] else None
    return f


@stores(fused=FUSED_QKV | FUSED_GATE_UP)
def phi3(c: Any) -> dict[str, Any]:
    f = check_glu_silu(c, decoder(c, allow_partial=True))
    f["layer_windows"] = every_layer_window(c)
    return f


def gemma(c: Any) -> dict[str, Any]:
    f = decoder(c)
    f.update(norm="rms_gemma", ffn="geglu", embed_scale=True)
    return f


def gemma2(c: Any, rope_params: dict | None = None) -> dict[str, Any]:
    f = decoder(c, rope_params=rope_params)
    f.update(norm="rms_gemma", ffn="geglu", embed_scale=True, placement="sandwich",
             activation=activation(c, "hidden_activation"),
             query_pre_attn_scalar=float(c.query_pre_attn_scalar),
             attn_softcap=attr(c, "attn_logit_softcapping"),
             final_softcap=attr(c, "final_logit_softcapping"))
    return f


def rope_by_layer_type(c: Any) -> tuple[dict, float | None]:
    """RoPE per layer type: the full layers' parameters and the sliding layers' plain base."""
    params = rope_parameters_of(c)
    nested = {k: params.pop(k) for k in ("full_attention", "sliding_attention") if k in params}
    if params and nested:
        raise ValueError(f"{c.model_type}: rope_parameters mixes per-layer-type and flat keys {sorted(params)}")
    full = nested.get("full_attention", params)
    head_dim = attr(c, "head_dim", c.hidden_size // c.num_attention_heads)
    spec = rope_spec(nested.get("sliding_attention", full), head_dim=head_dim,
                     max_position_embeddings=c.max_position_embeddings,
                     where=f"{c.model_type} rope_parameters['sliding_attention']")
    if spec.scaling is not None:
        raise NotImplementedError(
            f"{c.model_type}: sliding_attention rope_type={spec.kind!r}; llmviz scales only the "
            "global layers' RoPE (local layers use a plain base)"
        )
    return dict(full), spec.base


def gemma3_text(c: Any) -> dict[str, Any]:
    full, local_base = rope_by_layer_type(c)
    f = gemma2(c, rope_params=full)  # global layers: rope_base and rope_scaling
    f.update(qk_norm="rms_gemma", qk_norm_eps=float(c.rms_norm_eps), qk_norm_scope="head",
             local_rope_base=local_base if f["layer_windows"] else None)
    return f


@stores(prefix="transformer.")
def gpt2(c: Any) -> dict[str, Any]:
    require(c, "scale_attn_by_inverse_layer_idx", (False, None), "scores divided by layer index + 1; llmviz has no per-layer score scale")
    require(c, "add_cross_attention", (False, None), "llmviz models are decoder-only")
    return dict(
        vocab_size=c.vocab_size, d_model=c.n_embd, n_layers=c.n_layer, n_heads=c.n_head,
        d_ff=attr(c, "n_inner", 4 * c.n_embd), max_seq_len=c.n_positions, position="learned",
        norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre", ffn="mlp",
        activation=activation(c, "activation_function"), bias=True,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
        query_pre_attn_scalar=None if getattr(c, "scale_attn_weights", True) else 1.0,
    )


def smollm3(c: Any) -> dict[str, Any]:
    """Llama's layout with NoPE layers: ``no_rope_layers[i]`` is 1 where layer i rotates."""
    f = llama(c)
    flags = list(getattr(c, "no_rope_layers", None) or [1] * c.num_hidden_layers)
    if len(flags) != c.num_hidden_layers:
        raise ValueError(f"smollm3: no_rope_layers has {len(flags)} entries for "
                         f"{c.num_hidden_layers} layers")
    nope = tuple(i for i, use_rope in enumerate(flags) if not use_rope)
    f["nope_layers"] = nope or None
    return f


#: model_type -> reader, for the families above.
READERS = {"llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3, "gemma": gemma,
           "gemma2": gemma2, "gemma3_text": gemma3_text, "olmo2": olmo2, "olmo3": olmo3,
           "phi3": phi3, "gpt2": gpt2, "smollm3": smollm3}
