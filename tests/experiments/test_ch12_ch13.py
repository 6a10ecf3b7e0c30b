"""Chapters 12 and 13's experiments: clean import, matched shapes, variant names, prefixes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from llmviz.analysis import count_parameters, flops_per_token
from llmviz.experiments import ch12, ch13
from llmviz.experiments._curves import check_prefix
from llmviz.model import DecoderLM

TINY = dict(steps=4, curve_every=2, batch_size=2, seq_len=64, warmup=1)


def test_modules_import_without_training():
    code = ("import llmviz.model as m\n"
            "def boom(*a, **k): raise AssertionError('a model was built at import')\n"
            "m.DecoderLM.__init__ = boom\n"
            "import llmviz.experiments.ch12 as a, llmviz.experiments.ch13 as b\n"
            "assert a.FFN.name == 'ch12_ffn' and b.SHAPES.name == 'ch13_shapes'\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_ch12_feed_forwards_have_equal_parameters_and_the_stated_init():
    counts = {f: sum(p.numel() for p in DecoderLM(ch12.config_for(f, "1/sqrt(C)")).parameters())
              for f in ch12.FFNS}
    assert len(set(counts.values())) == 1, counts  # the 2/3 rule is exact at C = 48
    cfg = ch12.config_for("GeGLU", "1/sqrt(C)")
    assert cfg.init_std == pytest.approx(48 ** -0.5) and cfg.ffn == "geglu"
    assert ch12.config_for("SwiGLU", "std 0.02").init_std == 0.02


def test_ch12_variant_names_round_trip_and_bad_names_are_refused():
    for name in ch12.FFN.variants:
        assert ch12.variant(*ch12.parse_variant(name)) == name
    with pytest.raises(ValueError, match="form '<ffn>, <init>@<lr>'"):
        ch12.parse_variant("SwiGLU@0.01")
    with pytest.raises(ValueError, match="feed-forward must be one of"):
        ch12.parse_variant("KAN, 1/sqrt(C)@0.01")


def test_ch13_shapes_match_their_target_with_heads_of_16():
    for L, cfg in ch13.shapes().items():
        assert cfg.n_layers == L and cfg.head_dim == ch13.HEAD_DIM
        assert count_parameters(cfg)["total"] == pytest.approx(ch13.TARGET, rel=0.005)
        assert cfg.init_std == pytest.approx(cfg.d_model ** -0.5)
        assert 2.2 < cfg.d_ff / cfg.d_model < 3.2
    widths = [ch13.shapes()[L].d_model for L in ch13.DEPTHS]
    assert widths == sorted(widths, reverse=True)  # deeper is narrower
    target = ch13.flops_target()
    for cfg in ch13.flops_shapes().values():
        assert flops_per_token(cfg, seq_len=64) == pytest.approx(target, rel=0.005)


def test_ch13_variant_names_round_trip_and_bad_names_are_refused():
    for name in ch13.SHAPES.variants:
        assert ch13.variant(*ch13.parse_variant(name)) == name
    with pytest.raises(ValueError, match="form 'L<depth>@<lr>'"):
        ch13.parse_variant("deep@0.01")
    with pytest.raises(ValueError, match="depth 3"):
        ch13.shape_run("L3@0.01", 0, **TINY)


def test_ch13_flops_runs_train_the_matched_flops_shapes_of_the_extreme_depths():
    assert {ch13.parse_variant(v)[0] for v in ch13.FLOPS.variants} == {ch13.DEPTHS[0], ch13.DEPTHS[-1]}
    assert {ch13.parse_variant(v)[1] for v in ch13.FLOPS.variants} == set(ch13.LRS)
    out = ch13.flops_run(ch13.variant(ch13.DEPTHS[-1], 0.01), 0, **TINY)
    deep = ch13.flops_shapes()[ch13.DEPTHS[-1]]
    assert out["flops_per_token"] == pytest.approx(ch13.flops_target(), rel=0.005)
    assert out["params"] == count_parameters(deep)["total"]
    assert deep != ch13.shapes()[ch13.DEPTHS[-1]]  # a different shape from the matched-params one
    with pytest.raises(ValueError, match="depth 3"):
        ch13.flops_run("L3@0.01", 0, **TINY)


def test_prefix_reproduces_the_start_of_the_curve():
    full = ch12.ffn_run("ReGLU, 1/sqrt(C)@0.01", 1, **TINY)
    assert len(full["curve"]) == TINY["steps"] // TINY["curve_every"] + 1
    assert full["val_loss"] == full["curve"][-1]
    part = ch12.ffn_run("ReGLU, 1/sqrt(C)@0.01", 1, prefix=2, **TINY)
    assert part["curve"] == pytest.approx(full["curve"][:2], rel=1e-5)
    with pytest.raises(ValueError, match="prefix must be an int"):
        check_prefix(0, 4)
    with pytest.raises(ValueError, match="prefix must be an int"):
        check_prefix(True, 4)


class _Runs:
    """A stand-in for a record's runs: ``values(variant, key)`` per seed."""

    def __init__(self, table):
        self.table = table

    def values(self, variant, key):
        return self.table[variant]


def test_best_rates_pick_the_lowest_mean_and_skip_diverged_rates():
    from llmviz.experiments.sweep import best_rates, inside_grid, rates_of

    names = ["a@0.001", "a@0.01", "a@0.1", "b@0.01", "b@0.1"]
    runs = _Runs({"a@0.001": [3.0, 3.0], "a@0.01": [2.0, 2.2], "a@0.1": [float("nan"), 1.0],
                  "b@0.01": [2.0, 2.0], "b@0.1": [1.9, 2.0]})
    assert rates_of(names) == {"a": [0.001, 0.01, 0.1], "b": [0.01, 0.1]}
    assert best_rates(runs, names) == {"a": 0.01, "b": 0.1}
    assert inside_grid("a", 0.01, [0.001, 0.01, 0.1]).passed
    assert not inside_grid("b", 0.1, [0.01, 0.1]).passed
    assert not inside_grid("a", 0.001, [0.001, 0.01, 0.1]).passed
    with pytest.raises(ValueError, match="every rate of 'c' diverged"):
        best_rates(_Runs({"c@0.1": [float("nan")]}), ["c@0.1"])
    with pytest.raises(ValueError, match="form '<group>@<lr>'"):
        rates_of(["no-rate"])


def test_ch13_step_comparison_times_a_training_step_of_each_config():
    from llmviz.experiments import ch13_analysis
    from llmviz.training.bench import Comparison

    table = ch13.shapes()
    deep, wide = table[8], table[1]
    c = ch13_analysis.step_comparison(deep, wide, batch_size=2, seq_len=16, repeats=3)
    assert isinstance(c, Comparison)
    assert (c.ours.name, c.peer.name) == ("L=8", "L=1")
    assert len(c.ours.times_s) == len(c.peer.times_s) == 3 and c.control is not None
    assert c.ratio.low > 0 and c.ratio.low <= c.ratio.mean <= c.ratio.high
