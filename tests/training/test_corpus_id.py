"""The corpora's digests: the book's records were made on Python 3.11's corpora, and a chapter
run on a Python that builds other text says so."""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import llmviz
from llmviz.training import corpus_id
from llmviz.training.data import load_corpus

ROOT = Path(__file__).resolve().parents[2]


def test_the_digest_is_the_sha256_of_the_corpus():
    for name in ("prose", "python"):
        want = hashlib.sha256(load_corpus(name).encode("utf-8")).hexdigest()[:16]
        assert corpus_id.corpus_digest(name) == want


@pytest.mark.skipif(platform.python_version_tuple()[:2] != ("3", "11"),
                    reason="the book's records were made on Python 3.11's corpora")
def test_python_3_11_builds_the_books_corpora():
    assert corpus_id.corpus_note("prose") is None and corpus_id.corpus_note("python") is None


def test_another_corpus_is_named_with_what_it_changes(monkeypatch):
    here = corpus_id.corpus_digest("prose")
    monkeypatch.setitem(corpus_id.BOOK_CORPORA, "prose", ("0123456789abcdef", "3.11"))
    note = corpus_id.corpus_note("prose")
    assert note is not None and here in note and "0123456789abcdef" in note
    assert platform.python_version() in note and "Python 3.11" in note and "n-gram" in note
    monkeypatch.setitem(corpus_id.BOOK_CORPORA, "prose", (here, "3.11"))
    assert corpus_id.corpus_note("prose") is None


def test_setup_notebook_shows_the_note_only_where_the_corpus_differs(monkeypatch, capsys):
    llmviz.setup_notebook()
    shown = "builds a different 'prose' corpus" in capsys.readouterr().out
    assert shown == (corpus_id.corpus_note() is not None)
    monkeypatch.setitem(corpus_id.BOOK_CORPORA, "prose", ("0123456789abcdef", "3.11"))
    llmviz.setup_notebook()
    assert "builds a different 'prose' corpus" in capsys.readouterr().out


def test_records_check_prints_the_note():
    code = ("from llmviz.training import corpus_id; corpus_id.BOOK_CORPORA['python'] = ('x' * 16, '3.11'); "
            "from llmviz.evidence.records.__main__ import main; main(['check', '--no-reproduce', 'ch11_xiong'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert "builds a different 'python' corpus" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("bad, err", [("poetry", ValueError), (3, ValueError)])
def test_bad_names_are_refused(bad, err):
    with pytest.raises(err, match="name"):
        corpus_id.corpus_digest(bad)
    with pytest.raises(err, match="name"):
        corpus_id.corpus_note(bad)
