"""The position-scheme registry: each scheme, the stack-level module it adds, its parameters.

``build(config)`` returns the module a model holds once for the whole stack (a learned or
sinusoidal table added at the input, T5's bias tables), or None when the scheme lives inside
attention (RoPE, ALiBi) or is absent (NoPE); ``info["slot"]`` names the model attribute it goes
to (``embed_positions`` or ``position_bias``, the state-dict names). ``params(config)`` counts
that module in closed form. ``config`` is anything with a model config's fields (this package
does not import the model).
"""

from __future__ import annotations

from typing import Any

from .._registry import Registry

__all__ = ["POSITION_SCHEMES", "POSITIONS"]


def _learned(c: Any):
    from .learned import LearnedPositionalEmbedding

    return LearnedPositionalEmbedding(c.max_seq_len, c.d_model)


def _sinusoidal(c: Any):
    from .sinusoidal import SinusoidalPositionalEmbedding

    return SinusoidalPositionalEmbedding(c.d_model)


def _softmax_layers(c: Any) -> tuple[int, ...]:
    return tuple(i for i in range(c.n_layers) if c.mixer_for(i) == "attention")


def _t5(c: Any):
    from .t5_bias import T5Bias  # one table for the stack unless per_layer

    return T5Bias(c.n_heads, _softmax_layers(c), c.t5_bias)


def _t5_params(c: Any) -> int:
    tables = len(_softmax_layers(c)) if c.t5_bias.per_layer else 1
    return tables * c.t5_bias.num_buckets * c.n_heads


def _nothing(c: Any) -> None:
    return None


#: The registry of position schemes a model can use.
POSITION_SCHEMES = Registry("position")
POSITION_SCHEMES.register("none", build=_nothing, params=lambda c: 0,
                          summary="NoPE: order only through the causal mask", slot=None)
POSITION_SCHEMES.register("learned", build=_learned, params=lambda c: c.max_seq_len * c.d_model,
                          summary="a learned table added at the input (GPT-2)",
                          slot="embed_positions")
POSITION_SCHEMES.register("sinusoidal", build=_sinusoidal, params=lambda c: 0,
                          summary="fixed sinusoids added at the input", slot="embed_positions")
POSITION_SCHEMES.register("rope", build=_nothing, params=lambda c: 0,
                          summary="rotary, inside attention (Llama)", slot=None)
POSITION_SCHEMES.register("alibi", build=_nothing, params=lambda c: 0,
                          summary="linear score biases, inside attention (BLOOM)", slot=None)
POSITION_SCHEMES.register("t5", build=_t5, params=_t5_params,
                          summary="T5's learned bucketed bias (llmviz.position.t5_bias)",
                          slot="position_bias")

#: The names of :data:`POSITION_SCHEMES`.
POSITIONS = tuple(POSITION_SCHEMES)
