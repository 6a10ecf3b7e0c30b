"""T5's bucketed relative bias as the position scheme of a decoder (``position="t5"``).

Raffel et al. 2020 give every head one learned scalar per *bucket* of relative offsets
(:class:`llmviz.position.relative.T5RelativeBias`): exact buckets for short distances,
logarithmic ones up to ``max_distance``, and one last bucket for everything farther. A decoder
uses the unidirectional buckets (every future offset in bucket 0; the causal mask removes those
keys anyway). The bias is added to the attention scores, like ALiBi's, but it is learned.

Sharing across layers: T5 computes the bias once, in the first layer of a stack, and adds the
same (H, T, S) tensor in every layer (Hugging Face: ``has_relative_attention_bias`` on layer 0
only). :class:`T5Bias` does the same by default; ``per_layer=True`` gives each softmax layer its
own table instead, a variant to compare, not what T5 does.

Offsets are those of the attention slots, ``j - i`` for key slot j and query slot i (queries are
the last T of the S keys, so a KV cache works), as for ALiBi. Left padding keeps the real tokens
in consecutive slots, so their offsets are their position differences.

Shapes: H heads, T queries, S keys.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

import torch
from torch import nn

from .._checks import check_positive_int
from .relative import T5RelativeBias, t5_relative_bucket

__all__ = ["T5BiasSettings", "T5Bias", "resolve_t5_bias"]


@dataclass(frozen=True)
class T5BiasSettings:
    """How a ``position="t5"`` model buckets its offsets (``ModelConfig.t5_bias``).

    Defaults are T5's own: 32 buckets (16 exact distances, 16 logarithmic ones) up to distance
    128; every larger distance shares the last bucket, which is how T5 reads past its training
    length. A model trained on windows shorter than ``max_distance`` never trains the buckets
    its windows cannot reach: choose ``max_distance`` at most the training length.
    """

    num_buckets: int = 32  # buckets per head (unidirectional: all of them for past offsets)
    max_distance: int = 128  # distances >= this share the last bucket
    per_layer: bool = False  # False: one table for the whole stack (T5); True: one per layer

    def __post_init__(self) -> None:
        check_positive_int(self.num_buckets, "t5_bias.num_buckets")
        check_positive_int(self.max_distance, "t5_bias.max_distance")
        if not isinstance(self.per_layer, bool):
            raise TypeError(f"t5_bias.per_layer must be a bool, got {self.per_layer!r}")
        # the bucket function states its own limits (num_buckets >= 2, max_distance > exact)
        t5_relative_bucket(torch.zeros(1, dtype=torch.long), bidirectional=False,
                           num_buckets=self.num_buckets, max_distance=self.max_distance)


def resolve_t5_bias(value: Any, position: str) -> T5BiasSettings | None:
    """The validated ``t5_bias`` of a config with ``position``.

    ``None`` becomes T5's defaults when ``position == "t5"``; a mapping of the fields (what
    ``dataclasses.asdict`` makes of a config) becomes :class:`T5BiasSettings`.
    """
    if value is None:
        return T5BiasSettings() if position == "t5" else None
    if position != "t5":
        raise ValueError(f"t5_bias is set but position={position!r}; it only applies to "
                         "position='t5' (drop t5_bias or set position='t5')")
    if isinstance(value, T5BiasSettings):
        return value
    if isinstance(value, Mapping):
        names = {f.name for f in fields(T5BiasSettings)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"t5_bias has unknown fields {unknown}; valid: {sorted(names)}")
        return T5BiasSettings(**value)
    raise TypeError(f"t5_bias must be a T5BiasSettings, a mapping of its fields or None, "
                    f"got {type(value).__name__}")


class T5Bias(nn.Module):
    """The T5 score biases of a whole decoder stack.

    Args:
        n_heads: H.
        layers: indices of the layers that take a bias (softmax attention layers).
        settings: buckets and sharing (:class:`T5BiasSettings`).

    Parameters: ``shared.relative_attention_bias`` (one table, T5) or
    ``layer_tables.<i>.relative_attention_bias`` (one per layer), each ``(num_buckets, H)``.
    ``forward(T, S, dtype=...)`` -> dict layer index -> bias ``(H, T, S)``; layers that share
    the table get the same tensor (computed once).
    """

    def __init__(self, n_heads: int, layers: tuple[int, ...], settings: T5BiasSettings) -> None:
        super().__init__()
        if not isinstance(settings, T5BiasSettings):
            raise TypeError(f"settings must be a T5BiasSettings, got {type(settings).__name__}")
        self.layers, self.settings = tuple(layers), settings
        kw = dict(num_buckets=settings.num_buckets, max_distance=settings.max_distance,
                  bidirectional=False)
        if settings.per_layer:
            self.shared = None
            self.layer_tables = nn.ModuleDict({str(i): T5RelativeBias(n_heads, **kw) for i in self.layers})
        else:
            self.shared = T5RelativeBias(n_heads, **kw)
            self.layer_tables = None

    def table(self, layer_idx: int) -> T5RelativeBias:
        """The :class:`T5RelativeBias` that layer ``layer_idx`` reads."""
        if layer_idx not in self.layers:
            raise ValueError(f"layer {layer_idx} takes no T5 bias; layers with one: {self.layers}")
        return self.shared if self.shared is not None else self.layer_tables[str(layer_idx)]

    def forward(self, T: int, S: int, *, dtype: torch.dtype | None = None) -> dict[int, torch.Tensor]:
        """Bias ``(H, T, S)`` of each layer, queries the last T of S key slots."""
        if self.shared is not None:
            bias = self.shared(T, S)  # (H, T, S), once for the stack
            bias = bias if dtype is None else bias.to(dtype)
            return dict.fromkeys(self.layers, bias)
        out = {}
        for i in self.layers:
            bias = self.layer_tables[str(i)](T, S)
            out[i] = bias if dtype is None else bias.to(dtype)
        return out

    def extra_repr(self) -> str:
        s = self.settings
        return (f"num_buckets={s.num_buckets}, max_distance={s.max_distance}, "
                f"{'per layer' if s.per_layer else 'shared by layers'} {self.layers}")
