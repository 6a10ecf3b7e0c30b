"""Mixture of experts: a router picks k of E expert MLPs for each token.

* :mod:`.router`: :func:`route` (softmax or sigmoid scores, top-k, renormalisation, scaling,
  choice bias, group-limited routing), :class:`Router`, :func:`balance_bias_update`
  (DeepSeek-V3's auxiliary-loss-free balancing).
* :mod:`.dispatch`: sort tokens by expert, run each expert once, add back
  (:func:`plan_dispatch`, :func:`combine`), expert capacity and dropped tokens, and the slow
  reference :func:`dense_forward`.
* :mod:`.layer`: :class:`Experts`, :class:`MoELayer` (shared experts, capacity), :func:`fine_grained`.
* :mod:`.losses`: :func:`load_balancing_loss` (Switch/Mixtral) and :func:`router_z_loss` (ST-MoE).
* :mod:`.convert`: :func:`moe_from_hf` copies Hugging Face Mixtral, Qwen3-MoE and DeepSeek-V3 blocks.

Shape letters: N tokens, C model width, E experts, F expert width, k experts per token.
"""

from __future__ import annotations

from . import convert, dispatch, layer, losses, router
from .convert import HF_MOE_BLOCKS, moe_from_hf
from .dispatch import DispatchPlan, combine, dense_forward, expert_capacity, plan_dispatch
from .layer import Experts, MoEInfo, MoELayer, fine_grained
from .losses import BALANCE_FORMS, expert_fractions, load_balancing_loss, load_imbalance, router_z_loss
from .router import SCORE_KINDS, Router, Routing, balance_bias_update, route

__all__ = [
    "route", "Router", "Routing", "SCORE_KINDS", "balance_bias_update",
    "plan_dispatch", "DispatchPlan", "combine", "dense_forward", "expert_capacity",
    "Experts", "MoELayer", "MoEInfo", "fine_grained",
    "load_balancing_loss", "router_z_loss", "expert_fractions", "load_imbalance", "BALANCE_FORMS",
    "moe_from_hf", "HF_MOE_BLOCKS",
    "router", "dispatch", "layer", "losses", "convert",
]
