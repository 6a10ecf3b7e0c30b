"""Position explorers: frames are pure, fast, constant in trace count, and show the right data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmviz.explore.position import (
    alibi_explorer,
    alibi_frame,
    rope_explorer,
    rope_frame,
    sinusoidal_explorer,
    sinusoidal_frame,
    t5_bucket_explorer,
    t5_bucket_frame,
)
from llmviz.position.alibi import alibi_slopes
from llmviz.position.sinusoidal import sinusoidal_encoding

FACTORIES = [sinusoidal_explorer, rope_explorer, alibi_explorer, t5_bucket_explorer]


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_grid_is_small_and_trace_count_constant(factory):
    ex = factory()
    grid = ex.grid()
    assert 2 <= len(grid) <= (240 if factory is rope_explorer else 80)
    counts = {len(ex.frame(**params).traces) for params in grid}
    assert len(counts) == 1


def test_sinusoidal_frame_shows_the_table():
    f = sinusoidal_frame(dimension=5, position=7)
    pe = sinusoidal_encoding(128, 64)
    np.testing.assert_allclose(np.asarray(f.traces[0].y), pe[:, 5].numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f.traces[2].y), pe[7].numpy(), rtol=1e-6)


def test_rope_hand_angle():
    f = rope_frame(base=10000.0, position=3, pair=0)  # pair 0 turns 1 rad per position
    hand = f.traces[1]
    assert hand.x[1] == pytest.approx(math.cos(3.0)) and hand.y[1] == pytest.approx(math.sin(3.0))
    assert "base 10000" in f.layout["title.text"]
    # pair 0 turns once per 2*pi positions: the title says 6.28, not 6
    assert "one turn per 6.28 positions" in f.layout["title.text"]
    assert "one turn per 47,117 positions" in rope_frame(pair=31).layout["title.text"]


def test_rope_static_grid_is_dense_but_light():
    ex = rope_explorer()
    names = [c.name for c in ex.controls]
    assert names == ["base", "position", "pair"]  # the live test drives exactly these three
    bases, _, pairs = (c.values for c in ex.controls)
    assert len(bases) >= 5 and len(pairs) >= 8 and pairs[0] == 0 and pairs[-1] == 31
    assert len(ex.static_html()) < 1_000_000  # bytes the static page stores for this explorer
    # the score curve is drawn at offsets 0, 1, 2, ... without storing them
    curve = rope_frame().traces[2]
    assert curve.x0 == 0 and curve.dx == 1 and len(curve.y) == 256


def test_alibi_frame_clamps_head_and_shows_slopes():
    f = alibi_frame(n_heads=3, head=11)
    assert "head 2" in f.layout["title.text"]
    np.testing.assert_allclose(np.asarray(f.traces[0].y)[:3], alibi_slopes(3).numpy(), rtol=1e-6)
    mass = np.asarray(f.traces[2].y)
    assert mass[-1] == pytest.approx(1.0, abs=1e-5) and np.all(np.diff(mass) >= -1e-7)


def test_t5_frame_matches_buckets():
    import torch

    from llmviz.position.relative import t5_relative_bucket

    f = t5_bucket_frame(num_buckets=16, max_distance=64, bidirectional=False)
    rel = torch.arange(-300, 301)
    np.testing.assert_array_equal(np.asarray(f.traces[0].y),
                                  t5_relative_bucket(rel, bidirectional=False, num_buckets=16,
                                                     max_distance=64).numpy())
    assert "causal" in f.layout["title.text"]
