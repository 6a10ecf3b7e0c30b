"""A parallel block with one norm per branch: GPT-NeoX's ``use_parallel_residual``.

llmviz's parallel block (``ModelConfig(parallel=True)``, GPT-J, PaLM, Falcon) feeds attention and
feed-forward the *same* normed input, ``y = x + A(N(x)) + F(N(x))``. GPT-NeoX (Pythia) and
StableLM-style parallel blocks with two norms normalise the input twice, with two sets of weights:

    y = x + A(N_1(x)) + F(N_2(x))

Same matmuls, one more norm: ``N_2``'s weights (and biases) are the only extra parameters. The
second norm lives in the block's ``ffn_norm`` slot, so the module names stay those of a serial
pre-norm block (``attn_norm``, ``ffn_norm``) and a checkpoint maps onto it like one.

:func:`parallel_two_norms` turns a :class:`~llmviz.model.lm.DecoderLM` built from a config with
``parallel=True, placement="pre"`` into this model: each block keeps its modules and gains an
``ffn_norm`` built from ``config.norm_spec``. The config itself keeps ``parallel=True``; the
model's blocks are :class:`TwoNormParallelBlock`.
"""

from __future__ import annotations

import torch

from .._checks import check_flags, check_int_in
from .block import TransformerBlock
from .parts import BlockModules

__all__ = ["TwoNormParallelBlock", "parallel_two_norms"]


class TwoNormParallelBlock(TransformerBlock):
    """``y = x + A(attn_norm(x)) + F(ffn_norm(x))``: a parallel pre-norm block whose two
    branches read two different norms of the same input (GPT-NeoX). Built by
    :meth:`from_block` or :meth:`TransformerBlock.from_modules` with an ``ffn_norm``."""

    @classmethod
    def from_block(cls, block: TransformerBlock, ffn_norm: torch.nn.Module) -> "TwoNormParallelBlock":
        """The parallel pre-norm ``block``'s modules, plus ``ffn_norm`` for the feed-forward branch."""
        if not isinstance(block, TransformerBlock):
            raise TypeError(f"block must be a TransformerBlock, got {type(block).__name__}")
        if not (block.parallel and block.placement == "pre"):
            raise ValueError(f"a two-norm parallel block replaces a parallel pre-norm block; this one "
                             f"has parallel={block.parallel}, placement={block.placement!r}")
        if not isinstance(ffn_norm, torch.nn.Module):
            raise TypeError(f"ffn_norm must be a norm module, got {type(ffn_norm).__name__}")
        mixer = block.self_attn if block.self_attn is not None else block.linear_attn
        modules = BlockModules(mixer=mixer, mlp=block.mlp, attn_norm=block.attn_norm,
                               ffn_norm=ffn_norm, latent=block.latent)
        return cls.from_modules(modules, placement="pre", parallel=True, dropout=block.drop.p)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None,
                score_bias: torch.Tensor | None = None, positions: torch.Tensor | None = None,
                cache=None, layer_idx: int = 0, return_weights: bool = False):
        """``x (B, T, C) -> (B, T, C)``, or ``(out, weights)``; arguments as
        :meth:`TransformerBlock.forward`."""
        check_flags(return_weights=return_weights)
        check_int_in(layer_idx, "layer_idx", 0)
        if self.ffn_norm is None:
            raise ValueError("this two-norm parallel block has no ffn_norm; build it with from_block")
        kw = {"mask": mask, "score_bias": score_bias, "positions": positions, "cache": cache,
              "layer_idx": layer_idx}
        a, weights = self._attn(self.attn_norm(x), kw, return_weights)
        f = self._ffn(self.ffn_norm(x))
        y = x + self.drop(a) + self.drop(f)
        return (y, weights) if return_weights else y


def parallel_two_norms(model):
    """``model`` (a :class:`~llmviz.model.lm.DecoderLM` with ``parallel=True``,
    ``placement="pre"``) with every block replaced, in place, by a :class:`TwoNormParallelBlock`
    holding the same modules and a fresh second norm (``config.norm_spec``); returns ``model``."""
    from .lm import DecoderLM

    if not isinstance(model, DecoderLM):
        raise TypeError(f"model must be a DecoderLM, got {type(model).__name__}")
    c = model.config
    if not (c.parallel and c.placement == "pre"):
        raise ValueError(f"two norms per parallel block need parallel=True, placement='pre'; the "
                         f"config has parallel={c.parallel}, placement={c.placement!r}")
    device = model.embed_tokens.weight.device
    for i, block in enumerate(model.layers):
        if isinstance(block, TwoNormParallelBlock):
            continue
        with torch.device(device):
            norm = c.norm_spec.build(c.d_model)
        model.layers[i] = TwoNormParallelBlock.from_block(block, norm)
    return model
