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

from ..model.lm import DecoderLM
from ._layout import layout_of
from .config import SUPPORTED, config_from_hf, family_of
from .weights import load_checkpoint, state_dict_of

__all__ = ["from_hf"]


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
    model = load_checkpoint(state_dict_of(model_or_state_dict), ours, family,
                            layout_of(SUPPORTED[family]), hf_config=config)
    if dtype is not None:
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dtype!r}")
        model = model.to(dtype)
        for module in model.modules():  # DeepSeek-V3's choice bias stays float32, as in HF
            if getattr(module, "e_score_correction_bias", None) is not None:
                module.e_score_correction_bias = module.e_score_correction_bias.float()
    return model.eval()
