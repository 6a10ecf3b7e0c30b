"""The property checker: right verdicts on schemes whose properties are known in closed form."""

from __future__ import annotations

import pytest
import torch

from llmviz.position.properties import (
    PositionScheme,
    book_schemes,
    check_properties,
    property_table,
)


def test_known_schemes():
    inv = PositionScheme("decay", lambda m, n: -(m - n).abs().float())
    r = check_properties(inv)
    assert r.translation_invariant and r.symmetric and r.monotone

    absolute = PositionScheme("abs", lambda m, n: (m * n).float())
    r = check_properties(absolute)
    assert not r.translation_invariant and r.symmetric and not r.monotone
    assert r.max_shift_error > 1

    oscillating = PositionScheme("cos", lambda m, n: torch.cos((m - n).float()))
    r = check_properties(oscillating)
    assert r.translation_invariant and r.symmetric and not r.monotone

    lopsided = PositionScheme("lop", lambda m, n: (n - m).float().clamp(max=0) * 2
                              - (n - m).float().clamp(min=0))
    r = check_properties(lopsided)
    assert r.translation_invariant and r.symmetric is False and r.monotone


def test_causal_scheme_skips_symmetry_and_future():
    # rises in the future (n > m) must not count for a causal scheme
    s = PositionScheme("causal", lambda m, n: -(m - n).float(), causal=True)
    r = check_properties(s)
    assert r.symmetric is None and r.max_asymmetry is None and r.monotone
    r2 = check_properties(PositionScheme("same, not causal", s.score))
    assert r2.monotone is False


def test_book_table_verdicts():
    table = property_table(book_schemes(d=32, n_heads=4))
    assert table.loc["sinusoidal", "translation_invariant"]
    assert not table.loc["sinusoidal", "monotone"]
    assert table.loc["sinusoidal", "symmetric"]
    assert table.loc["RoPE", "translation_invariant"] and not table.loc["RoPE", "monotone"]
    assert not table.loc["learned absolute", "translation_invariant"]
    assert table.loc["ALiBi causal", "monotone"] and table.loc["ALiBi symmetric", "symmetric"]
    assert table.loc["T5 bias (head 0)", "translation_invariant"]
    assert len(table) == len(book_schemes(d=32, n_heads=4))


def test_bad_scheme_shape():
    bad = PositionScheme("bad", lambda m, n: torch.zeros(3))
    with pytest.raises(ValueError, match=r"scheme 'bad': score\(m, n\) must broadcast to \(N, N\)"):
        check_properties(bad, n_positions=5)
    with pytest.raises(ValueError, match=r"n_positions must be >= 3, got 2"):
        check_properties(bad, n_positions=2)


def test_projected_rows_decide_what_attention_forms():
    """Through random W_q, W_k the sinusoidal score is no longer a function of m - n; Transformer-XL's
    term (d) stays one for any W_kR, because R is indexed by the offset itself."""
    table = property_table(book_schemes(d=32, n_heads=4))
    row = table.loc["sinusoidal through W_q, W_k"]
    assert not row["translation_invariant"] and row["max_shift_error"] > 1e-2
    assert table.loc["Transformer-XL (d) through W_k,R", "translation_invariant"]
    assert table.loc["sinusoidal", "translation_invariant"]
    # the projected XL term differs from the W = I one: the projection is really applied
    m, n = torch.arange(6)[:, None], torch.arange(6)[None, :]
    schemes = {s.name: s for s in book_schemes(d=32, n_heads=4)}
    assert not torch.allclose(schemes["Transformer-XL (d)"].score(m, n),
                              schemes["Transformer-XL (d) through W_k,R"].score(m, n))
