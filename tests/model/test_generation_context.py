"""generate() past the model's max_seq_len: run on ("extend"), refuse ("error"), or a rolling
window ("window") whose every token is what the model predicts from the last max_seq_len
tokens alone. Models run in float64, and tokens are drawn with seeded generators, so that the
same logits give the same draws (a random model's greedy text repeats one token, which would
hide a window that does not slide)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from llmviz.model.config import ModelConfig
from llmviz.model.generation import CONTEXTS, generate
from llmviz.model.lm import DecoderLM
from llmviz.model.sampling import sample

L = 8  # max_seq_len of the test models
SMALL = dict(vocab_size=40, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=L)


def _model(**kw) -> DecoderLM:
    torch.manual_seed(0)
    return DecoderLM(ModelConfig(**dict(SMALL, **kw))).double().eval()


def _prompt(T: int, B: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, SMALL["vocab_size"], (B, T), generator=torch.Generator().manual_seed(seed))


def _seed(n: int = 5) -> torch.Generator:
    return torch.Generator().manual_seed(n)


def _on_last_window(model: DecoderLM, ids: torch.Tensor, new: int, seed: int = 5) -> torch.Tensor:
    """The definition: each next token is drawn from a plain forward over the last L tokens."""
    out, g = ids, _seed(seed)
    with torch.no_grad():
        for _ in range(new):
            nxt = sample(model(out[:, -L:]).logits[:, -1].float(), generator=g)
            out = torch.cat([out, nxt[:, None]], 1)
    return out


class _Recorder:
    """A sampler that keeps the logits (B, V) of every step and draws with seeded generators,
    one per row given (so a row draws alike in a batch or alone), else one for the batch."""

    def __init__(self, *seeds: int) -> None:
        self.logits: list[torch.Tensor] = []
        self.gens = [_seed(n) for n in seeds or (5,)]

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        self.logits.append(logits)
        if len(self.gens) == 1:
            return sample(logits, generator=self.gens[0])
        return torch.cat([sample(logits[i:i + 1], generator=g) for i, g in enumerate(self.gens)])


def _check_logits_are_the_windows(model, got, rec, T, *, full_runs=True):
    """Step i's logits are those of a plain forward over the last L tokens of got[:, :T + i];
    past L they differ from the forward over all of them (so the window mattered)."""
    with torch.no_grad():
        for i, logits in enumerate(rec.logits):
            seen = got[:, :T + i]
            torch.testing.assert_close(logits, model(seen[:, -L:]).logits[:, -1].float())
            if seen.shape[1] > L and full_runs:
                full = model(seen).logits[:, -1].float()
                assert (logits - full).abs().max() > 1e-3


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi"])
@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("T", [3, L, L + 4], ids=["short prompt", "prompt of L", "prompt past L"])
def test_window_equals_the_model_on_the_last_max_seq_len_tokens(position, use_cache, T):
    model = _model(position=position)
    ids = _prompt(T)
    rec = _Recorder()
    got = generate(model, ids, max_new_tokens=12, use_cache=use_cache, context="window", sampler=rec)
    assert got.shape == (2, T + 12)
    assert torch.equal(got[:, :T], ids)  # the whole prompt comes back, even when cut
    assert torch.equal(got, _on_last_window(model, ids, 12))
    _check_logits_are_the_windows(model, got, rec, T, full_runs=position != "learned")


def test_window_changes_nothing_within_max_seq_len():
    model = _model(position="rope")
    ids = _prompt(3)
    for use_cache in (True, False):
        window = generate(model, ids, max_new_tokens=L - 3, temperature=0, context="window",
                          use_cache=use_cache)
        assert torch.equal(window, generate(model, ids, max_new_tokens=L - 3, temperature=0))


def test_window_on_a_left_padded_batch_gives_each_row_its_own_window():
    model = _model(position="sinusoidal")  # absolute: a row's positions must restart at 0
    short, long = _prompt(2, B=1, seed=2), _prompt(5, B=1, seed=3)
    ids = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), long])
    mask = torch.tensor([[0, 0, 0, 1, 1], [1, 1, 1, 1, 1]])
    batch = _Recorder(11, 12)
    got = generate(model, ids, attention_mask=mask, max_new_tokens=10, context="window",
                   sampler=batch)
    recs = [_Recorder(11), _Recorder(12)]
    alone = [generate(model, p, max_new_tokens=10, context="window", sampler=rec)
             for p, rec in zip((short, long), recs)]
    assert torch.equal(got[0, 3:], alone[0][0]) and torch.equal(got[1], alone[1][0])
    for row, rec in enumerate(recs):
        torch.testing.assert_close(torch.stack(batch.logits)[:, row], torch.cat(rec.logits))
    for p, out, rec in zip((short, long), alone, recs):
        _check_logits_are_the_windows(model, out, rec, p.shape[1])
    # and each is the definition: the short row's window starts to slide 3 steps later
    assert torch.equal(alone[0], _on_last_window(model, short, 10, seed=11))
    assert torch.equal(alone[1], _on_last_window(model, long, 10, seed=12))
    assert len(got[:, 5:].unique()) > 3


def test_extend_is_the_default_and_runs_past_max_seq_len_where_positions_allow():
    model = _model(position="rope")
    ids = _prompt(5)
    seen = []

    def greedy(logits):
        seen.append(logits)
        return logits.argmax(-1)

    out = generate(model, ids, max_new_tokens=10, sampler=greedy)
    assert torch.equal(out, generate(model, ids, max_new_tokens=10, temperature=0, context="extend"))
    assert torch.equal(out, generate(model, ids, max_new_tokens=10, temperature=0, use_cache=False))
    # the last step saw all 14 tokens, not the last L: a full forward gives its logits, the
    # window's forward does not
    with torch.no_grad():
        full, window = (model(x).logits[:, -1].float() for x in (out[:, :-1], out[:, -L - 1:-1]))
    torch.testing.assert_close(seen[-1], full)
    assert not torch.allclose(seen[-1], window, atol=1e-4)


def test_error_refuses_any_request_past_max_seq_len_and_names_the_fix():
    model = _model(position="rope")
    with pytest.raises(ValueError, match=r"prompt \(5\) \+ max_new_tokens \(4\) exceeds max_seq_len "
                                         r"\(8\); ask for fewer tokens, or pass context='window'"):
        generate(model, _prompt(5), max_new_tokens=4, context="error")
    assert generate(model, _prompt(5), max_new_tokens=3, context="error").shape == (2, 8)


def test_learned_table_refuses_extend_past_its_rows_and_names_the_window():
    with pytest.raises(ValueError, match=r"of the learned position table; .*context='window'"):
        generate(_model(position="learned"), _prompt(5), max_new_tokens=4)


def test_bad_context_values_are_named():
    with pytest.raises(ValueError, match=r"context='rolling' is not supported; choose one of "
                                         r"\('extend', 'error', 'window'\)"):
        generate(_model(), _prompt(3), max_new_tokens=1, context="rolling")
    assert CONTEXTS == ("extend", "error", "window")

    class NoConfig(nn.Module):  # a model without a length limit to read
        def forward(self, ids, cache=None, **kw):
            return type("Out", (), {"logits": torch.zeros(*ids.shape, 5)})()

    with pytest.raises(ValueError, match=r"context='window' needs the model's length limit "
                                         r"\(model.config.max_seq_len\).*use context='extend'"):
        generate(NoConfig(), _prompt(3), max_new_tokens=1, context="window")
    assert generate(NoConfig(), _prompt(3), max_new_tokens=2, temperature=0).shape == (2, 5)
