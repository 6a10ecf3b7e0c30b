"""Family reader for :func:`llmviz.hf.config_from_hf`: DeepSeek-V3.2 (``deepseek_v32``).

What the config holds: DeepSeek-V3's latent attention (queries always through the query latent,
rope features always interleaved) and its router (sigmoid scores with a choice bias,
group-limited top-k, routed scaling, shared experts) on the layers ``mlp_layer_types`` marks
``"sparse"``. What the built model adds (the layout's ``adapt``): every layer's attention is an
:class:`~llmviz.attention.indexer.IndexedLatentAttention`, whose lightning indexer
(``index_n_heads`` heads of width ``index_head_dim``) keeps the ``index_topk`` best keys of each
query (all of them while the sequence is no longer than ``index_topk``).
"""

from __future__ import annotations

from typing import Any

import torch

from ..attention.indexer import IndexedLatentAttention
from ..model.kinds import mla_kwargs
from ._layout import stores
from ._readers import attr
from ._readers_2025 import mla, sigmoid_experts, sparse_layer_types

__all__ = ["READERS_DSA", "deepseek_v32"]


def _index_sizes(c: Any) -> dict[str, int]:
    sizes = {}
    for field, name in (("index_n_heads", "index_heads"), ("index_head_dim", "index_head_dim"),
                        ("index_topk", "index_topk")):
        v = attr(c, field, None)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"deepseek_v32: {field}={v!r}; the indexer needs a positive int")
        sizes[name] = v
    if sizes["index_head_dim"] < c.qk_rope_head_dim:
        raise ValueError(f"deepseek_v32: index_head_dim={sizes['index_head_dim']} is below qk_rope_head_dim="
                         f"{c.qk_rope_head_dim}; the indexer rotates its first qk_rope_head_dim features")
    return sizes


def _adapt(model: Any, c: Any) -> Any:
    cfg, sizes = model.config, _index_sizes(c)
    for block in model.layers:
        with torch.device(block.attn_norm.weight.device):
            block.self_attn = IndexedLatentAttention(cfg.d_model, cfg.n_heads, **sizes, **mla_kwargs(cfg))
    return model


@stores(mtp_layers=True, adapt=_adapt)
def deepseek_v32(c: Any) -> dict[str, Any]:
    """DeepSeek-V3.2 (module docstring). Multi-token-prediction layers are skipped, as in
    DeepSeek-V3."""
    types = list(attr(c, "layer_types", None) or ["indexed_attention"] * c.num_hidden_layers)
    # transformers 5.17 names the same layer 'deepseek_sparse_attention'
    types = ["indexed_attention" if t == "deepseek_sparse_attention" else t for t in types]
    if len(types) != c.num_hidden_layers or set(types) != {"indexed_attention"}:
        raise ValueError(f"deepseek_v32: layer_types={types!r}; every one of the {c.num_hidden_layers} "
                         "layers is 'indexed_attention' (each has an indexer)")
    if attr(c, "q_lora_rank", None) is None:
        raise ValueError("deepseek_v32: q_lora_rank=None; DeepSeek-V3.2's attention and indexer read their "
                         "queries from the query latent, so it must be set")
    _index_sizes(c)
    f = mla(c)
    f["rope_layout"] = "interleaved"  # V3.2's attention always interleaves (it has no rope_interleave)
    return sigmoid_experts(c, f, sparse_layer_types(c))


#: model_type -> reader, for the family above.
READERS_DSA = {"deepseek_v32": deepseek_v32}
