"""What a transformer block is made of: :class:`BlockModules`, built modules a block holds.

The builder (:mod:`llmviz.model.builder`) makes them from a config through the registries; a
block (:class:`llmviz.model.block.TransformerBlock`) takes them as they are, so a new norm, mask
or mixer is a different object here, never a new keyword in the block's signature.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..norm import NormSpec

__all__ = ["BlockModules", "block_norms"]


@dataclass
class BlockModules:
    """What a block is made of: a token mixer (``self_attn`` or ``linear_attn``), the
    feed-forward ``mlp`` and the norms its placement uses (None where it has none)."""

    mixer: nn.Module
    mlp: nn.Module
    attn_norm: nn.Module
    ffn_norm: nn.Module | None = None
    post_attn_norm: nn.Module | None = None
    post_ffn_norm: nn.Module | None = None
    latent: bool = False  # the mixer is multi-head latent attention (its cache holds latents)


def block_norms(spec: NormSpec, d_model: int, placement: str, parallel: bool, **parts) -> BlockModules:
    """:class:`BlockModules` with the norms ``placement`` needs, each built from ``spec``."""
    if not isinstance(spec, NormSpec):
        raise TypeError(f"spec must be a llmviz.norm.NormSpec, got {type(spec).__name__}")
    sandwich = placement == "sandwich"
    return BlockModules(
        attn_norm=spec.build(d_model), ffn_norm=None if parallel else spec.build(d_model),
        post_attn_norm=spec.build(d_model) if sandwich else None,
        post_ffn_norm=spec.build(d_model) if sandwich else None, **parts,
    )
