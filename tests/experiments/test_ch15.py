"""Chapter 15's experiment: clean import, the scored targets, prefixes, bad input, the record."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from llmviz.evidence import EXPERIMENTS_ENV, RECORDS_DIR_ENV
from llmviz.experiments import ch15
from llmviz.model import DecoderLM

TINY = dict(ch15.SIZES["cpu"], d_model=16, n_layers=1, steps=4, curve_every=2, batch_size=4)


def test_module_imports_without_training_or_loading_data():
    code = ("import llmviz.model as m\n"
            "def boom(*a, **k): raise AssertionError('a model was built at import')\n"
            "m.DecoderLM.__init__ = boom\n"
            "import llmviz.experiments.ch15 as ch15\n"
            "assert ch15.data.cache_info().currsize == 0, 'the corpus was read at import'\n"
            "assert ch15.LLAMA.name == 'ch15_llama'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_val_loss_is_the_mean_over_val_targets():
    torch.manual_seed(0)
    model = DecoderLM(ch15.config_for(TINY)).eval()
    W, val = TINY["seq_len"], ch15.data()[1]
    targets = ch15.val_targets(W)
    # independently: each target t read with the bytes of its window before it
    starts = targets // W * W
    some = torch.arange(0, len(targets), 97)
    nll = []
    with torch.no_grad():
        for k in some.tolist():
            t, s = int(targets[k]), int(starts[k])
            logits = model(val[s:t][None]).logits[0, -1]
            nll.append(float(torch.nn.functional.cross_entropy(logits, val[t])))
        all_logits = model(ch15.val_windows(W)[:, :-1]).logits
        per_target = torch.nn.functional.cross_entropy(
            all_logits.flatten(0, 1), ch15.val_windows(W)[:, 1:].flatten(), reduction="none")
    torch.testing.assert_close(per_target[some], torch.tensor(nll), rtol=1e-4, atol=1e-5)
    assert len(targets) == len(per_target) and bool((targets % W != 0).all())
    assert ch15.val_loss(model, W) == pytest.approx(float(per_target.mean()), rel=1e-5)


def test_prefix_reproduces_the_start_of_the_curve():
    full = ch15.llama("llama", 1, **TINY)
    assert len(full["curve"]) == TINY["steps"] // TINY["curve_every"] + 1
    assert full["val_loss"] == full["curve"][-1]
    part = ch15.llama("llama", 1, prefix=2, **TINY)
    assert part["curve"] == pytest.approx(full["curve"][:2], rel=1e-5)
    # a whole run also keeps its last model's loss per held-out window; a prefix only the curve
    assert len(full["window_loss"]) == len(ch15.val_windows(TINY["seq_len"])) and "window_loss" not in part
    assert sum(full["window_loss"]) / len(full["window_loss"]) == pytest.approx(full["val_loss"], rel=1e-5)


def test_window_losses_are_val_loss_window_by_window():
    torch.manual_seed(0)
    model = DecoderLM(ch15.config_for(TINY)).eval()
    W = TINY["seq_len"]
    per = ch15.window_losses(model, W)
    windows = ch15.val_windows(W)
    assert per.shape == (len(windows),) and per.device.type == "cpu"
    k = len(windows) // 2  # one window on its own: its targets, read from its own first byte
    with torch.no_grad():
        alone = torch.nn.functional.cross_entropy(model(windows[k:k + 1, :-1]).logits[0], windows[k, 1:])
    assert float(per[k]) == pytest.approx(float(alone), rel=1e-5)
    assert float(per.mean()) == pytest.approx(ch15.val_loss(model, W), rel=1e-5)


def test_bad_input_names_the_fix():
    with pytest.raises(ValueError, match="one variant, 'llama'"):
        ch15.llama("gpt", 0, **TINY)
    with pytest.raises(ValueError, match=r"prefix must be an int .* in \[1, 4\]"):
        ch15.llama("llama", 0, prefix=0, **TINY)


def test_the_long_record_is_fresh_and_complete(monkeypatch):
    monkeypatch.delenv(RECORDS_DIR_ENV, raising=False)
    monkeypatch.delenv(EXPERIMENTS_ENV, raising=False)
    record = ch15.LLAMA.record("long")
    assert record.stale is None, f"{record.stale}; refresh: {record.refresh_command}"
    p = ch15.SIZES["long"]
    assert record.params == p
    curves = record.runs.curves("llama", "curve")
    assert len(curves) == 3
    for curve, final in zip(curves, record.runs.values("llama", "val_loss")):
        assert len(curve) == p["steps"] // p["curve_every"] + 1 and final == curve[-1]
        assert curve[-1] < curve[0]  # it learned something
