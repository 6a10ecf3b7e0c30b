"""Family reader for :func:`llmviz.hf.config_from_hf`: Llama 4's text model (``llama4_text``).

What the config holds: Llama's grouped attention with interleaved RoPE (complex rotation),
``"chunked_attention"`` layers as chunked local attention (``local_attention="chunked"``,
``attention_chunk_size``), NoPE layers where ``no_rope_layers[i]`` is 0, dense SwiGLU layers of
width ``intermediate_size_mlp`` and mixture layers (``moe_layers``) of sigmoid-weighted top-k
experts of width ``intermediate_size`` plus one shared expert. What the built model adds (the
layout's ``adapt``): experts that scale their input by the routing weight
(:class:`~llmviz.moe.input_scaled.InputScaledMoE`), a weightless RMS norm of q and k after RoPE
(``use_qk_norm``, :class:`~llmviz.attention.llama4_qk.RotaryThenRMS`) and the NoPE layers' query
temperature (``attn_temperature_tuning``, :class:`~llmviz.attention.llama4_qk.QueryTemperature`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..attention.llama4_qk import QueryTemperature, RotaryThenRMS
from ..model.builder import moe_kwargs
from ..moe.input_scaled import InputScaledMoE
from ._layout import stores
from ._readers import attr, check_glu_silu, decoder
from ._sources import LAYER_SOURCES, Source

__all__ = ["READERS_LLAMA4", "llama4_text"]


def _adapt(model: Any, c: Any) -> Any:
    cfg = model.config
    for i, block in enumerate(model.layers):
        device = block.attn_norm.weight.device
        attn = block.self_attn
        if attn.rope is not None and attr(c, "use_qk_norm", False):
            attn.rope = RotaryThenRMS(attn.rope, float(c.rms_norm_eps))
        elif attn.rope is None and attr(c, "attn_temperature_tuning", False):
            attn.rope = QueryTemperature(float(c.floor_scale), float(c.attn_scale))
        if block.is_moe:
            with torch.device(device):
                block.mlp = InputScaledMoE(cfg.d_model, **moe_kwargs(cfg))
    return model


def _experts_source(i: str, module: str, rest: str, config: Any):
    """Llama 4 stores experts as ``(E, C, 2F)`` and ``(E, F, C)``: transposed for llmviz."""
    if module == "mlp" and rest in ("experts.gate_up_proj", "experts.down_proj"):
        return Source(f"layers.{i}.feed_forward.{rest}", fn=lambda w: w.transpose(1, 2))
    return None


@stores(adapt=_adapt, renames={"mlp.gate_proj": "feed_forward.gate_proj", "mlp.up_proj": "feed_forward.up_proj",
                               "mlp.down_proj": "feed_forward.down_proj", "mlp.gate": "feed_forward.router",
                               "mlp.shared_experts": "feed_forward.shared_expert"})
def llama4_text(c: Any) -> dict[str, Any]:
    """Llama 4's text model (module docstring)."""
    types = list(attr(c, "layer_types", ["full_attention"] * c.num_hidden_layers))
    unknown = sorted(set(types) - {"chunked_attention", "full_attention"})
    if unknown or len(types) != c.num_hidden_layers:
        raise ValueError(f"llama4_text: layer_types={types!r}; expected 'chunked_attention' or "
                         f"'full_attention' for each of the {c.num_hidden_layers} layers")
    plain = copy.copy(c)
    plain.layer_types = None  # the chunked layers are read below, not as sliding windows
    f = check_glu_silu(c, decoder(plain, d_ff=c.intermediate_size_mlp))
    flags = list(c.no_rope_layers)
    if len(flags) != c.num_hidden_layers:
        raise ValueError(f"llama4_text: no_rope_layers has {len(flags)} entries for {c.num_hidden_layers} layers")
    nope = tuple(i for i, use_rope in enumerate(flags) if not use_rope)
    chunks = tuple(int(c.attention_chunk_size) if t == "chunked_attention" else None for t in types)
    sparse = tuple(int(i) for i in (c.moe_layers or ()))
    f.update(rope_layout="interleaved", nope_layers=nope or None, local_attention="chunked",
             layer_windows=chunks if any(chunks) else None)
    if sparse:
        f.update(n_experts=c.num_local_experts, experts_top_k=c.num_experts_per_tok,
                 expert_d_ff=c.intermediate_size, n_shared_experts=1, shared_expert_d_ff=c.intermediate_size,
                 moe_score="sigmoid", moe_normalize=False, moe_layers=sparse)
    return f


LAYER_SOURCES["llama4_text"] = _experts_source

#: model_type -> reader, for the families above.
READERS_LLAMA4 = {"llama4_text": llama4_text}
