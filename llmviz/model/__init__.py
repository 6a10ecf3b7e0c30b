"""The model: its config, the block, the decoder LM, generation and sampling, presets, the zoo.

* :mod:`.config`: :class:`ModelConfig`, the one typed description of a model.
* :mod:`.block`: :class:`TransformerBlock` (pre, post, sandwich, DeepNorm placements; parallel).
* :mod:`.lm`: :class:`DecoderLM` (embedding -> blocks -> final norm -> head) and its output.
* :mod:`.generate` and :mod:`.sampling`: decoding with the KV cache; greedy, temperature,
  top-k, top-p, min-p.
* :mod:`.kinds_extra`: kinds registered beside the core ones (QK-norm after RoPE).
* :mod:`.presets`: real-size configs of published models; :mod:`.zoo`: the architecture table.
"""

from __future__ import annotations

from . import kinds_extra  # first: its kinds are registered before config reads the registries
from . import block, config, generation, lm, presets, sampling, zoo
from .block import TransformerBlock
from .config import ModelConfig
from .generation import generate
from .lm import DecoderLM, LMOutput, softcap
from .presets import PRESETS, preset
from .sampling import filter_logits, filtered_probs, sample
from .zoo import ZOO, ZooEntry, zoo_table

__all__ = [
    "ModelConfig", "TransformerBlock", "DecoderLM", "LMOutput", "softcap", "generate",
    "sample", "filter_logits", "filtered_probs", "PRESETS", "preset", "ZOO", "ZooEntry",
    "zoo_table", "block", "config", "generation", "lm", "presets", "sampling", "zoo",
]
