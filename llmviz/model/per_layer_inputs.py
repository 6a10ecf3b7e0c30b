"""Per-layer inputs (Gemma 4's per-layer embeddings) and the block that adds them.

Besides the token embedding ``E`` (width C), Gemma 4's small models hold a second table
``E_pl`` of width ``L * P``: one P-wide vector per token *and per layer*. For the token ids of
the input and their scaled embedding ``x0 = E[ids] * sqrt(C)``, layer ``l`` gets

    p_l = (RMS(split_l(W x0) / sqrt(C)) + split_l(E_pl[ids]) * sqrt(P)) / sqrt(2)

(``W``: a ``(L*P, C)`` projection; ``split_l``: the l-th P-wide slice; RMS with weight, over P).
After its attention and feed-forward, block ``l`` adds a gated read of it,

    y = h + N(U (act(V h) * p_l)),   then   y = y * s_l

with ``V`` ``(P, C)``, ``U`` ``(C, P)``, ``N`` an RMS norm and ``s_l`` a stored per-layer scalar
(Gemma 4 scales every block's output by its ``layer_scalar``, with or without per-layer inputs).

:class:`PerLayerEmbedding` is the token embedding (an ``nn.Embedding``: same ``weight``, same
output) that also computes every ``p_l`` for the ids it embeds and leaves them in a
:class:`PerLayerSlot`; each :class:`PerLayerInputBlock` (a
:class:`~llmviz.model.block.TransformerBlock`) reads its own slice from the same slot. Shape
letters: B batch, T tokens, L layers, P per-layer width, C model width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_positive, check_positive_int, check_int_in
from ..ffn import activation as make_activation
from ..norm import NormSpec
from .block import TransformerBlock
from .parts import BlockModules

__all__ = ["PerLayerEmbedding", "PerLayerInputBlock", "PerLayerSlot"]


class PerLayerSlot:
    """The per-layer inputs ``(B, T, L, P)`` of the tokens embedded last (None before any)."""

    def __init__(self) -> None:
        self.value: torch.Tensor | None = None

    def layer(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """Layer ``index``'s ``(B, T, P)`` inputs, checked against the block input ``x`` (B, T, C)."""
        v = self.value
        if v is None or v.shape[:2] != x.shape[:2] or index >= v.shape[2]:
            raise ValueError(
                f"no per-layer inputs for layer {index} and a block input of shape {tuple(x.shape)} "
                f"(held: {None if v is None else tuple(v.shape)}); run the model from token ids, "
                "whose PerLayerEmbedding fills the slot")
        return v[:, :, index]


class PerLayerEmbedding(nn.Embedding):
    """A token embedding ``(V, C)`` that also computes every layer's input (module docstring).

    Args:
        vocab_size, d_model: V and C of the token embedding.
        n_layers, per_layer_dim: L and P.
        per_layer_vocab: rows of the per-layer table (default V).
        eps: epsilon of the RMS norm of the projected part.
        slot: where the per-layer inputs go (a new :class:`PerLayerSlot` by default).

    ``forward(ids)`` returns ``weight[ids]`` unscaled, like ``nn.Embedding`` (the model scales by
    ``sqrt(C)`` as for any Gemma); the per-layer inputs use the scaled rows, as Gemma 4 does.
    Parameters: ``weight``, ``per_layer.weight`` ``(V_pl, L*P)``, ``projection.weight``
    ``(L*P, C)``, ``projection_norm.weight`` ``(P,)``.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, per_layer_dim: int, *,
                 per_layer_vocab: int | None = None, eps: float = 1e-6, slot: PerLayerSlot | None = None) -> None:
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_layers", n_layers),
                            ("per_layer_dim", per_layer_dim)):
            check_positive_int(value, name)
        per_layer_vocab = vocab_size if per_layer_vocab is None else check_positive_int(per_layer_vocab, "per_layer_vocab")
        check_positive(eps, "eps")
        if slot is not None and not isinstance(slot, PerLayerSlot):
            raise TypeError(f"slot must be a PerLayerSlot, got {type(slot).__name__}")
        super().__init__(vocab_size, d_model)
        self.n_layers, self.per_layer_dim = n_layers, per_layer_dim
        self.per_layer = nn.Embedding(per_layer_vocab, n_layers * per_layer_dim)
        self.projection = nn.Linear(d_model, n_layers * per_layer_dim, bias=False)
        self.projection_norm = NormSpec("rms", eps).build(per_layer_dim)
        self.slot = PerLayerSlot() if slot is None else slot

    def per_layer_inputs(self, ids: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
        """``(B, T, L, P)`` from token ids ``(B, T)`` and their scaled embeddings ``x0`` ``(B, T, C)``."""
        if x0.shape[:-1] != ids.shape or x0.shape[-1] != self.embedding_dim:
            raise ValueError(f"x0 {tuple(x0.shape)} must be the (B, T, C={self.embedding_dim}) "
                             f"embeddings of ids {tuple(ids.shape)}")
        L, P = self.n_layers, self.per_layer_dim
        try:
            table = self.per_layer(ids)
        except IndexError as err:
            raise ValueError(f"a token id is outside the per-layer table's {self.per_layer.num_embeddings} "
                             "rows; tokenize with the model's own tokenizer") from err
        tokens = (table * torch.tensor(math.sqrt(P), dtype=table.dtype)).reshape(*ids.shape, L, P)
        mixed = (self.projection(x0) * self.embedding_dim ** -0.5).reshape(*ids.shape, L, P)
        return (self.projection_norm(mixed) + tokens) * 2.0 ** -0.5

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = super().forward(ids)  # (B, T, C); an id out of range raises IndexError, as nn.Embedding
        x0 = x * torch.tensor(math.sqrt(self.embedding_dim), dtype=x.dtype)
        self.slot.value = self.per_layer_inputs(ids, x0)
        return x

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, n_layers={self.n_layers}, per_layer_dim={self.per_layer_dim}"


class PerLayerInputBlock(TransformerBlock):
    """A :class:`~llmviz.model.block.TransformerBlock` that adds its per-layer input after the
    feed-forward and scales its output by ``layer_scalar`` (module docstring).

    Args:
        modules: the block's :class:`~llmviz.model.parts.BlockModules`.
        layer_idx: which slice of the slot this block reads.
        slot: the model's :class:`PerLayerSlot`; None: no per-layer input (only the scalar).
        d_model: C. per_layer_dim: P (with ``slot``).
        activation: of the gate (a name of :func:`llmviz.ffn.activation`).
        eps: of the norm after the projection.
        **options: the block's ``placement``, ``parallel``, ``dropout``, ``deepnorm_alpha``.

    Parameters besides the block's: ``per_layer_input_gate.weight`` ``(P, C)``,
    ``per_layer_projection.weight`` ``(C, P)``, ``post_per_layer_input_norm.weight`` ``(C,)``;
    the buffer ``layer_scalar`` ``(1,)`` (stored in checkpoints).
    """

    def __init__(self, modules: BlockModules, *, layer_idx: int, d_model: int, slot: PerLayerSlot | None = None,
                 per_layer_dim: int | None = None, activation: str = "gelu_tanh", eps: float = 1e-6,
                 **options) -> None:
        check_int_in(layer_idx, "layer_idx", 0)
        check_positive_int(d_model, "d_model")
        if slot is not None and not isinstance(slot, PerLayerSlot):
            raise TypeError(f"slot must be a PerLayerSlot or None, got {type(slot).__name__}")
        if slot is not None:
            check_positive_int(per_layer_dim, "per_layer_dim")
        super().__init__(modules=modules, **options)
        self.layer_idx, self.slot = layer_idx, slot
        if slot is not None:
            self.per_layer_act = make_activation(activation)
            self.per_layer_input_gate = nn.Linear(d_model, per_layer_dim, bias=False)
            self.per_layer_projection = nn.Linear(per_layer_dim, d_model, bias=False)
            self.post_per_layer_input_norm = NormSpec("rms", eps).build(d_model)
        self.register_buffer("layer_scalar", torch.ones(1))

    def forward(self, x: torch.Tensor, **kwargs):
        """:meth:`TransformerBlock.forward`, then the per-layer input and the scalar."""
        out = super().forward(x, **kwargs)
        y, weights = out if kwargs.get("return_weights") else (out, None)
        if self.slot is not None:
            p = self.slot.layer(self.layer_idx, x).to(y.dtype)
            gated = self.per_layer_act(self.per_layer_input_gate(y)) * p
            y = y + self.post_per_layer_input_norm(self.per_layer_projection(gated))
        y = y * self.layer_scalar.to(y.dtype)
        return (y, weights) if kwargs.get("return_weights") else y
