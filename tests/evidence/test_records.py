"""Recorded runs: a toy experiment, written to a temporary package, is recorded, goes stale
when its parameters or the code it runs change (and only then), reproduces its prefix, and the
command line says so with its exit code."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from llmviz.evidence import (
    CANNOT_DECIDE,
    EXPERIMENTS_ENV,
    HOLDS,
    RECORDING_ENV,
    RECORDS_DIR_ENV,
    Claim,
    Experiment,
    beats_baseline,
    compare_verdicts,
    experiments,
    paired,
    run_grid,
    side_by_side,
)
from llmviz.evidence.records import CROSS_DEVICE_RTOL, Record, find

ROOT = Path(__file__).resolve().parents[2]

LIB = '''
"""The toy's library: data and one optimiser step."""
import torch

SCALE = 1.0


def make_data(seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 4, generator=gen)
    return x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) * SCALE


def sgd_step(w, x, y, lr):
    """One step of least squares."""
    err = x @ w - y
    return w - lr * 2 * x.T @ err / len(y), float((err ** 2).mean())


def unused():
    return 1
'''

EXP = '''
import os

import torch

from llmviz.evidence import Experiment
import {lib} as lib


def run(variant, seed, *, prefix=None, steps, every):
    x, y = lib.make_data(seed)
    w = torch.zeros(4)
    lr = {{"slow": 0.01, "fast": 0.05}}[variant]
    curve = []
    for step in range(steps if prefix is None else min(prefix, steps)):
        w, loss = lib.sgd_step(w, x, y, lr)
        if step % every == 0:
            curve.append(loss)
    if prefix is not None:
        return {{"curve": curve}}
    recording = float(os.environ.get("LLMVIZ_RECORDING") == "{name}.long")
    return {{"curve": curve, "loss": lib.sgd_step(w, x, y, 0.0)[1], "recording": recording}}


toy = Experiment("{name}", run, variants=["slow", "fast"], seeds=[0, 1, 2],
                 sizes={{"cpu": {{"steps": 10, "every": 2}}, "long": {{"steps": 40, "every": 5}}}},
                 prefix=12, description="least squares by SGD")
'''


class Toy:
    """A toy experiment in its own modules under ``tmp_path``, records in ``tmp_path/records``."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        tag = uuid.uuid4().hex[:8]
        self.name, self.lib_name, self.module = f"toy_{tag}", f"toylib_{tag}", f"toyexp_{tag}"
        self.lib = tmp_path / f"{self.lib_name}.py"
        self.lib.write_text(LIB)
        (tmp_path / f"{self.module}.py").write_text(
            EXP.format(lib=self.lib_name, name=self.name))
        self.records = tmp_path / "records"
        self.env = {RECORDS_DIR_ENV: str(self.records), EXPERIMENTS_ENV: self.module}
        monkeypatch.syspath_prepend(str(tmp_path))
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        self.path = tmp_path
        self.exp = experiments()[self.name]

    def edit_lib(self, old: str, new: str) -> None:
        text = self.lib.read_text()
        assert old in text
        self.lib.write_text(text.replace(old, new))

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, **self.env,
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(self.path)])}
        return subprocess.run([sys.executable, "-m", "llmviz.evidence.records", *args],
                              capture_output=True, text=True, env=env, timeout=300, cwd=self.path)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    return Toy(tmp_path, monkeypatch)


@pytest.fixture
def recorded(toy):
    toy.record = toy.exp.produce("long", processes=2)
    return toy


def test_a_record_holds_runs_params_and_meta(recorded):
    rec, exp = recorded.record, recorded.exp
    assert rec.path == recorded.records / f"{exp.name}.long.json"
    data = json.loads(rec.path.read_text())
    assert data["params"] == {"steps": 40, "every": 5} and data["variants"] == ["slow", "fast"]
    assert set(data["runs"]["fast"]) == {"0", "1", "2"}
    assert len(data["runs"]["fast"]["0"]["curve"]) == 8  # steps 0, 5, ..., 35
    for key in ("size", "device", "device_name", "threads", "processes", "wall_s", "date",
                "commit", "llmviz", "torch", "python"):
        assert key in rec.meta, key
    # the functions the run executed, and only those
    functions = data["code"]["functions"]
    assert f"{recorded.lib_name}:sgd_step" in functions
    assert f"{recorded.lib_name}:make_data" in functions
    assert f"{recorded.module}:run" in functions
    assert f"{recorded.lib_name}:unused" not in functions
    # the record's runs equal a live run at the same size, number for number
    live = run_grid(lambda v, s: exp.fn(v, s, **exp.params("long")), exp.variants, exp.seeds)
    assert rec.runs.values("fast", "loss") == live.values("fast", "loss")
    assert rec.runs.curves("slow", "curve") == live.curves("slow", "curve")
    # the runs knew they were being recorded (to bypass caches); the live run did not
    assert rec.runs.values("fast", "recording") == [1.0] * 3
    assert live.values("fast", "recording") == [0.0] * 3 and RECORDING_ENV not in os.environ
    assert rec.label.startswith("long record: 40 steps, cpu (") and rec.label.endswith(rec.meta["date"][:10])
    assert exp.record("long").runs.values("slow", "loss") == rec.runs.values("slow", "loss")


def test_fresh_until_a_parameter_changes(recorded):
    rec = recorded.exp.record("long")
    assert rec.stale is None and "STALE" not in rec.label
    sizes = {**recorded.exp.sizes, "long": {"steps": 60, "every": 5}}
    edited = Experiment(recorded.name, recorded.exp.fn, variants=["slow", "fast"],
                        seeds=[0, 1, 2], sizes=sizes)
    stale = edited.record("long").stale
    assert stale == "parameters changed: steps 40 -> 60"
    assert "STALE: parameters changed" in edited.record("long").label
    more = Experiment(recorded.name, recorded.exp.fn, variants=["slow", "fast"],
                      seeds=[0, 1, 2, 3], sizes=recorded.exp.sizes)
    assert "seeds changed: [0, 1, 2] -> [0, 1, 2, 3]" in more.record("long").stale
    by_size = Experiment(recorded.name, recorded.exp.fn, variants=["slow", "fast"],
                         seeds=[0, 1, 2], sizes=recorded.exp.sizes, prefix={"long": 7})
    assert by_size.prefix_for("long") == 7 and by_size.record("long").stale is None
    with pytest.raises(ValueError, match="gives no prefix for size 'cpu'"):
        by_size.prefix_for("cpu")


def test_stale_when_the_experiment_runs_another_function(recorded):
    """Pointing an experiment at another function (e.g. one that scores other targets) leaves
    every function the record ran unchanged, so only the function's name can tell."""
    import importlib

    lib = importlib.import_module(recorded.lib_name)
    kw = dict(variants=["slow", "fast"], seeds=[0, 1, 2], sizes=recorded.exp.sizes)
    swapped = Experiment(recorded.name, lib.unused, **kw)
    assert swapped.record("long").stale == (f"the experiment now runs {recorded.lib_name}:unused, "
                                            "which this record's runs did not call")
    assert "STALE: the experiment now runs" in swapped.record("long").label
    assert Experiment(recorded.name, recorded.exp.fn, **kw).record("long").stale is None
    # a function the fingerprint cannot name (a lambda): only the code it calls is compared
    fn = recorded.exp.fn
    assert Experiment(recorded.name, lambda v, s, **p: fn(v, s, **p), **kw).record("long").stale is None


def test_stale_when_the_code_it_runs_changes_not_when_its_layout_does(recorded):
    record = recorded.exp.record("long")
    # comments, docstrings, blank lines and line breaks: still fresh
    recorded.edit_lib('    """One step of least squares."""\n',
                      '    """One step of least squares, by gradient descent."""\n  # a note\n')
    recorded.edit_lib("return w - lr * 2 * x.T @ err / len(y), float((err ** 2).mean())",
                      "return (w - lr * 2 * x.T @ err / len(y),  # the update\n"
                      "            float((err ** 2).mean()))")
    recorded.edit_lib("def unused():\n    return 1", "def unused():\n    return 2")  # not run
    assert record.stale is None
    # the code it runs: stale, naming the function
    recorded.edit_lib("lr * 2 * x.T", "lr * 3 * x.T")
    assert record.stale == f"code changed: {recorded.lib_name}:sgd_step changed"
    recorded.edit_lib("lr * 3 * x.T", "lr * 2 * x.T")
    assert record.stale is None  # back as it was
    # the experiment's definition: a new live size, a new description are not its code
    module = recorded.path / f"{recorded.module}.py"
    text = module.read_text()
    module.write_text(text.replace('"cpu": {"steps": 10', '"cpu": {"steps": 12').replace(
        "least squares by SGD", "least squares"))
    assert record.stale is None
    module.write_text(text.replace("import torch\n", "import torch\n\nEXTRA = 1\n", 1))
    assert record.stale == f"code changed: module-level code of {recorded.module} changed"
    module.write_text(text)
    # sizes kept in module constants (and the constants those are built from) are parameters
    shared = text.replace('sizes={"cpu": {"steps": 10, "every": 2}, ', "sizes=SIZES,").replace(
        '"long": {"steps": 40, "every": 5}},', "").replace(
        "import torch\n", 'import torch\n\nBASE = {"every": 5}\n'
        'SIZES = {"cpu": {"steps": 10, "every": 2}, "long": dict(BASE, steps=40)}\n', 1)
    module.write_text(shared)
    assert record.stale is None, shared
    module.write_text(shared.replace('"every": 2', '"every": 3').replace('"every": 5', '"every": 4'))
    assert record.stale is None  # (the loaded experiment, not the file, holds the parameters)
    module.write_text(text)
    # a module-level constant of a module it runs
    recorded.edit_lib("SCALE = 1.0", "SCALE = 2.0")
    assert record.stale == f"code changed: module-level code of {recorded.lib_name} changed"


def test_prefix_reproduces_and_fails_on_a_tampered_curve(recorded):
    ok, what = recorded.exp.record("long").reproduce()
    assert ok, what
    assert "prefix 12 steps of ('slow', 0) on cpu: 3 curve points; matches within rtol 0.001" \
        in what
    ok, what = recorded.exp.record("long").reproduce("fast", 2)
    assert ok and "('fast', 2)" in what
    data = json.loads(recorded.record.path.read_text())
    data["runs"]["slow"]["0"]["curve"][1] *= 1.01
    recorded.record.path.write_text(json.dumps(data))
    ok, what = recorded.exp.record("long").reproduce()
    assert not ok and "does NOT match" in what and "curve[1]" in what
    # made on a GPU, checked on this CPU: compared within the cross-device tolerance
    data["meta"]["device"] = "cuda"
    recorded.record.path.write_text(json.dumps(data))
    ok, what = recorded.exp.record("long").reproduce()
    assert ok and "cross-device" in what and f"rtol {CROSS_DEVICE_RTOL:g}" in what
    data["runs"]["slow"]["0"]["curve"][1] *= 1.2
    recorded.record.path.write_text(json.dumps(data))
    assert not recorded.exp.record("long").reproduce()[0]


def test_command_line_exit_codes(toy):
    empty = toy.cli("check")
    assert empty.returncode == 0 and "no records to check" in empty.stdout, empty.stderr
    made = toy.cli("run", toy.name, "--size", "long", "--processes", "2")
    assert made.returncode == 0, made.stderr
    assert f"wrote {toy.records / (toy.name + '.long.json')}" in made.stdout
    toy.edit_lib("lr * 2 * x.T", "lr * 2.5 * x.T")
    stale = toy.cli("check")
    refresh = f"python -m llmviz.evidence.records run {toy.name} --size long"
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert f"STALE {toy.name}.long: code changed: {toy.lib_name}:sgd_step changed" in stale.stdout
    assert f"refresh: {refresh}" in stale.stdout
    from llmviz.evidence.records.__main__ import main  # the same main, in this process

    listed = io.StringIO()
    with contextlib.redirect_stdout(listed):
        assert main(["list"]) == 0
    assert "long: stale: long record: 40 steps, cpu" in listed.getvalue()
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["run", "no_such_thing"]) == 2
    assert f"no experiment named no_such_thing; known: {toy.name}" in err.getvalue()


def test_command_line_check_passes_on_a_fresh_record_and_fails_an_irreproducible_one(recorded):
    from llmviz.evidence.records.__main__ import main

    assert main(["check"]) == 0
    data = json.loads(recorded.record.path.read_text())
    data["runs"]["slow"]["0"]["curve"][0] += 0.5
    recorded.record.path.write_text(json.dumps(data))
    assert main(["check", "--no-reproduce"]) == 0  # fresh: only the prefix can tell
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", recorded.name]) == 1
    assert f"IRREPRODUCIBLE {recorded.name}.long: prefix 12 steps" in out.getvalue()
    recorded.record.path.write_text("{")  # a broken file is reported, not a crash
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check"]) == 1
    assert f"ERROR {recorded.name}.long: JSONDecodeError" in out.getvalue()
    assert f"refresh: python -m llmviz.evidence.records run {recorded.name} --size long" \
        in out.getvalue()


def test_verdicts_from_a_record_and_live_side_by_side(recorded):
    rec = recorded.exp.record("long")
    live = recorded.exp.run("cpu")
    effect = paired(rec.runs.values("slow", "loss"), rec.runs.values("fast", "loss"))
    beats = beats_baseline({v: rec.runs.values(v, "loss") for v in ("slow", "fast")},
                           50.0, name="beats predicting zero")
    from_record = Claim("fast beats slow", effect, id="toy_rec", size=rec, checks=[beats])
    assert from_record.size == rec.label and from_record.device == "cpu"
    assert from_record.verdict == HOLDS
    live_losses = [c[-1] for c in live.curves("slow", "curve")], [
        c[-1] for c in live.curves("fast", "curve")]
    weak = beats_baseline(live_losses[0], 1.0, name="beats a loss of 1")  # fails: short run
    from_live = Claim("fast beats slow", paired(*live_losses), id="toy_live", checks=[weak])
    assert from_live.verdict == CANNOT_DECIDE
    sentence = compare_verdicts(from_live, from_record)
    assert sentence.startswith(f"The live run ({from_live.size}) and the record ({rec.label})")
    assert "differ: the live run says 'cannot decide at this size', the record says 'holds'" \
        in sentence and "fails beats a loss of 1" in sentence
    assert compare_verdicts(from_record, from_record.__class__(
        "fast beats slow", effect, id="toy_again", size=rec)).endswith("agree: the claim holds.")
    both = side_by_side(from_live, from_record)._repr_html_()
    assert 'id="claim-toy_live"' in both and 'id="claim-toy_rec"' in both
    assert sentence.replace("'", "&#x27;") in both
    with pytest.raises(ValueError, match="share the id 'toy_rec'"):
        compare_verdicts(from_record, from_record)


def _fn(variant, seed, *, prefix=None, steps):
    return {"x": 1.0}


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(name="ch 9"), ValueError, r"name='ch 9' must be letters"),
        (dict(fn=3), TypeError, "fn must be callable"),
        (dict(variants="ab"), TypeError, "variants must be a list"),
        (dict(variants=["a", "a"]), ValueError, "variants must be distinct"),
        (dict(seeds=[0, 0]), ValueError, "seeds must be distinct"),
        (dict(seeds=[0.5]), TypeError, "seeds must be a list of ints"),
        (dict(sizes={"huge": {}}), ValueError, "size='huge' is not supported"),
        (dict(sizes={"long": {"steps": (1, 2)}}), TypeError, "use lists, not tuples"),
        (dict(sizes={"long": {"steps": object()}}), TypeError, "plain JSON values"),
        (dict(sizes={"long": {"prefix": 3}}), ValueError, "may not define 'prefix'"),
        (dict(prefix=0), ValueError, "prefix must be a positive int"),
        (dict(prefix={"full": 5}), ValueError, "prefix size='full' is not supported"),
        (dict(prefix={"long": 0}), ValueError, r"prefix\['long'\] must be a positive int"),
    ],
)
def test_bad_experiments_are_refused(kwargs, exc, match):
    args = dict(name="ok", fn=_fn, variants=["a"], seeds=[0, 1, 2],
                sizes={"cpu": {"steps": 1}, "long": {"steps": 2}})
    with pytest.raises(exc, match=match):
        Experiment(**{**args, **kwargs})


def test_bad_requests_name_the_value(toy):
    with pytest.raises(ValueError, match="has no size 'full'"):
        toy.exp.record("full")
    with pytest.raises(FileNotFoundError, match=f"run {toy.name} --size long"):
        toy.exp.record("long")
    with pytest.raises(ValueError, match="'cpu' size is the live run"):
        toy.exp.produce("cpu")
    with pytest.raises(ValueError, match="variant='medium' is not supported"):
        toy.exp.produce("long").reproduce("medium")
    with pytest.raises(ValueError, match=f"no experiment named 'nope'; known: \\['{toy.name}'\\]"):
        find("nope")
    assert find(toy.name) is toy.exp
    with pytest.raises(TypeError, match="experiment must be an llmviz Experiment"):
        Record("toy", {}, "x.json")
    with pytest.raises(ValueError, match=f"not a format-1 record of {toy.name}"):
        Record(toy.exp, {"format": 0}, "x.json")


def test_run_results_may_hold_curves():
    runs = run_grid(lambda v, s: {"curve": [s, s + 1.0], "x": s}, ["a"], [0, 1])
    assert runs.curves("a", "curve") == [[0.0, 1.0], [1.0, 2.0]]
    with pytest.raises(TypeError, match=r"is a curve; read it with curves"):
        runs.values("a", "curve")
    with pytest.raises(TypeError, match="or a curve"):
        run_grid(lambda v, s: {"curve": ["x"]}, ["a"], [0], processes=1)
