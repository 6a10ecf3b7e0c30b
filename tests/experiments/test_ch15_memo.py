"""Chapter 15's extraction test and its record: scoring, prefixes, bad input, the record."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from llmviz.evidence import EXPERIMENTS_ENV, RECORDS_DIR_ENV
from llmviz.experiments import ch15, ch15_memo
from llmviz.model import DecoderLM
from llmviz.training.data import ByteTokenizer

TINY = dict(ch15.SIZES["cpu"], d_model=16, n_layers=1, steps=4, curve_every=2, batch_size=4,
            n_prefix=8, n_cont=16, n_probe=2)
TEXT = "the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxes " * 3


def test_module_imports_without_training_or_loading_data():
    code = ("import llmviz.model as m\n"
            "def boom(*a, **k): raise AssertionError('a model was built at import')\n"
            "m.DecoderLM.__init__ = boom\n"
            "import llmviz.experiments.ch15_memo as memo\n"
            "import llmviz.experiments.ch15 as ch15\n"
            "assert ch15.data.cache_info().currsize == 0, 'the corpus was read at import'\n"
            "assert memo.MEMO.name == 'ch15_memo'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_content_collapses_layout_only():
    assert ch15_memo.content("a  b\n\n c +-----+ d | e") == "a b c d | e"
    assert ch15_memo.content("no layout here") == "no layout here"


def test_chance_finds_text_that_is_in_the_corpus_and_not_text_that_is_not():
    corpus = ch15_memo.content(TEXT)
    assert ch15_memo.chance(TEXT, corpus, 0, n_probe=3, n_cont=40) == [40, 40, 40]
    other = "0123456789" * 10
    assert max(ch15_memo.chance(other, corpus, 0, n_probe=3, n_cont=40)) <= 1


def _fake_generate(perfect):
    def generate(model, ids, max_new_tokens, **kw):
        # a perfect memoriser continues the text where the prefix sits; the other repeats "#"
        start = TEXT.encode().find(bytes(ids[0].tolist()))
        new = (TEXT.encode()[start + ids.shape[1]: start + ids.shape[1] + max_new_tokens] if perfect
               else b"#" * max_new_tokens)
        return torch.cat([ids, torch.tensor(list(new))[None]], 1)
    return generate


def test_copies_scores_a_perfect_memoriser_and_a_copier_of_nothing(monkeypatch):
    tokens = ByteTokenizer().encode(TEXT)
    corpus = ch15_memo.content(TEXT)
    model = DecoderLM(ch15.config_for(TINY))
    monkeypatch.setattr(ch15_memo, "generate", _fake_generate(True))
    assert ch15_memo.copies(model, tokens, corpus, 0, n_probe=3, n_prefix=8, n_cont=30) == [30, 30, 30]
    monkeypatch.setattr(ch15_memo, "generate", _fake_generate(False))
    assert ch15_memo.copies(model, tokens, corpus, 0, n_probe=3, n_prefix=8, n_cont=30) == [0, 0, 0]


def test_extract_scores_the_true_continuation_not_a_stretch_found_elsewhere(monkeypatch):
    tokens = ByteTokenizer().encode(TEXT)
    corpus = ch15_memo.content(TEXT)
    model = DecoderLM(ch15.config_for(TINY))
    monkeypatch.setattr(ch15_memo, "generate", _fake_generate(True))
    got = ch15_memo.extract(model, tokens, corpus, 0, n_probe=3, n_prefix=8, n_cont=30)
    assert got == {"suffix": [30, 30, 30], "anywhere": [30, 30, 30]}

    def elsewhere(model, ids, max_new_tokens, **kw):
        # continues with the text's opening bytes: found in the corpus, but not what follows
        return torch.cat([ids, torch.tensor(list(TEXT.encode()[:max_new_tokens]))[None]], 1)
    monkeypatch.setattr(ch15_memo, "generate", elsewhere)
    got = ch15_memo.extract(model, tokens, corpus, 0, n_probe=3, n_prefix=8, n_cont=30)
    assert got["anywhere"] == [30, 30, 30] and max(got["suffix"]) < 30
    assert ch15_memo.suffix_length(torch.tensor([1, 2, 3, 9]), torch.tensor([1, 2, 3, 4])) == 3


def test_a_run_records_the_curve_then_the_test_and_a_prefix_only_the_curve():
    full = ch15_memo.memo_run("llama", 1, **TINY)
    assert full["curve"] == pytest.approx(ch15.llama("llama", 1, **TINY)["curve"], rel=1e-5)
    assert len(full["copies"]) == len(full["chance"]) == TINY["n_probe"]
    assert full["copied"] == max(full["copies"]) and full["chance_max"] == max(full["chance"])
    assert len(full["suffix"]) == len(full["unseen"]) == TINY["n_probe"]
    assert full["suffix_max"] == max(full["suffix"]) and full["unseen_max"] == max(full["unseen"])
    part = ch15_memo.memo_run("llama", 1, prefix=2, **TINY)
    assert set(part) == {"curve", "val_loss"} and part["curve"] == pytest.approx(full["curve"][:2], rel=1e-5)


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="one variant, 'llama'"):
        ch15_memo.memo_run("gpt", 0, **TINY)
    with pytest.raises(ValueError, match="too short for a probe"):
        ch15_memo.chance("short", "short", 0, n_probe=1, n_cont=128)


def test_the_long_record_is_fresh_and_complete(monkeypatch):
    monkeypatch.delenv(RECORDS_DIR_ENV, raising=False)
    monkeypatch.delenv(EXPERIMENTS_ENV, raising=False)
    record = ch15_memo.MEMO.record("long")
    assert record.stale is None, f"{record.stale}; refresh: {record.refresh_command}"
    p = ch15_memo.SIZES["long"]
    assert record.params == p
    # the chapter's own model (the live size's) trained for 1600 steps, not ch15_llama's record
    model_keys = [k for k in ch15.SIZES["cpu"] if k not in ("steps", "curve_every")]
    assert {k: p[k] for k in model_keys} == {k: ch15.SIZES["cpu"][k] for k in model_keys}
    assert p["steps"] == 1600
    for seed in record.runs.seeds:
        run = record.runs[seed]["llama"]
        assert len(run["copies"]) == len(run["chance"]) == p["n_probe"]
        assert run["copied"] == max(run["copies"]) and run["curve"][-1] < run["curve"][0]
        assert len(run["suffix"]) == len(run["unseen"]) == p["n_probe"]
