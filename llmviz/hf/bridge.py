"""Bridge to Hugging Face ``transformers``: load Llama/GPT-2 weights, capture attention maps.

``transformers`` is imported lazily, inside the functions that need it: building the book and
using the rest of llmviz never requires it.

* :func:`from_hf_llama` / :func:`from_hf_gpt2` map a checkpoint's tensors one to one onto a
  :class:`~llmviz.models.DecoderLM` (the module names were chosen to match: ``q_proj`` ...
  ``down_proj``). GPT-2 stores its linear layers as ``Conv1D`` with transposed weights and a
  fused ``c_attn`` (q, k, v stacked along the output), which the loader splits.
* :func:`capture_attention` runs any HF model with ``output_attentions=True`` and returns the
  per-layer ``(B, H, T, S)`` weights (the format bertviz accepts and llmviz plots take).

Shape letters: B batch, T query length, S key length, H heads, C model dim.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..model.config import ModelConfig
from ..model.lm import DecoderLM

__all__ = ["config_from_hf_llama", "config_from_hf_gpt2", "from_hf_llama", "from_hf_gpt2", "capture_attention"]


def _state_dict(model_or_state_dict: Any) -> dict[str, torch.Tensor]:
    if isinstance(model_or_state_dict, Mapping):
        return dict(model_or_state_dict)
    if hasattr(model_or_state_dict, "state_dict"):
        return model_or_state_dict.state_dict()
    raise TypeError(
        "expected a Hugging Face model or its state_dict, got "
        f"{type(model_or_state_dict).__name__}"
    )


def _weights_and_config(hf_model_or_state_dict: Any, hf_config: Any) -> tuple[dict, Any]:
    if hf_config is None:
        hf_config = getattr(hf_model_or_state_dict, "config", None)
        if hf_config is None:
            raise ValueError("pass hf_config when giving a bare state_dict")
    return _state_dict(hf_model_or_state_dict), hf_config


def _take(sd: dict, key: str) -> torch.Tensor:
    for prefix in ("", "model.", "transformer."):
        if prefix + key in sd:
            return sd[prefix + key]
    raise KeyError(
        f"checkpoint has no tensor {key!r} (tried prefixes '', 'model.', 'transformer.'); "
        "is this the right architecture?"
    )


def _rope_scaling(hf_config: Any):
    from ..position.rope import RopeScaling

    return RopeScaling.from_hf(
        getattr(hf_config, "rope_scaling", None),
        max_position_embeddings=hf_config.max_position_embeddings,
    )


def config_from_hf_llama(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The :class:`ModelConfig` of a Hugging Face ``LlamaConfig`` (also Mistral-style configs)."""
    act = getattr(hf_config, "hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"only SwiGLU (hidden_act='silu') Llama configs are supported, got {act!r}")
    if getattr(hf_config, "mlp_bias", False):
        raise ValueError("mlp_bias=True is not supported by from_hf_llama")
    n_heads = hf_config.num_attention_heads
    fields = dict(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.hidden_size,
        n_layers=hf_config.num_hidden_layers,
        n_heads=n_heads,
        n_kv_heads=getattr(hf_config, "num_key_value_heads", None) or n_heads,
        head_dim=getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads,
        d_ff=hf_config.intermediate_size,
        max_seq_len=hf_config.max_position_embeddings,
        position="rope",
        rope_base=float(getattr(hf_config, "rope_theta", 10000.0)),
        rope_scaling=_rope_scaling(hf_config),
        rope_layout="half",
        norm="rms",
        norm_eps=hf_config.rms_norm_eps,
        placement="pre",
        ffn="swiglu",
        bias=False,
        attn_bias=bool(getattr(hf_config, "attention_bias", False)),
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", False)),
        sliding_window=getattr(hf_config, "sliding_window", None),
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def config_from_hf_gpt2(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The :class:`ModelConfig` of a Hugging Face ``GPT2Config``."""
    act = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
    name = hf_config.activation_function
    if name not in act:
        raise ValueError(f"GPT-2 activation {name!r} is not supported; expected one of {tuple(act)}")
    fields = dict(
        vocab_size=hf_config.vocab_size,
        d_model=hf_config.n_embd,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        d_ff=hf_config.n_inner or 4 * hf_config.n_embd,
        max_seq_len=hf_config.n_positions,
        position="learned",
        norm="layer",
        norm_eps=hf_config.layer_norm_epsilon,
        placement="pre",
        ffn="mlp",
        activation=act[name],
        bias=True,
        tie_embeddings=bool(getattr(hf_config, "tie_word_embeddings", True)),
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def _load(model: DecoderLM, ours: dict[str, torch.Tensor]) -> DecoderLM:
    target = model.state_dict()
    missing = sorted(set(target) - set(ours))
    if missing:
        raise KeyError(f"no checkpoint tensor for {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    for key, value in ours.items():
        if target[key].shape != value.shape:
            raise ValueError(
                f"{key}: checkpoint shape {tuple(value.shape)} != model shape {tuple(target[key].shape)}"
            )
    model.load_state_dict(ours, strict=True)
    return model


def from_hf_llama(hf_model_or_state_dict: Any, hf_config: Any | None = None) -> DecoderLM:
    """A :class:`DecoderLM` with the weights of a Hugging Face Llama model.

    Args:
        hf_model_or_state_dict: a ``LlamaForCausalLM`` (or its ``state_dict()``).
        hf_config: its ``LlamaConfig`` (default: ``hf_model.config``).

    The result computes the same logits (float32 differences ~1e-6; tested on random tiny
    configs with GQA).
    """
    sd, hf_config = _weights_and_config(hf_model_or_state_dict, hf_config)
    config = config_from_hf_llama(hf_config)
    model = DecoderLM(config)
    ours: dict[str, torch.Tensor] = {"embed_tokens.weight": _take(sd, "embed_tokens.weight"),
                                     "norm.weight": _take(sd, "norm.weight")}
    ours["lm_head.weight"] = sd.get("lm_head.weight", ours["embed_tokens.weight"])
    for i in range(config.n_layers):
        src, dst = f"layers.{i}.", f"layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            ours[f"{dst}self_attn.{proj}.weight"] = _take(sd, f"{src}self_attn.{proj}.weight")
            if config.attn_bias:
                ours[f"{dst}self_attn.{proj}.bias"] = _take(sd, f"{src}self_attn.{proj}.bias")
        for proj in ("gate_proj", "up_proj", "down_proj"):
            ours[f"{dst}mlp.{proj}.weight"] = _take(sd, f"{src}mlp.{proj}.weight")
        ours[f"{dst}attn_norm.weight"] = _take(sd, f"{src}input_layernorm.weight")
        ours[f"{dst}ffn_norm.weight"] = _take(sd, f"{src}post_attention_layernorm.weight")
    return _load(model, ours)


def from_hf_gpt2(hf_model_or_state_dict: Any, hf_config: Any | None = None) -> DecoderLM:
    """A :class:`DecoderLM` with the weights of a Hugging Face GPT-2 model (``GPT2LMHeadModel``).

    GPT-2's ``Conv1D`` weights are ``(in, out)``: they are transposed into ``nn.Linear``'s
    ``(out, in)``, and the fused ``c_attn`` is split into q, k, v.
    """
    sd, hf_config = _weights_and_config(hf_model_or_state_dict, hf_config)
    config = config_from_hf_gpt2(hf_config)
    model = DecoderLM(config)
    C = config.d_model
    ours = {
        "embed_tokens.weight": _take(sd, "wte.weight"),
        "embed_positions.weight": _take(sd, "wpe.weight"),
        "norm.weight": _take(sd, "ln_f.weight"),
        "norm.bias": _take(sd, "ln_f.bias"),
    }
    ours["lm_head.weight"] = sd.get("lm_head.weight", ours["embed_tokens.weight"])
    for i in range(config.n_layers):
        src, dst = f"h.{i}.", f"layers.{i}."
        w = _take(sd, f"{src}attn.c_attn.weight").t()  # (3C, C): q, k, v stacked
        b = _take(sd, f"{src}attn.c_attn.bias")  # (3C,)
        for j, proj in enumerate(("q_proj", "k_proj", "v_proj")):
            ours[f"{dst}self_attn.{proj}.weight"] = w[j * C : (j + 1) * C]
            ours[f"{dst}self_attn.{proj}.bias"] = b[j * C : (j + 1) * C]
        ours[f"{dst}self_attn.o_proj.weight"] = _take(sd, f"{src}attn.c_proj.weight").t()
        ours[f"{dst}self_attn.o_proj.bias"] = _take(sd, f"{src}attn.c_proj.bias")
        ours[f"{dst}mlp.up_proj.weight"] = _take(sd, f"{src}mlp.c_fc.weight").t()
        ours[f"{dst}mlp.up_proj.bias"] = _take(sd, f"{src}mlp.c_fc.bias")
        ours[f"{dst}mlp.down_proj.weight"] = _take(sd, f"{src}mlp.c_proj.weight").t()
        ours[f"{dst}mlp.down_proj.bias"] = _take(sd, f"{src}mlp.c_proj.bias")
        for ln, norm in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
            ours[f"{dst}{norm}.weight"] = _take(sd, f"{src}{ln}.weight")
            ours[f"{dst}{norm}.bias"] = _take(sd, f"{src}{ln}.bias")
    ours = {k: v.contiguous() for k, v in ours.items()}
    return _load(model, ours)


@torch.no_grad()
def capture_attention(hf_model: Any, input_ids: torch.Tensor, **kwargs: Any) -> list[torch.Tensor]:
    """Per-layer attention weights ``(B, H, T, S)`` of a Hugging Face model.

    Switches the model to the eager attention implementation for the call (fused kernels never
    materialise the weights) and restores the previous one afterwards. ``kwargs`` go to the
    model (e.g. ``attention_mask``).
    """
    config = getattr(hf_model, "config", None)
    if config is None:
        raise TypeError(f"hf_model must be a Hugging Face model, got {type(hf_model).__name__}")
    previous = getattr(config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
    if switch:
        hf_model.set_attn_implementation("eager")
    try:
        out = hf_model(input_ids, output_attentions=True, **kwargs)
    finally:
        if switch:
            hf_model.set_attn_implementation(previous)
    attn = getattr(out, "attentions", None)
    if not attn or any(a is None for a in attn):
        raise ValueError(
            "the model returned no attention weights; load it with attn_implementation='eager'"
        )
    return [a.detach() for a in attn]
