"""Head metrics on hand-built attention patterns with known answers."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.attention.masks import causal_mask
from llmviz.attention.metrics import (
    METRICS,
    head_metrics,
    mass_by_distance,
    row_entropy,
)


def _previous_token(T):
    w = torch.zeros(T, T)
    w[0, 0] = 1.0
    w[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return w


def _uniform_causal(T):
    m = causal_mask(T).float()
    return m / m.sum(-1, keepdim=True)


def _first_token(T):
    w = torch.zeros(T, T)
    w[:, 0] = 1.0
    return w


def test_pure_patterns_score_one():
    T = 12
    prev = head_metrics(_previous_token(T))
    assert prev["previous"].item() == pytest.approx(1.0)
    assert prev["local"].item() == pytest.approx(1.0)
    assert prev["entropy"].item() == pytest.approx(0.0, abs=1e-6)
    diag = head_metrics(torch.eye(T))
    assert diag["diagonal"].item() == pytest.approx(1.0)
    assert diag["previous"].item() == pytest.approx(0.0)
    uni = head_metrics(_uniform_causal(T))
    assert uni["entropy"].item() == pytest.approx(1.0)
    sink = head_metrics(_first_token(T))
    assert sink["first"].item() == pytest.approx(1.0)
    assert sink["local"].item() < 0.5


def test_local_metric_reaches_one_at_any_length_and_window():
    for T in (8, 32, 100):
        for window in (1, 2, 5):
            w = torch.zeros(T, T)
            for i in range(T):
                lo = max(0, i - window + 1)
                w[i, lo : i + 1] = 1.0 / (i + 1 - lo)
            assert head_metrics(w, window=window)["local"].item() == pytest.approx(1.0)


def test_stacked_heads_layers_and_batch():
    T = 10
    heads = torch.stack([_previous_token(T), torch.eye(T), _uniform_causal(T), _first_token(T)])  # (H, T, S)
    m = head_metrics(heads)
    assert set(m) == set(METRICS) and m["entropy"].shape == (4,)
    assert m["previous"].argmax().item() == 0 and m["diagonal"].argmax().item() == 1
    assert m["entropy"].argmax().item() == 2 and m["first"].argmax().item() == 3
    batch = heads[None].expand(3, -1, -1, -1)
    torch.testing.assert_close(head_metrics(batch)["local"], m["local"])
    layers = head_metrics([batch, batch.flip(1)])
    assert layers["first"].shape == (2, 4)
    torch.testing.assert_close(layers["first"][1], m["first"].flip(0))


def test_non_causal_and_t_less_than_s():
    T = 8
    full = torch.full((T, T), 1.0 / T)
    m = head_metrics(full)  # inferred non-causal
    assert m["entropy"].item() == pytest.approx(1.0)
    # decode step: 1 query at position 7 looking at its previous token
    w = torch.zeros(1, 8)
    w[0, 6] = 1.0
    assert head_metrics(w)["previous"].item() == pytest.approx(1.0)


def test_errors():
    with pytest.raises(ValueError, match="window must be a positive int"):
        head_metrics(torch.eye(3), window=0)
    with pytest.raises(ValueError, match=r"must be \(T, S\), \(H, T, S\)"):
        head_metrics(torch.ones(3))
    with pytest.raises(ValueError, match="empty list"):
        head_metrics([])
    with pytest.raises(ValueError, match=r"more queries \(4\) than keys \(3\)"):
        head_metrics(torch.ones(4, 3))


# ----------------------------------------------------------------------------- row_entropy
def test_row_entropy_closed_forms():
    one_hot = torch.eye(5)
    assert torch.equal(row_entropy(one_hot), torch.zeros(5))  # 0 log 0 = 0, no NaN
    for n in (1, 2, 7, 64):
        assert float(row_entropy(torch.full((n,), 1.0 / n))) == pytest.approx(math.log(n), rel=1e-6)
    p = torch.tensor([0.5, 0.25, 0.25, 0.0])
    assert float(row_entropy(p)) == pytest.approx(1.5 * math.log(2))


def test_row_entropy_is_what_head_metrics_normalises():
    w = torch.softmax(torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(0)), -1)
    expected = (row_entropy(w) / math.log(6)).mean(dim=(0, 2))  # non-causal: every row sees 6 keys
    assert torch.allclose(head_metrics(w, causal=False)["entropy"], expected)


# ----------------------------------------------------------------------------- mass_by_distance
def test_mass_by_distance_rows_sum_to_one_for_causal_weights():
    g = torch.Generator().manual_seed(0)
    for T, S in ((6, 6), (3, 9), (1, 5)):
        scores = torch.randn(4, T, S, generator=g).masked_fill(~causal_mask(T, S), float("-inf"))
        m = mass_by_distance(scores.softmax(-1))  # (H, S)
        assert m.shape == (4, S)
        assert torch.allclose(m.sum(-1), torch.ones(4))
        assert (m >= 0).all()


def test_mass_by_distance_of_known_patterns():
    T = 6
    prev = _previous_token(T)[None]  # all mass one back (row 0 on itself)
    m = mass_by_distance(prev)[0]
    assert m[1] == pytest.approx((T - 1) / T) and m[0] == pytest.approx(1 / T)
    diag = torch.eye(T)[None]
    assert torch.allclose(mass_by_distance(diag)[0], torch.eye(T)[0])  # all at distance 0
    future = torch.eye(T).roll(1, dims=-1)[None]  # mass on the next key: not counted
    assert mass_by_distance(future)[0].sum() == pytest.approx(1 / T)  # only the wrapped row


def test_mass_by_distance_errors():
    with pytest.raises(ValueError, match=r"weights must be \(H, T, S\), got shape \(4, 4\)"):
        mass_by_distance(torch.ones(4, 4))
    with pytest.raises(ValueError, match=r"S \(2\) must be >= T \(3\)"):
        mass_by_distance(torch.ones(1, 3, 2))


# ----------------------------------------------------------------------------- induction score
from llmviz.attention.metrics import induction_score  # noqa: E402


def _induction_head(tokens):
    """Each query puts all its weight on the key after the latest earlier copy of its token
    (on itself when there is none)."""
    S = len(tokens)
    w = torch.zeros(S, S)
    for i in range(S):
        hits = [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i]]
        w[i, hits[-1] if hits else i] = 1.0
    return w


def test_induction_score_of_known_patterns():
    tokens = torch.tensor([3, 1, 4, 5, 9, 3, 1, 4, 5, 9, 3, 1])
    T = len(tokens)
    ind = induction_score(_induction_head(tokens.tolist()), tokens)
    assert ind.shape == (1,) and ind.item() == pytest.approx(1.0)
    assert induction_score(_previous_token(T), tokens).item() == pytest.approx(0.0)
    # a uniform causal row at query i puts (number of induction keys) / (i + 1) on them
    uni = induction_score(_uniform_causal(T), tokens).item()
    expected = []
    for i in range(T):
        k = sum(1 for j in range(1, i + 1) if tokens[j - 1] == tokens[i])
        if k:
            expected.append(k / (i + 1))
    assert uni == pytest.approx(sum(expected) / len(expected))


def test_induction_score_batch_layers_and_no_copies():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 5, (3, 16), generator=g)
    heads = torch.stack([torch.stack([_induction_head(t.tolist()), _previous_token(16)]) for t in tokens])
    s = induction_score(heads, tokens)  # (B, H, T, S) with per-row tokens
    # the previous-token head scores where the key before it, i - 1, follows a copy: x[i-2] == x[i]
    rows = [(t, i) for t in tokens.tolist() for i in range(16) if t[i] in t[:i]]
    prev_expected = sum(1 for t, i in rows if i >= 2 and t[i - 2] == t[i]) / len(rows)
    torch.testing.assert_close(s, torch.tensor([1.0, prev_expected]))
    layers = induction_score([heads, heads.flip(1)], tokens)
    assert layers.shape == (2, 2) and layers[1, 1].item() == pytest.approx(1.0)
    distinct = torch.arange(8)  # no token repeats: no query has an earlier copy
    assert torch.isnan(induction_score(_uniform_causal(8), distinct)).all()


def test_induction_score_queries_are_last_rows():
    tokens = torch.tensor([7, 2, 7, 2, 7])
    full = _induction_head(tokens.tolist())
    last = full[-2:]  # (T=2, S=5): the queries at positions 3 and 4
    assert induction_score(last, tokens).item() == pytest.approx(1.0)


def test_induction_score_bad_input():
    w = _uniform_causal(6)
    with pytest.raises(ValueError, match="tokens must be"):
        induction_score(w, torch.arange(5))
    with pytest.raises(TypeError, match="integer token ids"):
        induction_score(w, torch.arange(6).float())
    with pytest.raises(ValueError, match="empty list"):
        induction_score([], torch.arange(6))
