"""Where the loader finds one llmviz tensor: :class:`Source`, and the families whose tensors need
more than a rename (q/k/v fused by key/value head, gpt-oss's interleaved experts, Qwen3-Next's
packed projections). :mod:`.weights` plans with them; the rules are described there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..model.config import ModelConfig
from .layers import split_ba, split_qkvz

__all__ = ["LAYER_SOURCES", "Source", "flatten", "grouped_source"]


@dataclass(frozen=True)
class Source:
    """Where one llmviz tensor comes from: ``key``, optional ``rows`` slice, and whether the
    stored matrix is transposed (GPT-2's ``Conv1D``), in which case rows are taken after ``.t()``;
    ``fn`` rearranges the stored tensor (after the above) where a slice is not enough."""

    key: str
    rows: tuple[int, int] | None = None
    transpose: bool = False
    fn: Callable[[torch.Tensor], torch.Tensor] | None = field(default=None, compare=False)


_QKV = ("q_proj", "k_proj", "v_proj")


def grouped_source(i: str, rest: str, c: ModelConfig, fused: str) -> Source:
    """Rows of q, k or v in a projection fused by key/value head, ``[group g: its r = H/G query
    heads | k_g | v_g]`` (r = 1: by head; G = 1: q | k | v)."""
    name, tail = rest.split(".", 1)
    D, G, r = c.head_dim, c.n_kv_heads, c.n_heads // c.n_kv_heads
    start, stop = {"q_proj": (0, r * D), "k_proj": (r * D, (r + 1) * D),
                   "v_proj": ((r + 1) * D, (r + 2) * D)}[name]
    return Source(f"layers.{i}.{fused}.{tail}", fn=_rows_per_group(G, (r + 2) * D, start, stop))


def flatten(w: torch.Tensor) -> torch.Tensor:
    """A tensor stored with extra singleton dimensions, as the vector llmviz holds."""
    if any(n != 1 for n in w.shape[:-1]):
        raise ValueError(f"expected a vector stored as {(1,) * (w.dim() - 1) + (w.shape[-1],)}, "
                         f"got shape {tuple(w.shape)}; the checkpoint does not match its config")
    return w.reshape(-1)


def _deinterleave(w: torch.Tensor) -> torch.Tensor:
    """``(..., 2F)`` with gate and up interleaved -> gate columns then up columns."""
    return torch.cat([w[..., 0::2], w[..., 1::2]], dim=-1)


def _gpt_oss_source(i: str, module: str, rest: str, c: ModelConfig) -> Source | None:
    if module != "mlp":
        return None
    if rest.startswith("gate."):
        return Source(f"layers.{i}.mlp.router.{rest.split('.', 1)[1]}")
    t12 = lambda w: w.transpose(1, 2)  # noqa: E731
    fns = {"experts.gate_up_proj": lambda w: _deinterleave(w).transpose(1, 2),
           "experts.gate_up_proj_bias": _deinterleave, "experts.down_proj": t12,
           "experts.down_proj_bias": None}
    if rest in fns:
        return Source(f"layers.{i}.mlp.{rest}", fn=fns[rest])
    return None


def _shared_expert_source(i: str, module: str, rest: str, c: ModelConfig) -> Source | None:
    if module == "mlp" and rest.startswith("shared_experts."):
        return Source(f"layers.{i}.mlp.shared_expert.{rest.split('.', 1)[1]}")
    return None


def _rows_per_group(groups: int, width: int, start: int, stop: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """Rows ``[start, stop)`` of each of ``groups`` consecutive blocks of ``width`` rows."""
    def take(w: torch.Tensor) -> torch.Tensor:
        if w.shape[0] != groups * width:
            raise ValueError(f"packed tensor has {w.shape[0]} rows; the config's heads account for "
                             f"{groups} x {width}; the checkpoint does not match its config")
        return w.reshape(groups, width, *w.shape[1:])[:, start:stop].reshape(-1, *w.shape[1:])
    return take


def _qwen3_next_source(i: str, module: str, rest: str, c: ModelConfig) -> Source | None:
    if module == "mlp":
        return _shared_expert_source(i, module, rest, c)
    name = rest.split(".")[0]
    if module == "self_attn" and name in ("q_proj", "gate_proj"):
        D = c.head_dim
        start = 0 if name == "q_proj" else D
        return Source(f"layers.{i}.self_attn.q_proj.weight", fn=_rows_per_group(c.n_heads, 2 * D, start, start + D))
    if module != "linear_attn":
        return None
    Hk, Hv, D = c.linear_key_heads or c.linear_heads, c.linear_heads, c.linear_head_dim
    qkvz = ("q_proj", "k_proj", "v_proj", "z_proj")
    if name in qkvz:  # the regrouping of llmviz.hf.layers.gated_deltanet_from_hf
        j = qkvz.index(name)
        return Source(f"layers.{i}.linear_attn.in_proj_qkvz.weight",
                      fn=lambda w: split_qkvz(w, Hk, Hv, D, D)[j])
    if name in ("b_proj", "a_proj"):
        j = 0 if name == "b_proj" else 1
        return Source(f"layers.{i}.linear_attn.in_proj_ba.weight", fn=lambda w: split_ba(w, Hk, Hv)[j])
    renamed = {"conv": "conv1d", "norm_weight": "norm", "o_proj": "out_proj"}
    if name in renamed:
        tail = rest.split(".", 1)[1] if "." in rest else "weight"
        return Source(f"layers.{i}.linear_attn.{renamed[name]}.{tail}")
    return None


def _qwen3_5_source(i: str, module: str, rest: str, c: ModelConfig) -> Source | None:
    """Qwen3-Next's layout, but the linear-attention projections stored apart: ``in_proj_qkv``
    holds q, k, v one after another (each head-major), ``in_proj_z``/``_b``/``_a`` the rest."""
    name = rest.split(".")[0]
    if module != "linear_attn" or name not in ("q_proj", "k_proj", "v_proj", "z_proj", "b_proj", "a_proj"):
        return _qwen3_next_source(i, module, rest, c)
    if name in ("z_proj", "b_proj", "a_proj"):
        return Source(f"layers.{i}.linear_attn.in_proj_{name[0]}.weight")
    key = (c.linear_key_heads or c.linear_heads) * c.linear_head_dim
    value = c.linear_heads * c.linear_head_dim
    start, stop = {"q_proj": (0, key), "k_proj": (key, 2 * key), "v_proj": (2 * key, 2 * key + value)}[name]
    return Source(f"layers.{i}.linear_attn.in_proj_qkv.weight", fn=_rows_per_group(1, 2 * key + value, start, stop))


LAYER_SOURCES = {"gpt_oss": _gpt_oss_source, "qwen2_moe": _shared_expert_source,
                  "qwen3_next": _qwen3_next_source, "qwen3_5_text": _qwen3_5_source,
                  "qwen3_5_moe_text": _qwen3_5_source}
