"""The live face keeps up: while an update runs only the newest control value is kept, and a
result is never drawn for a value the controls no longer have (``LatestWins``).

Driven without a browser: the widget's value is set from the test, as the kernel does when a
comm message arrives, while a slow explorer function computes in the worker thread.
"""

from __future__ import annotations

import threading
import time

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from llmviz.explore import Control, Explorer, Frame
from llmviz.explore._render import LatestWins

def _slow_explorer(calls: list, gate: threading.Event):
    def fn(x: int) -> Frame:
        calls.append(x)
        if x == 1:  # slow: the rest of the key presses arrive while it computes
            gate.wait(10)
        return Frame([go.Scatter(x=[0, 1], y=[x, x])], {"title.text": f"x = {x}"})

    return Explorer(fn, [Control("x", tuple(range(10)), default=0)])


def _shown(out) -> dict:
    (output,) = out.outputs
    return output["data"]["application/vnd.plotly.v1+json"]


def test_held_arrow_key_draws_first_and_last_only(monkeypatch):
    monkeypatch.setattr(pio.renderers, "default", "plotly_mimetype")
    calls: list = []
    gate = threading.Event()
    box = _slow_explorer(calls, gate).live(background=True)
    (slider,), out = box.children[0].children, box.children[1]
    drawn = []
    box.updates._draw = (lambda draw: lambda fig: (drawn.append(fig["layout"]["title"]["text"]),
                                                   draw(fig)))(box.updates._draw)
    assert calls == [0] and _shown(out)["layout"]["title"]["text"] == "x = 0"
    for v in range(1, 10):  # an arrow key held down: a change every 20 ms
        slider.value = v
        time.sleep(0.02)
    gate.set()
    box.updates.wait(10)
    # 1 started at once; 2..8 arrived while it ran and were replaced by 9; 1 came back after
    # the slider had moved on, so it was not drawn.
    assert calls == [0, 1, 9]
    assert drawn == ["x = 9"]
    assert _shown(out)["layout"]["title"]["text"] == "x = 9"
    assert box.updates.drawn == {"x": 9}


def test_result_for_an_abandoned_value_is_dropped():
    started, release = threading.Event(), threading.Event()
    computed, drawn = [], []

    def compute(p):
        computed.append(p["x"])
        if p["x"] == 1:
            started.set()
            release.wait(5)
        return p["x"]

    lw = LatestWins(compute, drawn.append, background=True, drawn={"x": 0})
    lw.submit({"x": 1})
    assert started.wait(5)
    lw.submit({"x": 2})
    lw.submit({"x": 0})  # back to what is on screen: nothing left to compute
    release.set()
    lw.wait(5)
    assert computed == [1]
    assert drawn == []
    assert lw.drawn == {"x": 0}


def test_newest_runs_after_the_running_one_when_it_differs():
    drawn = []
    gate = threading.Event()

    def compute(p):
        gate.wait(5)
        return p["x"]

    lw = LatestWins(compute, drawn.append, background=True)
    lw.submit({"x": 1})
    time.sleep(0.05)
    lw.submit({"x": 2})
    lw.submit({"x": 3})
    gate.set()
    lw.wait(5)
    assert drawn == [3]


def test_synchronous_mode_draws_before_submit_returns():
    drawn = []
    lw = LatestWins(lambda p: p["x"] * 10, drawn.append, background=False)
    lw.submit({"x": 1})
    assert drawn == [10]
    lw.submit({"x": 1})  # same as on screen: nothing to do
    assert drawn == [10]


def test_background_error_is_reported_and_the_next_value_still_runs():
    errors, drawn = [], []

    def compute(p):
        if p["x"] == 1:
            raise ValueError("bad x")
        return p["x"]

    lw = LatestWins(compute, drawn.append, background=True, on_error=errors.append)
    lw.submit({"x": 1})
    lw.wait(5)
    lw.submit({"x": 2})
    lw.wait(5)
    assert [str(e) for e in errors] == ["bad x"]
    assert drawn == [2]


def test_synchronous_error_raises():
    lw = LatestWins(lambda p: 1 / 0, lambda r: None, background=False)
    with pytest.raises(ZeroDivisionError):
        lw.submit({"x": 1})
    assert not lw._busy
