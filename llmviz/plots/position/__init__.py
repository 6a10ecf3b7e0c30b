"""Figures for the position chapters (5-8), one module per family of encodings.

* :mod:`.absolute`: the sinusoidal table, its waves, scores against offset.
* :mod:`.rope`: RoPE clock hands, the helix of one pair, wavelength spectrum, long-term decay.
* :mod:`.bias`: ALiBi slopes and bias maps, T5 buckets and bias, attention mass by distance,
  and :func:`plot_shared_heatmaps` (several maps on one colour scale).

Everything is also importable from here (``from llmviz.plots import position as pplots``).
"""

from __future__ import annotations

from .absolute import (
    binary_counter_waves,
    plot_binary_counter,
    plot_score_vs_offset,
    plot_sinusoidal_heatmap,
    plot_sinusoidal_waves,
)
from .bias import (
    plot_alibi_bias,
    plot_alibi_slopes,
    plot_attention_mass_vs_distance,
    plot_heatmap,
    plot_shared_heatmaps,
    plot_t5_bias,
    plot_t5_buckets,
)
from .rope import (
    clock_positions,
    plot_rope_clock_hands,
    plot_rope_decay,
    plot_rope_spectrum,
    plot_rope_spiral,
    plot_rope_spiral_plotly,
)

__all__ = [
    "plot_sinusoidal_heatmap",
    "plot_sinusoidal_waves",
    "plot_score_vs_offset",
    "binary_counter_waves",
    "plot_binary_counter",
    "plot_rope_clock_hands",
    "clock_positions",
    "plot_rope_spiral",
    "plot_rope_spiral_plotly",
    "plot_rope_spectrum",
    "plot_rope_decay",
    "plot_heatmap",
    "plot_shared_heatmaps",
    "plot_alibi_slopes",
    "plot_alibi_bias",
    "plot_attention_mass_vs_distance",
    "plot_t5_buckets",
    "plot_t5_bias",
]
