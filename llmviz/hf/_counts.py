"""Read the architecture of a Hugging Face config, family by family, for :func:`llmviz.hf.anatomy`.

Each reader returns the model-wide facts and one :class:`LayerAnatomy` per layer, with exact
parameter counts (the tests compare them with the parameters of the model transformers builds
from the same config). Unlike the loader, anatomy also reads the families llmviz cannot run yet
(mixture of experts, latent attention, sinks, NoPE layers): describing a model needs no kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ANATOMY_FAMILIES", "LayerAnatomy", "read_architecture"]


@dataclass(frozen=True)
class LayerAnatomy:
    """One decoder layer.

    Attributes:
        index: layer number.
        attention: ``"global"``, ``"sliding"``, ``"latent"`` (DeepSeek MLA) or ``"linear"``
            (Qwen3-Next's gated DeltaNet: a fixed-size state instead of a growing cache).
        window: keys a query sees in a sliding layer (None = all).
        position: ``"rope"``, ``"nope"``, ``"none"`` (linear attention: order enters through
            its recurrence) or ``"learned"`` (added once at the input).
        rope_base: RoPE theta of this layer (None without RoPE).
        rope_scaling: e.g. ``"yarn x32"`` (None when unscaled).
        rotary_dim: rotating features per head (None = the whole head).
        ffn: ``"dense"`` or ``"moe"``.
        params: parameters of the layer (all experts included).
        active_params: parameters one token uses (routed experts: only the chosen ones).
        kv_elements: cache entries per token (keys and values, or MLA's latent and rope key).
    """

    index: int
    attention: str
    window: int | None
    position: str
    rope_base: float | None
    rope_scaling: str | None
    rotary_dim: int | None
    ffn: str
    params: int
    active_params: int
    kv_elements: int
    score_dims: int  # H * (D_qk + D_v): multiply-adds per key in the two attention matmuls


def _g(c: Any, name: str, default: Any = None) -> Any:
    value = getattr(c, name, default)
    return default if value is None else value


def _rope(c: Any, layer_type: str) -> tuple[float, str | None, float]:
    params = dict(_g(c, "rope_parameters", {}) or {})
    if layer_type in params:
        params = params[layer_type] or {}
    kind = params.get("rope_type", params.get("type", "default"))
    scaling = None if kind == "default" else f"{kind} x{params.get('factor', '?')}"
    return (float(params.get("rope_theta", _g(c, "rope_theta", 10000.0))), scaling,
            float(params.get("partial_rotary_factor", 1.0)))


#: Gated DeltaNet hybrids: Qwen3-Next's layers (Qwen3.5 stores the same weights unpacked)
_HYBRIDS = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")


def _layer_types(c: Any) -> list[str]:
    types = getattr(c, "layer_types", None)
    if types:
        return list(types)
    window = getattr(c, "sliding_window", None)
    kind = "sliding_attention" if window and c.model_type in ("mistral", "phi3", "mixtral") else "full_attention"
    return [kind] * c.num_hidden_layers


def _glu(C: int, F: int, bias: bool = False) -> int:
    return 3 * C * F + (2 * F + C if bias else 0)


@dataclass
class _Arch:
    norm: str
    placement: str
    ffn: str
    activation: str
    qk_norm: str | None
    d_ff: int | None
    experts: int | None = None
    experts_active: int | None = None
    shared_experts: int | None = None
    expert_d_ff: int | None = None


def read_architecture(c: Any) -> tuple[_Arch, list[LayerAnatomy], int]:
    """``(model-wide facts, layers, parameters outside the layers)`` of a transformers config."""
    if c.model_type == "gpt2":
        return _gpt2(c)
    if c.model_type == "deepseek_v3":
        return _deepseek_v3(c)
    if c.model_type not in ANATOMY_FAMILIES:
        raise NotImplementedError(
            f"anatomy has no reader for model_type {c.model_type!r}; it reads {sorted(ANATOMY_FAMILIES)}"
        )
    return _decoder(c)


def _decoder(c: Any) -> tuple[_Arch, list[LayerAnatomy], int]:
    """Llama-shaped families, with their variations (biases, QK-norm, norms, experts, NoPE)."""
    t = c.model_type
    C, H = c.hidden_size, c.num_attention_heads
    G = _g(c, "num_key_value_heads", H)
    D = _g(c, "head_dim", C // H)
    V, F = c.vocab_size, _g(c, "intermediate_size", None)  # None: Qwen3.5-MoE, experts only
    qkv_bias = bool(_g(c, "attention_bias", False)) or t == "qwen2" or bool(_g(c, "qkv_bias", False))
    o_bias = bool(_g(c, "attention_bias", False))
    attn = C * H * D + 2 * C * G * D + H * D * C + (H * D + 2 * G * D if qkv_bias else 0) + (C if o_bias else 0)
    hybrid = t in _HYBRIDS
    attn += C * H * D + (H * D if qkv_bias else 0) if hybrid else 0  # output gate rows
    qk_norm = "per head" if hybrid else {"qwen3": "per head", "qwen3_moe": "per head",
                                          "gemma3_text": "per head", "olmo2": "whole projection",
                                          "olmo3": "whole projection"}.get(t)
    attn += {"per head": 2 * D, "whole projection": (H + G) * D}.get(qk_norm, 0)
    attn += H if t == "gpt_oss" else 0  # one learned sink logit per head
    gemma = t.startswith("gemma") or hybrid  # norms scale by (1 + w)
    placement = {"gemma2": "sandwich", "gemma3_text": "sandwich", "olmo2": "post (sublayer output)",
                 "olmo3": "post (sublayer output)"}.get(t, "pre")
    norms = (4 if placement == "sandwich" else 2) * C
    arch = _Arch(norm="rms (1 + w)" if gemma else "rms", placement=placement, ffn="glu",
                 activation=_g(c, "hidden_activation", _g(c, "hidden_act", "silu")),
                 qk_norm=qk_norm, d_ff=F)
    dense = _glu(C, F, bool(_g(c, "mlp_bias", False))) if F else 0
    moe = _moe(c, arch)
    if not F and (moe is None or not all(_sparse(c, i) for i in range(c.num_hidden_layers))):
        raise ValueError(f"{t}: the config has no intermediate_size for its dense feed-forwards")
    types = _layer_types(c)
    no_rope = list(_g(c, "no_rope_layers", [1] * c.num_hidden_layers))  # SmolLM3: 0 = NoPE
    layers = []
    for i, kind in enumerate(types):
        base, scaling, partial = _rope(c, kind)
        ffn_kind, ffn_total, ffn_active = "dense", dense, dense
        if moe is not None and _sparse(c, i):
            ffn_kind, (ffn_total, ffn_active) = "moe", moe
        rope = bool(no_rope[i])
        if kind == "linear_attention":
            total = _linear_attention(c) + norms + ffn_total
            layers.append(LayerAnatomy(
                index=i, attention="linear", window=None, position="none", rope_base=None,
                rope_scaling=None, rotary_dim=None, ffn=ffn_kind, params=total,
                active_params=total - ffn_total + ffn_active, kv_elements=0, score_dims=0))
            continue
        total = attn + norms + ffn_total
        layers.append(LayerAnatomy(
            index=i, attention="sliding" if kind == "sliding_attention" else "global",
            window=c.sliding_window if kind == "sliding_attention" else None,
            position="rope" if rope else "nope", rope_base=base if rope else None,
            rope_scaling=scaling if rope else None,
            rotary_dim=int(D * partial) if rope and partial != 1.0 else None,
            ffn=ffn_kind, params=total, active_params=total - ffn_total + ffn_active,
            kv_elements=2 * G * D, score_dims=H * 2 * D))
    outside = V * C + C + (0 if c.tie_word_embeddings else V * C)
    return arch, layers, outside


def _sparse(c: Any, i: int) -> bool:
    if c.model_type in ("mixtral", "gpt_oss"):
        return True
    if i in (_g(c, "mlp_only_layers", []) or []):
        return False
    return (i + 1) % _g(c, "decoder_sparse_step", 1) == 0


def _moe(c: Any, arch: _Arch) -> tuple[int, int] | None:
    """(total, active) feed-forward parameters of a sparse layer, or None for dense families."""
    t, C = c.model_type, c.hidden_size
    E = _g(c, "num_local_experts", _g(c, "num_experts", 0))
    if t not in ("mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", *_HYBRIDS) or not E:
        return None
    k = c.num_experts_per_tok
    F = c.intermediate_size if t in ("mixtral", "gpt_oss") else c.moe_intermediate_size
    expert = _glu(C, F, bias=t == "gpt_oss")
    router = C * E + (E if t == "gpt_oss" else 0)
    shared = 0
    if t == "qwen2_moe" or t in _HYBRIDS:
        shared = _glu(C, c.shared_expert_intermediate_size) + C  # plus its sigmoid gate
        arch.shared_experts = 1
    arch.ffn, arch.experts, arch.experts_active, arch.expert_d_ff = "moe (glu experts)", E, k, F
    return router + E * expert + shared, router + k * expert + shared


def _linear_attention(c: Any) -> int:
    """Qwen3-Next gated DeltaNet: projections, depthwise causal conv, decay and gated norm."""
    C, nk, nv = c.hidden_size, c.linear_num_key_heads, c.linear_num_value_heads
    keys, values = nk * c.linear_key_head_dim, nv * c.linear_value_head_dim
    conv = (2 * keys + values) * c.linear_conv_kernel_dim
    return (C * (2 * keys + 2 * values) + C * 2 * nv + conv + 2 * nv
            + c.linear_value_head_dim + values * C)


def _deepseek_v3(c: Any) -> tuple[_Arch, list[LayerAnatomy], int]:
    C, H, V = c.hidden_size, c.num_attention_heads, c.vocab_size
    nope, rope, vd = c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
    r_q, r_kv = c.q_lora_rank, c.kv_lora_rank
    q = C * H * (nope + rope) if r_q is None else C * r_q + r_q + r_q * H * (nope + rope)
    attn = q + C * (r_kv + rope) + r_kv + r_kv * H * (nope + vd) + H * vd * C
    E, k, F = c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size
    shared = c.n_shared_experts * _glu(C, F)
    moe_total = C * E + E * _glu(C, F) + shared  # router (its score-correction bias is a buffer)
    moe_active = C * E + k * _glu(C, F) + shared
    arch = _Arch(norm="rms", placement="pre", ffn="moe (glu experts)", activation=c.hidden_act,
                 qk_norm=None, d_ff=c.intermediate_size, experts=E, experts_active=k,
                 shared_experts=c.n_shared_experts, expert_d_ff=F)
    base, scaling, _ = _rope(c, "full_attention")
    layers = []
    for i in range(c.num_hidden_layers):
        sparse = i >= c.first_k_dense_replace and i % _g(c, "moe_layer_freq", 1) == 0
        total, active = (moe_total, moe_active) if sparse else (_glu(C, c.intermediate_size),) * 2
        layers.append(LayerAnatomy(
            index=i, attention="latent", window=None, position="rope", rope_base=base,
            rope_scaling=scaling, rotary_dim=rope, ffn="moe" if sparse else "dense",
            params=attn + 2 * C + total, active_params=attn + 2 * C + active,
            kv_elements=r_kv + rope, score_dims=H * (nope + rope + vd)))
    outside = V * C + C + (0 if c.tie_word_embeddings else V * C)
    return arch, layers, outside


def _gpt2(c: Any) -> tuple[_Arch, list[LayerAnatomy], int]:
    C, V = c.n_embd, c.vocab_size
    F = _g(c, "n_inner", 4 * C)
    per = 4 * C * C + 4 * C + 2 * C * F + F + C + 4 * C
    arch = _Arch(norm="layer", placement="pre", ffn="mlp", activation=c.activation_function,
                 qk_norm=None, d_ff=F)
    layers = [LayerAnatomy(index=i, attention="global", window=None, position="learned",
                           rope_base=None, rope_scaling=None, rotary_dim=None, ffn="dense",
                           params=per, active_params=per, kv_elements=2 * C, score_dims=2 * C)
              for i in range(c.n_layer)]
    outside = V * C + c.n_positions * C + 2 * C + (0 if c.tie_word_embeddings else V * C)
    return arch, layers, outside


ANATOMY_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo2",
                    "phi3", "gpt2", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "gpt_oss",
                    "smollm3", "olmo3", *_HYBRIDS)
