"""One entry point from a Hugging Face causal LM to an llmviz :class:`~llmviz.model.lm.DecoderLM`.

>>> import transformers, llmviz.hf as lh                                  # doctest: +SKIP
>>> hf = transformers.AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B")  # doctest: +SKIP
>>> model = lh.from_hf(hf).eval()           # same logits as hf, to float32 rounding  # doctest: +SKIP
>>> lh.config_from_hf(hf.config).qk_norm                                   # doctest: +SKIP
'rms'

Anything llmviz cannot reproduce exactly (a family, a config feature, a tensor the config does
not explain) raises ``NotImplementedError`` or ``ValueError`` naming it.
"""

from __future__ import annotations

from typing import Any

import torch

from ..model.config import ModelConfig
from ..model.lm import DecoderLM
from .config import config_from_hf, family_of
from .weights import load_checkpoint, state_dict_of

__all__ = ["config_from_hf_gpt2", "config_from_hf_llama", "from_hf", "from_hf_gpt2", "from_hf_llama"]


def from_hf(
    model_or_state_dict: Any, *, config: Any | None = None, dtype: torch.dtype | None = None
) -> DecoderLM:
    """A :class:`DecoderLM` computing the same logits as a Hugging Face causal LM.

    Args:
        model_or_state_dict: a ``*ForCausalLM`` model of a supported family (see
            :data:`llmviz.hf.SUPPORTED`), or its ``state_dict()``.
        config: its transformers config; needed with a bare state dict (default
            ``model.config``).
        dtype: cast the loaded model (default float32; RoPE frequencies are computed in
            float32 either way).

    Returns:
        The model in eval mode; its ``config`` is :func:`config_from_hf` of the HF config.

    Raises:
        NotImplementedError: an unsupported family or feature (named).
        ValueError: the checkpoint has tensors the config does not explain, lacks tensors it
            implies, or has shapes that disagree with it (named).
        TypeError: the input is neither a model nor a state dict.
    """
    if config is None:
        config = getattr(model_or_state_dict, "config", None)
        if config is None:
            raise ValueError(
                "from_hf got a bare state_dict: pass its transformers config too, "
                "from_hf(state_dict, config=hf_model.config)"
            )
    family = family_of(config)
    ours = config_from_hf(config)
    model = load_checkpoint(state_dict_of(model_or_state_dict), ours, family)
    if dtype is not None:
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dtype!r}")
        model = model.to(dtype)
    return model.eval()


def _only(family: str, hf_config: Any, who: str) -> None:
    if family_of(hf_config) != family:
        raise ValueError(
            f"{who} loads {family!r} checkpoints, got model_type {hf_config.model_type!r}; "
            "use llmviz.hf.from_hf, which reads every supported family"
        )


def config_from_hf_llama(hf_config: Any, **overrides: Any) -> ModelConfig:
    """:func:`config_from_hf` for a ``LlamaConfig`` (kept for the book's earlier chapters)."""
    _only("llama", hf_config, "config_from_hf_llama")
    return config_from_hf(hf_config, **overrides)


def config_from_hf_gpt2(hf_config: Any, **overrides: Any) -> ModelConfig:
    """:func:`config_from_hf` for a ``GPT2Config``."""
    _only("gpt2", hf_config, "config_from_hf_gpt2")
    return config_from_hf(hf_config, **overrides)


def from_hf_llama(hf_model_or_state_dict: Any, hf_config: Any | None = None) -> DecoderLM:
    """:func:`from_hf` for a ``LlamaForCausalLM`` (or its state dict and config)."""
    cfg = hf_config if hf_config is not None else getattr(hf_model_or_state_dict, "config", None)
    if cfg is not None:
        _only("llama", cfg, "from_hf_llama")
    return from_hf(hf_model_or_state_dict, config=cfg)


def from_hf_gpt2(hf_model_or_state_dict: Any, hf_config: Any | None = None) -> DecoderLM:
    """:func:`from_hf` for a ``GPT2LMHeadModel`` (or its state dict and config)."""
    cfg = hf_config if hf_config is not None else getattr(hf_model_or_state_dict, "config", None)
    if cfg is not None:
        _only("gpt2", cfg, "from_hf_gpt2")
    return from_hf(hf_model_or_state_dict, config=cfg)
