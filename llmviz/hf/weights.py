"""Load a Hugging Face checkpoint into a :class:`~llmviz.model.lm.DecoderLM`: every tensor used, or an error.

The loader first writes a *plan*: for every tensor of the llmviz model, the checkpoint tensor it
comes from (and, for fused projections, which rows). The checkpoint must then hold exactly the
planned tensors: one it lacks raises ``ValueError`` naming it, and so does one the plan never
reads (an unused tensor is a feature llmviz would silently drop, e.g. Qwen 2's q/k/v biases).

Renames (llmviz names follow HF Llama where they can; checkpoint names lose their ``model.``
or ``transformer.`` prefix):

* ``input_layernorm`` -> ``attn_norm``;
* ``post_attention_layernorm`` -> ``ffn_norm`` (pre-norm), ``post_attn_norm`` (Gemma 2/3
  sandwich) or ``attn_norm`` (OLMo 2, norm after the sublayer);
* ``pre_feedforward_layernorm`` -> ``ffn_norm``; ``post_feedforward_layernorm`` ->
  ``post_ffn_norm`` (sandwich) or ``ffn_norm`` (OLMo 2);
* fused projections, as the reader's :class:`~._layout.Layout` declares them: Phi-3's
  ``qkv_proj`` (rows q | k | v) -> ``q_proj``, ``k_proj``, ``v_proj``, and ``gate_up_proj``
  (rows gate | up) -> ``gate_proj``, ``up_proj`` (GLM stores the latter too); norm names and
  module paths a family renames come from the same declaration;
* GPT-2's ``c_attn`` (split like ``qkv_proj``), ``c_fc``, ``c_proj``: transposed, since its
  ``Conv1D`` stores ``(in, out)``; ``wte``/``wpe``/``ln_f``/``ln_1``/``ln_2`` ->
  ``embed_tokens``/``embed_positions``/``norm``/``attn_norm``/``ffn_norm``.

* mixtures of experts keep transformers 5's names (``mlp.gate``, ``mlp.experts.gate_up_proj``,
  ``mlp.experts.down_proj``, ``mlp.shared_experts``); Qwen2-MoE/Qwen3-Next's single
  ``mlp.shared_expert`` -> ``mlp.shared_experts``; gpt-oss's ``mlp.router`` -> ``mlp.gate``, and
  its experts, stored ``(E, C, 2F)`` with gate and up *interleaved* (columns g0 u0 g1 u1 ...),
  are transposed and de-interleaved into ``(E, 2F, C)`` (gate rows, then up rows);
* Qwen3-Next's attention ``q_proj`` holds, per head, the query rows then the output-gate rows
  (``[q_h | gate_h]``): split into ``q_proj`` and ``gate_proj``; its linear-attention layers'
  packed ``in_proj_qkvz``/``in_proj_ba`` are regrouped as
  :func:`llmviz.hf.layers.gated_deltanet_from_hf` does (``conv1d`` -> ``conv``, ``norm.weight``
  -> ``norm_weight``, ``out_proj`` -> ``o_proj``); Qwen3.5 stores them apart (``in_proj_qkv``: q, k, v
  one after another; ``in_proj_z``, ``in_proj_b``, ``in_proj_a``);
* DeepSeek-V3's multi-token-prediction layers (``layers.{n_layers}`` and beyond) are not part of
  the causal LM (Hugging Face does not load them either) and are skipped.

Shapes: ``qkv_proj`` is ``(H*D + 2*G*D, C)``, ``gate_up_proj`` ``(2*F, C)``, GPT-2's ``c_attn``
``(C, 3*C)``; H heads, G kv heads, D head dim, C model dim, F feed-forward width.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..model.config import ModelConfig
from ..model.lm import DecoderLM
from ._layout import LLAMA, Layout
from ._sources import LAYER_SOURCES, Source, flatten, grouped_source

__all__ = ["Source", "build_model", "load_checkpoint", "plan_for", "state_dict_of"]

_NORM_NAMES = {  # placement -> {HF norm name: llmviz norm name}
    "pre": {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"},
    "sandwich": {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attn_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffn_norm"},
    "post_sublayer": {"post_attention_layernorm": "attn_norm", "post_feedforward_layernorm": "ffn_norm"},
}
_GPT2 = {"attn.c_proj": "self_attn.o_proj", "mlp.c_fc": "mlp.up_proj", "mlp.c_proj": "mlp.down_proj",
         "ln_1": "attn_norm", "ln_2": "ffn_norm"}


def state_dict_of(model_or_state_dict: Any) -> dict[str, torch.Tensor]:
    """The tensors of a model or a state dict (a plain ``dict`` copy)."""
    if isinstance(model_or_state_dict, Mapping):
        sd = dict(model_or_state_dict)
    elif hasattr(model_or_state_dict, "state_dict"):
        sd = dict(model_or_state_dict.state_dict())
    else:
        raise TypeError(
            "expected a Hugging Face model or its state_dict(), got "
            f"{type(model_or_state_dict).__name__}"
        )
    bad = [k for k, v in sd.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise TypeError(f"a state_dict maps names to tensors; entries {bad[:3]} are not str -> Tensor")
    return sd


def plan_for(config: ModelConfig, family: str, target_keys: list[str],
             layout: Layout = LLAMA) -> dict[str, Source]:
    """For each llmviz tensor name in ``target_keys``, its :class:`Source` in the checkpoint
    (checkpoint names without the ``model.``/``transformer.`` prefix), following the family's
    declared ``layout`` (fused projections, norm names, renamed modules)."""
    if family == "gpt2":
        return {k: _gpt2_source(k, config) for k in target_keys}
    inverse = {ours: hf for hf, ours in (layout.norms or _NORM_NAMES[config.placement]).items()}
    plan = {}
    for key in target_keys:
        if not key.startswith("layers."):
            plan[key] = Source(layout.top.get(key, key))  # embed_tokens, norm (lm_head: the loader)
            continue
        if key.count(".") == 2:  # a tensor held by the layer itself (Gemma 4's layer_scalar)
            plan[key] = Source(key)
            continue
        _, i, module, rest = key.split(".", 3)
        if module in inverse:
            plan[key] = Source(f"layers.{i}.{inverse[module]}.{rest}")
        elif layout.qkv_grouped and module == "self_attn" and rest.split(".")[0] in ("q_proj", "k_proj", "v_proj"):
            plan[key] = grouped_source(i, rest, config, layout.qkv_grouped)
        elif layout.fused_name(rest.split(".")[0]) is not None:
            plan[key] = _fused_source(i, module, rest, config, layout)
        elif f"{module}.{rest}" in layout.renames:  # one tensor renamed
            flat = f"{module}.{rest}" in layout.flattened
            plan[key] = Source(f"layers.{i}.{layout.renames[f'{module}.{rest}']}",
                               fn=flatten if flat else None)
        elif f"{module}.{rest.split('.')[0]}" in layout.renames:  # a module renamed
            name, tail = rest.split(".", 1)
            plan[key] = Source(f"layers.{i}.{layout.renames[f'{module}.{name}']}.{tail}")
        elif family in LAYER_SOURCES:
            plan[key] = LAYER_SOURCES[family](i, module, rest, config) or Source(key)
        else:
            plan[key] = Source(key)
    return plan


def _fused_source(i: str, module: str, rest: str, c: ModelConfig, layout: Layout) -> Source:
    """Rows of a fused projection: its parts stored one after another."""
    name, tail = rest.split(".", 1)
    fused = layout.fused_name(name)
    width = {"q_proj": c.n_heads * c.head_dim, "k_proj": c.n_kv_heads * c.head_dim,
             "v_proj": c.n_kv_heads * c.head_dim, "gate_proj": c.d_ff, "up_proj": c.d_ff}
    parts = layout.fused[fused]
    start = sum(width[p] for p in parts[:parts.index(name)])
    return Source(f"layers.{i}.{module}.{fused}.{tail}", (start, start + width[name]))


def _gpt2_source(key: str, c: ModelConfig) -> Source:
    top = {"embed_tokens.weight": "wte.weight", "embed_positions.weight": "wpe.weight",
           "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias"}
    if key in top:
        return Source(top[key])
    if not key.startswith("layers."):
        return Source(key)
    _, i, rest = key.split(".", 2)
    C = c.d_model
    for j, proj in enumerate(("q_proj", "k_proj", "v_proj")):
        if rest.startswith(f"self_attn.{proj}."):
            kind = rest.rsplit(".", 1)[1]
            return Source(f"h.{i}.attn.c_attn.{kind}", (j * C, (j + 1) * C), kind == "weight")
    for hf, ours in _GPT2.items():
        if rest.startswith(ours + "."):
            kind = rest.rsplit(".", 1)[1]
            return Source(f"h.{i}.{hf}.{kind}", None, kind == "weight" and not hf.startswith("ln"))
    return Source(key)


def _strip_prefix(sd: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k.removeprefix(prefix): v for k, v in sd.items()}


def _take(sd: dict[str, torch.Tensor], src: Source) -> torch.Tensor:
    value = sd[src.key]
    if src.transpose:
        value = value.t()
    if src.rows is not None:
        value = value[src.rows[0]:src.rows[1]]
    if src.fn is not None:
        value = src.fn(value)
    return value


def _check_fused(sd: dict, plan: dict[str, Source]) -> None:
    ends: dict[str, int] = {}
    for src in plan.values():
        if src.rows is not None:
            ends[src.key] = max(ends.get(src.key, 0), src.rows[1])
    for key, end in ends.items():
        rows = sd[key].shape[1 if _transposed(plan, key) else 0]
        if rows != end:
            raise ValueError(
                f"fused tensor {key!r} has {rows} rows but the config's heads/sizes account for "
                f"{end}; the checkpoint does not match its config"
            )


def _transposed(plan: dict[str, Source], key: str) -> bool:
    return any(s.transpose for s in plan.values() if s.key == key)


def build_model(config: ModelConfig, layout: Layout = LLAMA, hf_config: Any = None) -> DecoderLM:
    """``DecoderLM(config)``, then the family's ``layout.adapt(model, hf_config)`` if it declares one."""
    model = DecoderLM(config)
    if layout.adapt is not None:
        if hf_config is None:
            raise ValueError("this family adapts the built model to its transformers config; pass "
                             "hf_config= (the model's config)")
        model = layout.adapt(model, hf_config)
    return model


def load_checkpoint(sd: dict[str, torch.Tensor], config: ModelConfig, family: str,
                    layout: Layout = LLAMA, hf_config: Any = None) -> DecoderLM:
    """A :class:`DecoderLM` built from ``config`` (and adapted to ``hf_config`` where the
    ``layout`` says so, :func:`build_model`) holding the tensors of ``sd`` (strict), stored as
    ``layout`` declares."""
    sd = _strip_prefix(sd, layout.prefix)
    if layout.stored_layers != "layers":  # BLOOM's h.{i}. -> layers.{i}.
        stored = layout.stored_layers + "."
        sd = {"layers." + k[len(stored):] if k.startswith(stored) else k: v for k, v in sd.items()}
    if layout.mtp_layers:  # multi-token-prediction layers: not part of the causal LM
        sd = {k: v for k, v in sd.items()
              if not (k.startswith("layers.") and int(k.split(".")[1]) >= config.n_layers)}
    model = build_model(config, layout, hf_config)
    target = model.state_dict()
    plan = plan_for(config, family, [k for k in target if k != "lm_head.weight"], layout)
    embed_key = plan["embed_tokens.weight"].key
    used = {src.key for src in plan.values()}
    missing = sorted(k for k in used if k not in sd)
    head = sd.get("lm_head.weight")
    if config.tie_embeddings:
        if head is not None and embed_key in sd and not torch.equal(head, sd[embed_key]):
            raise ValueError(
                "tie_word_embeddings=True but the checkpoint's lm_head.weight differs from its "
                f"{embed_key}; set config.tie_word_embeddings=False to load an untied head"
            )
    elif head is None:
        missing.append("lm_head.weight (tie_word_embeddings=False: an untied output matrix)")
    used.add("lm_head.weight")
    if missing:
        raise ValueError(f"the checkpoint lacks tensors the {family} config implies: {missing[:6]}"
                         f"{' ...' if len(missing) > 6 else ''}; is the config the model's own?")
    unused = sorted(k for k in sd if k not in used)
    if unused:
        raise ValueError(
            f"{len(unused)} checkpoint tensor(s) would be left unused, so the llmviz model would "
            f"compute something else: {unused[:6]}{' ...' if len(unused) > 6 else ''}. The "
            f"{family} config does not describe them; llmviz refuses rather than drop them"
        )
    _check_fused(sd, plan)
    ours = {key: _take(sd, src) for key, src in plan.items()}
    ours["lm_head.weight"] = ours["embed_tokens.weight"] if config.tie_embeddings else head
    for key, value in ours.items():
        if value.shape != target[key].shape:
            raise ValueError(
                f"{key}: checkpoint shape {tuple(value.shape)} != shape {tuple(target[key].shape)} "
                "implied by the config; the checkpoint does not match its config"
            )
    model.load_state_dict({k: v.contiguous() for k, v in ours.items()}, strict=True)
    return model
