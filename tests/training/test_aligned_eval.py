"""Aligned evaluation targets: fixed window ends, the same targets at every length."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmviz.training.evaluation import score_tails, tail_ends, tail_targets


class _Lookup(nn.Module):
    """Logits depend only on the previous token and the window length (a position-free toy)."""

    def __init__(self, vocab: int = 7) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(0)))
        self.seen: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.seen.append(ids.clone())
        return self.table[ids]


def test_ends_are_spread_without_overlap():
    ends = tail_ends(1000, max_length=128, tail=16, n_ends=10)
    assert ends[0] == 128 and int(ends[-1]) <= 999
    assert torch.all(ends[1:] - ends[:-1] >= 16)
    every = tail_ends(1000, max_length=128, tail=16)
    assert len(every) == (999 - 128) // 16 + 1
    assert torch.all(every[1:] - every[:-1] == 16)
    targets = tail_targets(ends, 16)
    assert targets.shape == (10, 16)
    assert torch.equal(targets[:, -1], ends)
    assert len(set(targets.flatten().tolist())) == 160  # no target scored twice


def test_every_length_reads_the_windows_ending_at_the_same_targets():
    torch.manual_seed(0)
    tokens = torch.randint(0, 7, (600,))
    ends = tail_ends(len(tokens), max_length=64, tail=8, n_ends=5)
    model = _Lookup()
    out = score_tails(model, tokens, (8, 16, 64), ends, tail=8)
    assert out.shape == (3, 5)
    # the model looks one token back only, so every length gives the same tail losses
    assert torch.allclose(out[0], out[1]) and torch.allclose(out[0], out[2])
    # and those losses are the ones of the targets tail_targets names
    targets = tail_targets(ends, 8)
    logp = torch.log_softmax(model.table[tokens[targets - 1]], -1)
    ref = -logp.gather(-1, tokens[targets][..., None])[..., 0].mean(-1)
    assert torch.allclose(out[2], ref.double(), atol=1e-6)
    # the windows read at length 64 end just before each end's target
    last = model.seen[-1]
    assert last.shape[1] == 64
    assert torch.equal(last[:, -1], tokens[ends - 1][: last.shape[0]])


def test_batching_does_not_change_the_result():
    tokens = torch.randint(0, 7, (500,), generator=torch.Generator().manual_seed(1))
    ends = tail_ends(len(tokens), max_length=32, tail=8)
    a = score_tails(_Lookup(), tokens, (16, 32), ends, tail=8, batch_tokens=32)
    b = score_tails(_Lookup(), tokens, (16, 32), ends, tail=8)
    assert torch.allclose(a, b)


def test_bad_input():
    tokens = torch.randint(0, 7, (300,))
    with pytest.raises(ValueError, match="do not fit"):
        tail_ends(300, max_length=64, tail=16, n_ends=100)
    with pytest.raises(ValueError, match="cannot hold a window"):
        tail_ends(50, max_length=64, tail=8)
    with pytest.raises(ValueError, match="tail \\(80\\) is longer than max_length"):
        tail_ends(300, max_length=64, tail=80)
    ends = tail_ends(300, max_length=64, tail=8)
    with pytest.raises(ValueError, match="ends must lie in"):
        score_tails(_Lookup(), tokens, (128,), ends, tail=8)
    with pytest.raises(ValueError, match="longer than length"):
        score_tails(_Lookup(), tokens, (4, 64), ends, tail=8)
    with pytest.raises(TypeError, match="integer tensors"):
        score_tails(_Lookup(), tokens.float(), (64,), ends, tail=8)
    with pytest.raises(ValueError, match="ends is empty"):
        score_tails(_Lookup(), tokens, (64,), ends[:0], tail=8)
