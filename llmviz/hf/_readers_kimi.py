"""Family reader for :func:`llmviz.hf.config_from_hf`: Kimi Linear (``kimi_linear``).

What the config holds: ``layer_types`` marks each layer ``"linear_attention"`` (Kimi Delta
Attention) or ``"full_attention"`` (DeepSeek's latent attention, here without RoPE);
``mlp_layer_types`` marks each feed-forward ``"dense"`` (SwiGLU of ``intermediate_size``) or
``"sparse"`` (DeepSeek-V3's sigmoid router with a choice bias, group-limited top-k, routed scaling
and ``n_shared_experts`` shared experts). The ModelConfig read here describes the latent layers
and the feed-forwards; the layout's ``adapt`` then puts a
:class:`~llmviz.attention.kda_layer.KimiDeltaAttention` (``linear_num_heads`` heads of
``linear_head_dim``, a ``linear_conv_kernel_dim``-tap convolution, output norm eps
``rms_norm_eps``) in the token-mixer slot of the linear layers and a
:class:`~llmviz.attention.latent_nope.NoRotation` in the rotary slot of the latent ones, so
loading and anatomy count the same model.

Refused, by name: ``num_key_value_heads`` other than ``num_attention_heads`` (transformers' latent
attention expands keys to every head and then repeats them ``H / G`` times more, which fails
for ``G < H``), an odd ``qk_rope_head_dim`` (llmviz's latent attention keeps its rope features in
pairs even when nothing rotates them), layer types other than the two above, and any
``hidden_act`` but SiLU (it is also the convolution's activation).
"""

from __future__ import annotations

from typing import Any

import torch

from ..attention.kda_layer import KimiDeltaAttention
from ..attention.latent_nope import NoRotation
from ._layout import stores
from ._readers import attr
from ._readers_2025 import mla, sigmoid_experts, sparse_layer_types
from ._sources import LAYER_SOURCES, Source

__all__ = ["READERS_KIMI", "kda_layers", "kimi_linear"]


def kda_layers(c: Any) -> tuple[int, ...]:
    """The layers ``layer_types`` marks ``"linear_attention"`` (checked: one entry per layer, two kinds)."""
    types = list(attr(c, "layer_types", []))
    if len(types) != c.num_hidden_layers:
        raise ValueError(f"{c.model_type}: layer_types has {len(types)} entries for {c.num_hidden_layers} layers")
    unknown = sorted(set(types) - {"linear_attention", "full_attention"})
    if unknown:
        raise NotImplementedError(f"{c.model_type}: layer types {unknown} are not supported (llmviz "
                                  "reads 'linear_attention' and 'full_attention')")
    return tuple(i for i, t in enumerate(types) if t == "linear_attention")


def _adapt(model: Any, c: Any) -> Any:
    """Kimi delta attention in the linear layers; no rotation in the latent ones."""
    linear = kda_layers(c)
    for i, block in enumerate(model.layers):
        if i not in linear:
            block.self_attn.rope = NoRotation()
            continue
        with torch.device(block.attn_norm.weight.device):
            block.self_attn = KimiDeltaAttention(
                c.hidden_size, int(c.linear_num_heads), int(c.linear_head_dim),
                conv_kernel=int(c.linear_conv_kernel_dim), eps=float(c.rms_norm_eps))
        block.latent = False  # the block hands this mixer the cache itself, not latent slots
    return model


_GATE = "self_attn.forget_gate"


def _per_head(w: torch.Tensor) -> torch.Tensor:
    """``A_log`` stored ``(1, 1, H, 1)`` -> ``(H,)``."""
    if w.dim() != 4 or w.shape[0] != 1 or w.shape[1] != 1 or w.shape[3] != 1:
        raise ValueError(f"kimi_linear: A_log has shape {tuple(w.shape)}, expected (1, 1, H, 1); the "
                         "checkpoint does not match its config")
    return w.reshape(-1)


def _a_log_source(i: str, module: str, rest: str, config: Any) -> Source | None:
    if module == "self_attn" and rest == "A_log":
        return Source(f"layers.{i}.{_GATE}.A_log", fn=_per_head)
    return None


@stores(adapt=_adapt,
        renames={"self_attn.conv": "self_attn.conv1d", "self_attn.f_a_proj": f"{_GATE}.f_a_proj",
                 "self_attn.f_b_proj": f"{_GATE}.f_b_proj", "self_attn.dt_bias": f"{_GATE}.dt_bias",
                 "self_attn.norm_weight": "self_attn.o_norm.weight"})
def kimi_linear(c: Any) -> dict[str, Any]:
    """Kimi Linear (module docstring)."""
    kda_layers(c)
    H, G = c.num_attention_heads, attr(c, "num_key_value_heads", c.num_attention_heads)
    if G != H:
        raise NotImplementedError(
            f"kimi_linear: num_key_value_heads={G} differs from num_attention_heads={H}; transformers' "
            "KimiLinearAttention expands the latent to keys for every head and then repeats them H/G "
            "times more, which does not run; llmviz reads num_key_value_heads == num_attention_heads")
    if c.qk_rope_head_dim % 2:
        raise NotImplementedError(
            f"kimi_linear: qk_rope_head_dim={c.qk_rope_head_dim} is odd; llmviz's latent attention "
            "keeps its rope features in pairs even where nothing rotates them (an even width loads)")
    f = mla(c)  # refuses a hidden_act other than silu: the feed-forwards' and the convolution's
    return sigmoid_experts(c, f, sparse_layer_types(c))


LAYER_SOURCES["kimi_linear"] = _a_log_source

#: model_type -> reader, for the family above.
READERS_KIMI = {"kimi_linear": kimi_linear}
