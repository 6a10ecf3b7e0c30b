"""Translate a Hugging Face config into a :class:`~llmviz.model.config.ModelConfig`, exactly or not at all.

:func:`config_from_hf` dispatches on ``config.model_type`` to a family reader. Each reader states
what the family computes (norm kind and placement, biases, QK-norm, soft-caps, windows per layer,
RoPE per layer type) and checks every config field that would change the computation: a value
llmviz cannot represent raises ``NotImplementedError`` (a feature llmviz lacks) or
``ValueError`` (a value that contradicts the family), naming the field.

Readers live by kind: ``_readers`` (the shared field readers and the families through 2024),
``_readers_dense`` (dense decoders that are Llama's block with a family's own choices),
``_readers_2025`` (experts, latent attention, sinks, Gated DeltaNet hybrids) and ``_readers_moe``
(DeepSeek-V3-routed experts under softmax attention) and ``_readers_2026`` (families whose
components joined the library with them: HunYuan's QK-norm after RoPE, Apertus's xIELU) and
``_readers_classic`` (GPT-2-era families with q/k/v fused by head: GPT-NeoX, BLOOM, Falcon, ...)
and ``_readers_conv`` (LFM2: gated short convolutions beside attention) and ``_readers_llama4``
(Llama 4's text model), ``_readers_dsa`` (DeepSeek-V3.2's sparse attention), ``_readers_kimi``
(Kimi Linear: Kimi delta attention beside latent attention) and ``_readers_gemma4`` (Gemma 4's
text model) and ``_readers_mistral4`` (Mistral Small 4). :data:`SUPPORTED` is their union and the
one list of loaded families (docstrings, anatomy and the tests read it); :data:`REFUSED`
(``_refused``) gives the reason for every other causal-LM ``model_type`` transformers ships.
A reader's ``@stores(...)`` declaration (:mod:`._layout`) says how its checkpoints name their
tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.config import ModelConfig
from ._readers import READERS
from ._readers_2025 import READERS_2025
from ._readers_dense import READERS_DENSE
from ._readers_moe import READERS_MOE
from ._readers_2026 import READERS_2026
from ._readers_classic import READERS_CLASSIC
from ._readers_conv import READERS_CONV
from ._readers_llama4 import READERS_LLAMA4
from ._readers_dsa import READERS_DSA
from ._readers_kimi import READERS_KIMI
from ._readers_gemma4 import READERS_GEMMA4
from ._readers_mistral4 import READERS_MISTRAL4
from ._refused import REFUSED

__all__ = ["REFUSED", "SUPPORTED", "config_from_hf", "family_of"]

def family_of(hf_config: Any) -> str:
    """``hf_config.model_type``, checked: refused and unknown families raise here."""
    model_type = getattr(hf_config, "model_type", None)
    if not isinstance(model_type, str):
        raise TypeError(
            "expected a transformers config (with .model_type), e.g. model.config or "
            f"transformers.AutoConfig.from_pretrained(path); got {type(hf_config).__name__}"
        )
    if model_type in REFUSED:
        raise NotImplementedError(f"model_type {model_type!r} is refused: {REFUSED[model_type]}")
    if model_type not in SUPPORTED:
        raise NotImplementedError(
            f"model_type {model_type!r} has no llmviz reader; supported: {sorted(SUPPORTED)}"
        )
    return model_type


def config_from_hf(hf_config: Any, **overrides: Any) -> ModelConfig:
    """The :class:`ModelConfig` computing what ``hf_config``'s model computes.

    Args:
        hf_config: a transformers config (``model.config``) of a supported family.
        **overrides: ModelConfig fields to change afterwards (e.g. ``max_seq_len``).

    Raises:
        NotImplementedError: the family, or one of its features, has no llmviz counterpart.
        ValueError: a field has a value llmviz would not reproduce exactly.
    """
    fields = SUPPORTED[family_of(hf_config)](hf_config)
    fields.update(overrides)
    return ModelConfig(**fields)


#: model_type -> reader returning ModelConfig fields.
SUPPORTED: dict[str, Callable[[Any], dict[str, Any]]] = {**READERS, **READERS_DENSE, **READERS_2025, **READERS_MOE,
                                                          **READERS_2026, **READERS_CLASSIC, **READERS_CONV,
                                                          **READERS_LLAMA4, **READERS_DSA,
                                                          **READERS_KIMI, **READERS_GEMMA4,
                                                          **READERS_MISTRAL4}
