"""Read the architecture of a Hugging Face config for :func:`llmviz.hf.anatomy`, from the family
reader's own declaration.

The :class:`~llmviz.model.config.ModelConfig` that :func:`llmviz.hf.config_from_hf` reads is
built on the meta device (no memory allocated) and counted tensor by tensor, so anatomy holds no
second description of any family: its counts are those of the model the loader would build (the
tests compare them with the parameters of the model transformers builds from the same config too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..attention.kda_layer import KimiDeltaAttention
from ..attention.latent_nope import NoRotation
from ..attention.short_conv import ShortConv
from ..ffn import FFN_KINDS
from ..model.config import ModelConfig
from ._layout import layout_of
from .config import SUPPORTED, config_from_hf, family_of
from .weights import build_model

__all__ = ["NORM_LABELS", "PLACEMENT_LABELS", "LayerAnatomy", "read_architecture"]


@dataclass(frozen=True)
class LayerAnatomy:
    """One decoder layer.

    Attributes:
        index: layer number.
        attention: ``"global"``, ``"sliding"``, ``"chunked"`` (Llama 4), ``"latent"`` (DeepSeek MLA), ``"linear"``
            (Qwen3-Next's gated DeltaNet, Kimi Linear's KDA: a fixed-size state instead of a growing cache) or
            ``"conv"`` (LFM2's gated short convolution: a state of its last inputs).
        window: keys a query sees in a sliding layer (None = all).
        position: ``"rope"``, ``"nope"``, ``"none"`` (linear attention and convolutions: order
            enters through the recurrence or the kernel) or ``"learned"`` (added once at the input).
        rope_base: RoPE theta of this layer (None without RoPE).
        rope_scaling: e.g. ``"yarn x32"`` (None when unscaled).
        rotary_dim: rotating features per head (None = the whole head).
        ffn: ``"dense"`` or ``"moe"``.
        params: parameters of the layer (all experts included).
        active_params: parameters one token uses (routed experts: only the chosen ones).
        kv_elements: cache entries per token (keys and values, or MLA's latent and rope key, and
            DeepSeek-V3.2's indexer key).
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


@dataclass
class _Arch:
    """Model-wide facts (the :class:`~llmviz.hf.anatomy.Anatomy` fields of the same names)."""

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
    sinks: bool = False
    output_gate: bool = False
    latent_dim: int | None = None


#: how anatomy names llmviz's norm kinds and placements
NORM_LABELS = {"rms": "rms", "rms_gemma": "rms (1 + w)", "layer": "layer", "layer_nobias": "layer (no bias)"}
PLACEMENT_LABELS = {"pre": "pre", "sandwich": "sandwich", "post_sublayer": "post (sublayer output)",
                    "post": "post"}


def _numel(module: torch.nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def _scaling(cfg: ModelConfig) -> str | None:
    s = cfg.rope_scaling
    return None if s is None else f"{s.kind} x{s.factor}"


def read_architecture(c: Any) -> tuple[ModelConfig, _Arch, list[LayerAnatomy], int]:
    """``(the reader's ModelConfig, model-wide facts, layers, parameters outside the layers)``
    of a transformers config of a supported family."""
    cfg = config_from_hf(c)
    with torch.device("meta"):
        model = build_model(cfg, layout_of(SUPPORTED[family_of(c)]), c)
    glu = cfg.ffn not in ("mlp", "xielu")  # the two plain (ungated) feed-forward kinds
    act = getattr(c, "hidden_activation", None) or getattr(c, "hidden_act", None) or getattr(
        c, "activation_function", None) or cfg.activation or FFN_KINDS[cfg.ffn]  # the config's own name
    arch = _Arch(
        norm=NORM_LABELS[cfg.norm], placement=("parallel" + (" (two norms)" if model.layers[0].ffn_norm is not None else ""))
        if cfg.parallel else PLACEMENT_LABELS[cfg.placement],
        ffn="glu" if glu else "mlp", activation=act,
        qk_norm=None if cfg.qk_norm is None else ("per head" if cfg.qk_norm_scope == "head" else "whole projection")
        + (", after RoPE" if cfg.attn_kind == "qk_norm_after_rope" else ""),
        d_ff=cfg.d_ff if getattr(c, "intermediate_size", None) is not None or not cfg.n_experts else None,
        sinks=cfg.attn_sinks, output_gate=cfg.attn_output_gate,
        latent_dim=cfg.kv_lora_rank if cfg.attn_kind == "mla" else None)
    if cfg.n_experts:
        arch.ffn, arch.experts, arch.experts_active = "moe (glu experts)", cfg.n_experts, cfg.experts_top_k
        arch.expert_d_ff = cfg.expert_d_ff or cfg.d_ff
        shared = cfg.n_shared_experts or (1 if cfg.shared_expert_d_ff else 0)
        arch.shared_experts = shared or None
    H, G, D = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    layers = []
    for i, block in enumerate(model.layers):
        total = _numel(block)
        active = total
        if cfg.is_moe_layer(i):
            experts = _numel(block.mlp.experts)
            active = total - experts + experts * cfg.experts_top_k // cfg.n_experts
        window = cfg.window_for(i)
        nope = i in (cfg.nope_layers or ())
        rope = cfg.position == "rope" and not nope
        base = cfg.local_rope_base if window is not None and cfg.local_rope_base else cfg.rope_base
        rotary = cfg.rotary_dim if cfg.rotary_dim not in (None, D) else None
        if cfg.mixer_for(i) == "linear" or isinstance(block.self_attn, KimiDeltaAttention):
            kind, kv, scores, rope = "linear", 0, 0, False
        elif isinstance(block.self_attn, ShortConv):  # LFM2's conv layers (the layout's adapt)
            kind, kv, scores, rope = "conv", 0, 0, False
        elif cfg.attn_kind == "mla":
            index = getattr(getattr(block.self_attn, "indexer", None), "head_dim", 0)  # DeepSeek-V3.2's indexer key
            kind, kv, rotary = "latent", cfg.kv_lora_rank + cfg.qk_rope_head_dim + index, cfg.qk_rope_head_dim
            scores = H * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim)
            if isinstance(block.self_attn.rope, NoRotation):  # Kimi Linear: nothing rotates
                rope, nope = False, True
        else:
            local = "chunked" if cfg.local_attention == "chunked" else "sliding"  # Llama 4's chunks
            a = block.self_attn  # its own heads (Gemma 4's global layers), no cache where it reuses keys
            g, d = getattr(a, "n_kv_heads", G), getattr(a, "head_dim", D)
            kind, scores = (local if window is not None else "global"), H * 2 * d
            kv = 0 if getattr(a, "reuses_kv", False) else 2 * g * d
        position = "none" if kind in ("linear", "conv") else ("rope" if rope else ("nope" if nope else cfg.position))
        layers.append(LayerAnatomy(
            index=i, attention=kind, window=window, position=position,
            rope_base=base if rope else None,
            rope_scaling=_scaling(cfg) if rope and not (window is not None and cfg.local_rope_base) else None,
            rotary_dim=rotary if rope else None, ffn="moe" if cfg.is_moe_layer(i) else "dense",
            params=total, active_params=active, kv_elements=kv, score_dims=scores))
    outside = _numel(model) - sum(layer.params for layer in layers)
    return cfg, arch, layers, outside
