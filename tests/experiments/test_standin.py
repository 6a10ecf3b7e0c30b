"""The stand-in a chapter uses while its long record is missing."""

from __future__ import annotations

import pytest

from llmviz.evidence import RECORDS_DIR_ENV, Claim, paired
from llmviz.experiments import ch11
from llmviz.experiments.standin import LiveStandIn, record_or_live


def test_missing_record_is_replaced_by_a_live_run_in_the_records_shape(monkeypatch, tmp_path):
    monkeypatch.setenv(RECORDS_DIR_ENV, str(tmp_path))  # an empty records folder
    monkeypatch.setitem(ch11.XIONG.sizes, "cpu", dict(d_model=16, batch=1, seq_len=8))
    got = record_or_live(ch11.XIONG)
    assert isinstance(got, LiveStandIn) and got.recorded is False and got.stale is None
    assert got.params == dict(d_model=16, batch=1, seq_len=8)
    assert "python -m llmviz.evidence.records run ch11_xiong --size long" in got.label
    a = got.runs.values("post L=6 xavier", "last")
    b = got.runs.values("pre L=6 xavier", "last")
    assert len(a) == len(ch11.XIONG.seeds)
    claim = Claim("post above pre", paired(a, b), size=got)  # a claim reads it like a record
    assert claim.size == got.label


def test_bad_input_names_the_fix():
    with pytest.raises(TypeError, match="must be an llmviz Experiment"):
        LiveStandIn("ch11_xiong")
