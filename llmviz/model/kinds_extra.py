"""Kinds registered beside the core ones of :mod:`llmviz.model.kinds`, each with its own module.

Importing :mod:`llmviz.model` registers them (its ``__init__`` imports this module), so a config
can name them like any other kind and every count, check and list reads them from the same
registries:

* attention kind ``"qk_norm_after_rope"``: grouped query attention whose QK-norm acts on the
  rotated heads (HunYuan; :mod:`llmviz.attention.qk_norm_after_rope`). Its parameters are those
  of ``"standard"`` with the same QK-norm.
* feed-forward kind ``"xielu"``: a plain MLP with the trainable xIELU activation (Apertus;
  :mod:`llmviz.xielu`). :data:`llmviz.ffn.FFN_KINDS`, the name -> default activation table
  validation reads, gets its row here too.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..ffn import FFN_KINDS, FFNS
from ..xielu import xielu_mlp, xielu_mlp_params
from .kinds import ATTENTIONS, check_config

__all__ = ["qk_norm_after_rope"]


def qk_norm_after_rope(c: Any, layer_idx: int = 0, rope: nn.Module | None = None) -> nn.Module:
    """The ``"standard"`` layer of ``c`` with its QK-norm moved after RoPE."""
    check_config(c, "qk_norm_after_rope")
    from ..attention.qk_norm_after_rope import norm_after_rope

    return norm_after_rope(ATTENTIONS["standard"].build(c, layer_idx, rope))


ATTENTIONS.register("qk_norm_after_rope", build=qk_norm_after_rope,
                    params=lambda c: ATTENTIONS["standard"].params(c),
                    summary="grouped query attention, QK-norm on the rotated heads (HunYuan)")
FFNS.register("xielu", build=xielu_mlp, params=xielu_mlp_params, summary="two matrices, xIELU (Apertus)",
              activation="xielu")
FFN_KINDS["xielu"] = FFNS["xielu"].info["activation"]
