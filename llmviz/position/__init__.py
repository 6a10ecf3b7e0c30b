"""Position: absolute (sinusoidal, learned), relative (Shaw, Transformer-XL, T5), RoPE, ALiBi,
and property checks that compare them.

Import from the submodules (``from llmviz.position.rope import apply_rope``) or from here.
"""

from .alibi import alibi_bias, alibi_slopes
from .learned import LearnedPositionalEmbedding
from .properties import (
    PositionScheme,
    PropertyResult,
    book_schemes,
    check_properties,
    property_table,
)
from .relative import (
    ShawRelativePosition,
    T5RelativeBias,
    XLTerms,
    relative_positions,
    shaw_relative_index,
    t5_relative_bucket,
    transformer_xl_terms,
)
from .rope import (
    RopeScaling,
    apply_rope,
    apply_rotary,
    interleaved_to_half_permutation,
    rope_cos_sin,
    rope_frequencies,
)
from .registry import POSITION_SCHEMES, POSITIONS
from .rope_decay import rope_decay_curve, rope_score_bound
from .rotary import RotaryEmbedding
from .t5_bias import T5Bias, T5BiasSettings, resolve_t5_bias
from .sinusoidal import (
    SinusoidalPositionalEmbedding,
    sinusoidal_encoding,
    sinusoidal_features,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
    sinusoidal_wavelengths,
)

__all__ = [
    "POSITIONS",
    "POSITION_SCHEMES",
    "alibi_bias",
    "alibi_slopes",
    "LearnedPositionalEmbedding",
    "PositionScheme",
    "PropertyResult",
    "book_schemes",
    "check_properties",
    "property_table",
    "ShawRelativePosition",
    "T5RelativeBias",
    "T5Bias",
    "T5BiasSettings",
    "resolve_t5_bias",
    "XLTerms",
    "relative_positions",
    "shaw_relative_index",
    "t5_relative_bucket",
    "transformer_xl_terms",
    "RopeScaling",
    "RotaryEmbedding",
    "apply_rope",
    "apply_rotary",
    "interleaved_to_half_permutation",
    "rope_cos_sin",
    "rope_decay_curve",
    "rope_score_bound",
    "rope_frequencies",
    "SinusoidalPositionalEmbedding",
    "sinusoidal_encoding",
    "sinusoidal_features",
    "sinusoidal_frequencies",
    "sinusoidal_shift_matrix",
    "sinusoidal_wavelengths",
]
