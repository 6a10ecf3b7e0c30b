"""Records know the corpus text they were trained on: Python ships it, so it changes with the
Python version, and a record paired with a baseline computed on another Python's text would
pair different text (ch15's per-window split raised on it, stopping chapters 10, 12, 13 and 15
on Python 3.12). The digests are :mod:`llmviz.training.corpus_id`'s, whose note a chapter's
first cell shows."""

from __future__ import annotations

import json
import platform

import pytest

from llmviz.evidence.records import experiments
from llmviz.training.corpus_id import corpus_digests
from llmviz.evidence.records._migrate import stamp_corpus
from llmviz.training.corpus_id import BOOK_CORPORA


def _copy(tmp_path, monkeypatch, name="ch15_llama", meta=None):
    exp = experiments()[name]
    data = json.loads(exp.path("long").read_text())
    data["meta"].update(meta or {})
    monkeypatch.setenv("LLMVIZ_RECORDS_DIR", str(tmp_path))
    exp.path("long").write_text(json.dumps(data))
    return exp


def test_the_digests_are_the_books_corpus_digests():
    assert corpus_digests() == {name: d for name, (d, _) in BOOK_CORPORA.items()} or \
        not platform.python_version().startswith("3.11")


def test_every_record_names_its_corpus_and_it_is_this_pythons():
    for exp in experiments().values():
        for rec in exp.records():
            assert rec.meta["corpus"] == corpus_digests() or rec.meta["python"] != platform.python_version()
            assert rec.corpus_note() is None or rec.meta["python"] != platform.python_version()


def test_another_pythons_text_is_named_and_the_per_window_split_is_not_made(tmp_path, monkeypatch):
    from llmviz.experiments import ch10_analysis

    exp = _copy(tmp_path, monkeypatch, meta={"python": "3.10.1",
                                             "corpus": {"prose": "0" * 16, "python": "0" * 16}})
    rec = exp.record("long")
    assert "prose and python text that Python 3.10.1 ships; this Python" in rec.corpus_note()
    # the windows are other text: no split, where it once raised on their count
    assert ch10_analysis.last_step_split(rec, [False] * 3) is None


def test_the_same_text_gives_no_note(tmp_path, monkeypatch):
    exp = _copy(tmp_path, monkeypatch, meta={"corpus": corpus_digests()})
    assert exp.record("long").corpus_note() is None


def test_a_record_that_read_no_corpus_gives_no_note(tmp_path, monkeypatch):
    exp = _copy(tmp_path, monkeypatch, name="ch19_recall",
                meta={"corpus": {"prose": "0" * 16, "python": "0" * 16}})
    assert exp.record("long").corpus_note() is None


def test_stamping_happens_only_on_the_python_that_made_the_record(tmp_path, monkeypatch):
    exp = _copy(tmp_path, monkeypatch, meta={"python": "3.10.1"})
    rec = exp.record("long")
    del rec.meta["corpus"]
    with pytest.raises(ValueError, match=r"made on Python 3\.10\.1.*run stamp-corpus there"):
        stamp_corpus(rec)
    data = json.loads(exp.path("long").read_text())
    data["meta"]["python"] = platform.python_version()
    del data["meta"]["corpus"]
    exp.path("long").write_text(json.dumps(data))
    assert stamp_corpus(exp.record("long")).startswith("stamped")
    assert exp.record("long").meta["corpus"] == corpus_digests()
    assert stamp_corpus(exp.record("long")) == "already stamped"
    with pytest.raises(TypeError, match="must be a Record"):
        stamp_corpus("ch15_llama")
