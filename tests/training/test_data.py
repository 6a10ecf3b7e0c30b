"""Tests for llmviz.training.data: tokenizer, corpora, batching, synthetic tasks."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmviz.training.data import (
    CORPORA,
    ByteTokenizer,
    associative_recall,
    copy_task,
    eval_windows,
    induction_task,
    load_corpus,
    random_batches,
    train_val_split,
)

TOK = ByteTokenizer()


# ----------------------------------------------------------------------------- tokenizer
@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenizer_round_trip(text):
    ids = TOK.encode(text)
    assert ids.dtype == torch.long and ids.ndim == 1
    assert len(ids) == len(text.encode("utf-8"))
    assert TOK.decode(ids) == text


@given(st.lists(st.integers(0, 255), max_size=50))
def test_decode_never_fails_on_valid_bytes(ids):
    out = TOK.decode(torch.tensor(ids, dtype=torch.long))
    assert isinstance(out, str)
    assert out == bytes(ids).decode("utf-8", errors="replace")


def test_tokenizer_vocab_and_ranges():
    ids = TOK.encode("naïve café ∑ 🐍")
    assert TOK.vocab_size == 256
    assert int(ids.min()) >= 0 and int(ids.max()) < 256
    assert TOK.encode("").numel() == 0


def test_decode_replaces_split_character():
    ids = TOK.encode("é")[:1]  # half of a two-byte character
    assert TOK.decode(ids) == "\ufffd"


def test_tokenizer_errors():
    with pytest.raises(TypeError, match="text must be a str"):
        TOK.encode(b"bytes")
    with pytest.raises(ValueError, match=r"byte ids must lie in \[0, 256\)"):
        TOK.decode([300])
    with pytest.raises(ValueError, match="decode takes one sequence"):
        TOK.decode(torch.zeros(2, 3, dtype=torch.long))


# ----------------------------------------------------------------------------- corpora
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_deterministic_and_nonempty(name):
    first = load_corpus(name)
    from llmviz.training import data

    data._corpus.cache_clear()  # recompute from scratch: same text
    second = load_corpus(name)
    assert first == second
    assert len(first) > 100_000


def test_prose_corpus_is_english_help_text():
    text = load_corpus("prose", max_chars=None)
    assert "statement" in text and "def" in text
    ascii_share = sum(c.isascii() for c in text) / len(text)
    assert ascii_share > 0.99


def test_python_corpus_is_python_source_and_capped():
    text = load_corpus("python", max_chars=50_000)
    assert len(text) == 50_000
    assert "def " in text and "import " in text
    assert text.startswith("# ---- module abc ----")


def test_unknown_corpus():
    with pytest.raises(ValueError, match="name='wiki' is not supported"):
        load_corpus("wiki")
    with pytest.raises(ValueError, match="max_chars must be a positive int, got 0"):
        load_corpus("prose", max_chars=0)


# ----------------------------------------------------------------------------- splitting/batching
def test_train_val_split_contiguous():
    tokens = torch.arange(100)
    train, val = train_val_split(tokens, 0.2)
    assert len(train) == 80 and len(val) == 20
    assert torch.equal(torch.cat([train, val]), tokens)


def test_train_val_split_errors():
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        train_val_split(torch.arange(10), 1.0)
    with pytest.raises(ValueError, match="leaves an empty part"):
        train_val_split(torch.arange(3), 0.01)
    with pytest.raises(ValueError, match="must have 1 dimensions"):
        train_val_split(torch.zeros(2, 2), 0.5)


def test_random_batches_shift_and_seed(device):
    tokens = torch.arange(1000)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    x1, y1 = random_batches(tokens, batch_size=8, seq_len=16, generator=g1, device=device)
    x2, y2 = random_batches(tokens, batch_size=8, seq_len=16, generator=g2, device=device)
    assert x1.shape == y1.shape == (8, 16)
    assert x1.device.type == torch.device(device).type
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(y1[:, :-1], x1[:, 1:])
    assert torch.equal(y1, x1 + 1)  # arange stream: targets are the next tokens


def test_random_batches_cover_last_window():
    tokens = torch.arange(20)
    g = torch.Generator().manual_seed(0)
    x, y = random_batches(tokens, batch_size=500, seq_len=18, generator=g)
    assert int(y.max()) == 19 and int(x.min()) == 0  # both extreme windows are reachable


def test_batching_errors():
    with pytest.raises(ValueError, match=r"seq_len \(64\) needs at least seq_len \+ 1 = 65 tokens"):
        random_batches(torch.arange(10), batch_size=2, seq_len=64)
    with pytest.raises(TypeError, match="must be int64"):
        random_batches(torch.zeros(100), batch_size=2, seq_len=8)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        random_batches(torch.arange(100), batch_size=0, seq_len=8)
    with pytest.raises(ValueError, match="n_windows must be a positive int, got 0"):
        eval_windows(torch.arange(100), seq_len=8, n_windows=0)


def test_eval_windows_sequential_and_spaced():
    tokens = torch.arange(101)
    x, y = eval_windows(tokens, seq_len=10)
    assert x.shape == (10, 10)
    assert torch.equal(x.flatten(), torch.arange(100))  # consecutive, non-overlapping
    assert torch.equal(y, x + 1)
    x, _ = eval_windows(tokens, seq_len=10, n_windows=4)
    assert x[0, 0] == 0 and x[-1, -1] == 99  # evenly spaced over the whole stream
    assert torch.all(x[1:, 0] > x[:-1, 0])


# ----------------------------------------------------------------------------- synthetic tasks
def test_copy_task(gen):
    task = copy_task(batch_size=4, n_tokens=5, vocab_size=10, generator=gen)
    assert task.inputs.shape == task.targets.shape == task.mask.shape == (4, 10)
    assert task.mask.dtype == torch.bool and int(task.mask.sum()) == 4 * 5
    first = task.inputs[:, :5]
    assert torch.all(task.inputs[:, 5] == 9)  # separator
    assert torch.equal(task.targets[task.mask].view(4, 5), first)  # masked targets = the copy
    assert torch.equal(task.targets[:, :-1], task.inputs[:, 1:])


def test_associative_recall(gen):
    task = associative_recall(batch_size=16, n_pairs=4, vocab_size=20, generator=gen)
    assert task.inputs.shape == (16, 9)
    assert torch.all(task.mask[:, -1]) and int(task.mask.sum()) == 16
    for row_in, row_tgt in zip(task.inputs, task.targets):
        keys, values = row_in[0:8:2], row_in[1:8:2]
        assert len(set(keys.tolist())) == 4 and int(keys.max()) < 10 <= int(values.min())
        query = row_in[-1]
        assert row_tgt[-1] == values[keys == query].item()


def test_induction_task(gen):
    for seq_len in (3, 8, 9, 31):
        task = induction_task(batch_size=3, seq_len=seq_len, vocab_size=50, generator=gen)
        assert task.inputs.shape == (3, seq_len)
        half = int(task.mask[0].float().argmax())
        assert half >= 1
        t = torch.arange(half, seq_len)
        # at masked positions the current token occurred `half` steps earlier and its
        # successor then is the target now
        assert torch.equal(task.inputs[:, t], task.inputs[:, t - half])
        assert torch.equal(task.targets[:, t], task.targets[:, t - half])


def test_induction_task_random_periods(gen):
    task = induction_task(batch_size=64, seq_len=31, vocab_size=20, generator=gen,
                          periods=(3, 5, 9))
    starts = task.mask.float().argmax(dim=1)  # o + p: the first masked position, per row
    seen = set()
    for row_in, row_tgt, row_mask, start in zip(task.inputs, task.targets, task.mask, starts):
        # the period is the smallest of the allowed ones at which the masked part repeats
        t = torch.arange(int(start), 31)
        p = next(p for p in (3, 5, 9) if torch.equal(row_in[t], row_in[t - p])
                 and torch.equal(row_tgt[t], row_tgt[t - p]))
        seen.add(p)
        assert bool(row_mask[t].all()) and not bool(row_mask[: int(start)].any())
        block = row_in[int(start) - p: int(start)]
        assert len(set(block.tolist())) == p  # distinct tokens: one match per query
    assert seen == {3, 5, 9}  # every period drawn in 64 rows
    assert len(set(starts.tolist())) > 3  # the offset varies too


def test_induction_task_period_errors():
    with pytest.raises(ValueError, match=r"periods \[17\] out of range"):
        induction_task(batch_size=1, seq_len=31, periods=(4, 17))
    with pytest.raises(ValueError, match="periods is empty"):
        induction_task(batch_size=1, seq_len=31, periods=())


def test_task_errors():
    with pytest.raises(ValueError, match=r"vocab_size \(2\) must be at least 3"):
        copy_task(batch_size=1, n_tokens=3, vocab_size=2)
    with pytest.raises(ValueError, match=r"vocab_size \(8\) must be at least 10"):
        associative_recall(batch_size=1, n_pairs=5, vocab_size=8)
    with pytest.raises(ValueError, match="seq_len must be at least 3"):
        induction_task(batch_size=1, seq_len=2)


def test_tasks_follow_device_and_seed(device):
    a = induction_task(batch_size=2, seq_len=8, generator=torch.Generator().manual_seed(1),
                       device=device)
    b = induction_task(batch_size=2, seq_len=8, generator=torch.Generator().manual_seed(1),
                       device=device)
    assert a.inputs.device.type == torch.device(device).type
    assert all(torch.equal(u, v) for u, v in zip(a, b))
