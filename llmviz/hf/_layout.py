"""How a family stores its tensors, declared beside its reader and read by the loader.

A reader returns the :class:`~llmviz.model.config.ModelConfig` fields of what a family
computes; :class:`Layout` says where a checkpoint of that family keeps each tensor, so the
loader (:mod:`.weights`) holds no rule keyed on a family name. Declare it with
``@stores(...)`` on the reader; a reader without one stores Llama's names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FUSED_GATE_UP", "FUSED_QKV", "Layout", "layout_of", "stores"]

#: fused projections: stored name -> the llmviz projections it holds, rows one after another
FUSED_QKV = {"qkv_proj": ("q_proj", "k_proj", "v_proj")}
FUSED_GATE_UP = {"gate_up_proj": ("gate_proj", "up_proj")}


@dataclass(frozen=True)
class Layout:
    """Where a family's checkpoint keeps its tensors.

    Attributes:
        fused: stored projection -> the llmviz projections cut from its rows, in order
            (Phi-3's ``qkv_proj`` is q | k | v; its ``gate_up_proj`` gate | up).
        norms: HF norm name -> llmviz norm name, for names the placement's map lacks
            (GLM-4's ``post_self_attn_layernorm``).
        renames: llmviz module (or tensor) path inside a layer -> the stored path (StarCoder 2's
            ``mlp.c_fc`` holds llmviz's ``mlp.up_proj``; MiniMax-M2 keeps the router's choice bias
            on the block, ``mlp.e_score_correction_bias``).
        prefix: what the checkpoint names start with (stripped before planning).
        mtp_layers: layers numbered ``n_layers`` and beyond are multi-token-prediction modules
            (DeepSeek-V3, GLM-4.5), not part of the causal LM: skipped, as transformers does.
        flattened: llmviz tensor paths inside a layer whose stored tensor has extra singleton
            dimensions, read flattened (ERNIE 4.5's choice bias is stored ``(1, E)``).
        top: llmviz tensors outside the layers -> their stored names (GPT-NeoX's ``embed_in``,
            ``final_layer_norm``).
        stored_layers: what the checkpoint calls its list of layers (BLOOM: ``h``), read as
            llmviz's ``layers``.
        qkv_grouped: the stored fused projection whose rows are grouped by key/value head,
            ``[group g: its H/G query heads | k_g | v_g]``, or None. With G = H it is grouped by
            head, ``[head h: q_h | k_h | v_h]`` (GPT-NeoX, BLOOM, Falcon without multi-query);
            with G = 1 it is ``q | k | v`` (Falcon's multi-query); between, Falcon's new
            decoder architecture.
        adapt: ``adapt(model, hf_config) -> model``, applied to the built
            :class:`~llmviz.model.lm.DecoderLM` before loading and counting, where a family's
            model differs from what its ModelConfig builds (GPT-NeoX's two norms per parallel
            block); None leaves the model as built.
    """

    fused: dict[str, tuple[str, ...]] = field(default_factory=dict)
    norms: dict[str, str] = field(default_factory=dict)
    renames: dict[str, str] = field(default_factory=dict)
    prefix: str = "model."
    mtp_layers: bool = False
    flattened: tuple[str, ...] = ()
    top: dict[str, str] = field(default_factory=dict)
    qkv_grouped: str | None = None
    stored_layers: str = "layers"
    adapt: Callable[[Any, Any], Any] | None = None

    def fused_name(self, proj: str) -> str | None:
        """The stored fused tensor holding llmviz projection ``proj``, or None."""
        return next((name for name, parts in self.fused.items() if proj in parts), None)


LLAMA = Layout()


def stores(**fields: Any) -> Callable[[Callable], Callable]:
    """Declare a reader's :class:`Layout`: ``@stores(fused=FUSED_QKV | FUSED_GATE_UP)``."""
    layout = Layout(**fields)

    def mark(reader: Callable) -> Callable:
        reader.layout = layout
        return reader

    return mark


def layout_of(reader: Callable) -> Layout:
    """The :class:`Layout` a reader declares (Llama's names when it declares none)."""
    return getattr(reader, "layout", LLAMA)
