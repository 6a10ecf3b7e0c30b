"""Explorers: the static face shows exactly what the live function computes.

Covers the core :class:`llmviz.explore.Explorer` on a toy function, and every explorer factory
found in the ``llmviz.explore.*`` modules (public ``*_explorer`` functions that need no
arguments): each frame of the static grid equals a fresh call of the function, the static
HTML carries the slider script, the live face builds ipywidgets and redraws when a control
changes. Also: :func:`face` and its environment variables, and the error messages.
"""

from __future__ import annotations

import base64
import json
import random

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

import llmviz.explore as explore_pkg
from llmviz.explore import Control, Explorer, Frame, face
from llmviz.explore._core import MAX_STATIC_FRAMES


# ----------------------------------------------------------------------------- helpers
def _decode(obj):
    """Plotly 7 writes numeric arrays as base64 typed arrays ({"bdata", "dtype", "shape"})."""
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:
            arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
            if "shape" in obj:
                shape = obj["shape"]
                shape = [int(n) for n in shape.split(",")] if isinstance(shape, str) else shape
                arr = arr.reshape(shape)
            return arr.astype(float).tolist()
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def _canon(traces) -> list:
    """Traces as plain JSON data (numbers, lists) so two computations can be compared."""
    data = [t.to_plotly_json() if hasattr(t, "to_plotly_json") else dict(t) for t in traces]
    out = _decode(json.loads(pio.to_json({"data": data, "layout": {}}, validate=False))["data"])
    for t in out:
        t.pop("visible", None)  # the static face sets it; the function does not
        t.pop("uid", None)
    return out


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def _same(a, b) -> bool:
    """Equal JSON data, with numbers compared to float32 precision (plotly serialises arrays)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if _nan(a) and _nan(b):  # JSON writes NaN as null; a typed array keeps NaN
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return bool(np.isclose(a, b, rtol=1e-6, atol=1e-9, equal_nan=True))
    return a == b


def _static_traces(fig: go.Figure, spec: dict, i: int) -> list:
    start, stop = spec["ranges"][i]
    return list(fig.data[start:stop])


def _toy_fn(freq: float = 1.0, phase: float = 0.0, n: int = 32) -> Frame:
    x = torch.linspace(0, 2 * torch.pi, n)
    y = torch.sin(freq * x + phase)
    return Frame(
        traces=[go.Scatter(x=x.numpy(), y=y.numpy(), mode="lines", name="sin"),
                go.Scatter(x=[0.0], y=[float(y[0])], mode="markers", name="start")],
        layout={"title.text": f"freq {freq:g}, phase {phase:g}"},
    )


def _toy_explorer() -> Explorer:
    return Explorer(
        _toy_fn,
        [Control("freq", (0.5, 1.0, 2.0, 4.0), default=1.0, live=(0.5, 4.0, 0.5)),
         Control("phase", (0.0, 1.5, 3.0), label="phase (rad)")],
        title="toy",
        layout={"yaxis": {"range": [-1.1, 1.1]}},
        fixed={"n": 16},
    )


def _example_weights():
    g = torch.Generator().manual_seed(0)
    return [torch.softmax(torch.randn(1, 3, 5, 5, generator=g), dim=-1) for _ in range(2)]


#: Example inputs for explorer factories that take data, by parameter name. A factory with a
#: required parameter not listed here is skipped (the skip reason names it).
EXAMPLES = {
    "weights_per_layer": _example_weights,
    "weights": _example_weights,
}


def _factories() -> list:
    """Every public ``*_explorer`` function of the ``llmviz.explore`` submodules."""
    found = []
    for qualname, fn, needs in explore_pkg.factories():
        missing = [n for n in needs if n not in EXAMPLES]
        marks = [pytest.mark.skip(reason=f"needs data the test cannot make: {missing}")] if missing else []
        factory = _with_examples(fn, needs) if needs and not missing else fn
        found.append(pytest.param(factory, id=qualname, marks=marks))
    return found


def _with_examples(fn, needs):
    def make():
        return fn(**{n: EXAMPLES[n]() for n in needs})

    return make


FACTORIES = _factories()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("LLMVIZ_EXPLORER", raising=False)
    monkeypatch.delenv("LLMVIZ_BUILD", raising=False)


# ----------------------------------------------------------------------------- static = live
def test_core_static_grid_equals_live_function():
    ex = _toy_explorer()
    fig, spec = ex.static_figure()
    grid = ex.grid()
    assert len(grid) == 4 * 3 == len(spec["ranges"])
    assert spec["n_traces"] == len(fig.data) == 2 * len(grid)
    for i, params in enumerate(grid):
        live = ex.frame(**params)
        assert _same(_canon(_static_traces(fig, spec, i)), _canon(live.traces)), params
        assert spec["layouts"][i] == live.layout
    # only the default frame is visible, and it is the one the strides point at
    visible = [i for i, t in enumerate(fig.data) if t.visible]
    d = spec["strides"][0] * 1 + spec["strides"][1] * 1  # freq=1.0 (index 1), phase=1.5 (index 1)
    assert visible == list(range(*spec["ranges"][d]))
    assert fig.layout.title.text == "freq 1, phase 1.5"
    assert [s.active for s in fig.layout.sliders] == [1, 1]
    assert [len(s.steps) for s in fig.layout.sliders] == [4, 3]


def test_core_fixed_kwargs_reach_the_function():
    ex = _toy_explorer()
    assert len(ex.frame().traces[0].x) == 16  # fixed={"n": 16} overrides the default 32


def test_static_html_has_slider_script():
    html = _toy_explorer().static_html()
    assert "plotly_sliderchange" in html
    assert "data-llmviz-explorer" in html and "data-llmviz-frame" in html
    assert "{plot_id}" not in html  # plotly substituted the figure's id
    assert '"strides": [3, 1]' in html
    assert "cdn.plot.ly" not in html and "<script src" not in html  # the site serves plotly.js


@pytest.mark.parametrize("factory", FACTORIES)
def test_factory_static_grid_equals_live_function(factory):
    ex = factory()
    assert isinstance(ex, Explorer)
    fig, spec = ex.static_figure()
    grid = ex.grid()
    assert 2 <= len(grid) <= MAX_STATIC_FRAMES
    sizes = {b - a for a, b in spec["ranges"]}
    assert len(sizes) == 1, f"trace count changes across frames: {sorted(sizes)}"
    # Compare every frame on small grids, a sample (ends, default, random) on larger ones.
    rng = random.Random(0)
    idx = range(len(grid)) if len(grid) <= 24 else sorted(
        {0, len(grid) - 1, *rng.sample(range(len(grid)), 10)})
    for i in idx:
        live = ex.frame(**grid[i])
        assert _same(_canon(_static_traces(fig, spec, i)), _canon(live.traces)), grid[i]
        assert spec["layouts"][i] == live.layout
    html = ex.static_html()
    assert "plotly_sliderchange" in html and "data-llmviz-explorer" in html


@pytest.mark.parametrize("factory", FACTORIES)
def test_factory_live_face_redraws(factory, monkeypatch):
    _check_live_redraw(factory(), monkeypatch)


def test_core_live_face_redraws(monkeypatch):
    _check_live_redraw(_toy_explorer(), monkeypatch)


def _fake_kernel_output(monkeypatch) -> None:
    """Make ``with out: display(fig)`` land in ``out.outputs`` as it would in a kernel."""
    import IPython.display
    import ipywidgets as widgets

    stack: list = []

    def enter(self):
        stack.append(self)
        return self

    def exit_(self, *exc):
        stack.pop()
        return False

    def clear_output(self, *args, **kwargs):
        self.outputs = ()

    def display(*objs, **kwargs):
        for obj in objs:
            data = obj.to_plotly_json() if hasattr(obj, "to_plotly_json") else repr(obj)
            stack[-1].outputs = stack[-1].outputs + (
                {"output_type": "display_data", "metadata": {},
                 "data": {"application/vnd.plotly.v1+json": data}},)

    monkeypatch.setattr(widgets.Output, "__enter__", enter)
    monkeypatch.setattr(widgets.Output, "__exit__", exit_)
    monkeypatch.setattr(widgets.Output, "clear_output", clear_output)
    monkeypatch.setattr(IPython.display, "display", display)


def _check_live_redraw(ex: Explorer, monkeypatch) -> None:
    import ipywidgets as widgets

    _fake_kernel_output(monkeypatch)
    box = ex.live()
    assert isinstance(box, widgets.VBox)
    controls_box, out = box.children
    assert isinstance(out, widgets.Output)
    controls = list(controls_box.children)
    assert [c.description for c in controls] == [c.text for c in ex.controls]
    assert len(out.outputs) == 1
    first = out.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert _same(_canon(first["data"]), _canon(ex.frame().traces))
    # Move the first control to another of its values: the Output holds one new figure.
    c0, w0 = ex.controls[0], controls[0]
    new = next(v for v in reversed(c0.values) if v != c0.default)
    w0.value = list(w0.llmviz_values).index(new) if hasattr(w0, "llmviz_values") else new
    assert len(out.outputs) == 1
    second = out.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    assert _same(_canon(second["data"]), _canon(ex.frame(**{c0.name: new}).traces))
    assert not _same(_canon(second["data"]), _canon(first["data"])) or \
        second["layout"] != first["layout"], "the figure did not change with the control"


def test_repr_mimebundle_follows_face(monkeypatch):
    ex = _toy_explorer()
    monkeypatch.setenv("LLMVIZ_EXPLORER", "static")
    bundle = ex._repr_mimebundle_()
    assert "plotly_sliderchange" in bundle["text/html"]
    monkeypatch.setenv("LLMVIZ_EXPLORER", "live")
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


# ----------------------------------------------------------------------------- face()
def test_face_defaults_to_live():
    assert face() == "live"


def test_face_static_during_build(monkeypatch):
    monkeypatch.setenv("LLMVIZ_BUILD", "1")
    assert face() == "static"


def test_face_override_wins_over_build(monkeypatch):
    monkeypatch.setenv("LLMVIZ_BUILD", "1")
    monkeypatch.setenv("LLMVIZ_EXPLORER", " Live ")
    assert face() == "live"
    monkeypatch.delenv("LLMVIZ_BUILD")
    monkeypatch.setenv("LLMVIZ_EXPLORER", "STATIC")
    assert face() == "static"


def test_face_rejects_unknown_value(monkeypatch):
    monkeypatch.setenv("LLMVIZ_EXPLORER", "widgets")
    with pytest.raises(ValueError, match=r"LLMVIZ_EXPLORER='widgets' is not a face; use 'live' or 'static'"):
        face()


# ----------------------------------------------------------------------------- errors
def test_control_errors():
    with pytest.raises(ValueError, match=r"Control 'x' needs at least 2 values to slide over, got \(1,\)"):
        Control("x", (1,))
    with pytest.raises(ValueError, match=r"Control 'x': default 5 is not one of its values \(1, 2\)"):
        Control("x", (1, 2), default=5)
    with pytest.raises(ValueError, match=r"Control 'x': live must be \(min, max, step\), got \(0, 1\)"):
        Control("x", (1, 2), live=(0, 1))
    assert Control("x", (1, 2, 3)).default == 2  # the middle value by default


def test_explorer_errors():
    c = Control("freq", (1.0, 2.0))
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        Explorer(3, [c])
    with pytest.raises(ValueError, match="an Explorer needs at least one Control"):
        Explorer(_toy_fn, [])
    with pytest.raises(ValueError, match=r"control names must be unique, got \['freq', 'freq'\]"):
        Explorer(_toy_fn, [c, c])
    with pytest.raises(ValueError, match=rf"the static grid has 441 frames .* more than {MAX_STATIC_FRAMES}"):
        Explorer(_toy_fn, [Control("freq", tuple(range(21))), Control("phase", tuple(range(21)))])
    ex = Explorer(_toy_fn, [c])
    with pytest.raises(ValueError, match=r"unknown explorer parameter\(s\) \['amp'\]; this explorer takes \['freq'\]"):
        ex.frame(amp=2)
    bad = Explorer(lambda freq: [go.Scatter()], [c])
    with pytest.raises(TypeError, match="must return a Frame, got list"):
        bad.frame()
    with pytest.raises(TypeError, match="Frame.traces must be a non-empty list of plotly traces, got list"):
        Frame(traces=[])


def test_factories_lists_every_explorer_with_its_required_inputs():
    found = {name: needs for name, _, needs in explore_pkg.factories()}
    assert {"position.rope_explorer", "position.alibi_explorer", "attention.temperature_explorer",
            "norms.norm_explorer", "architecture.sampling_explorer"} <= set(found)
    assert found["position.rope_explorer"] == ()
    assert all(name.split(".")[1].endswith("_explorer") for name in found)


def test_dropdown_never_shows_nothing_selected(monkeypatch):
    """A control value of None (the linear explorer's "no softmax layers") is an option like
    any other: the dropdown's own values are indices, so it never holds None (which the widget
    shows as an empty box), and every option maps back to its control value."""
    from llmviz.explore._render import widget_value
    from llmviz.explore.linear import linear_explorer

    _fake_kernel_output(monkeypatch)
    ex = linear_explorer()
    box = ex.live(background=False)
    (ratio, *_), out = box.children[0].children, box.children[1]
    assert None in ex.controls[0].values
    seen = []
    ratio.observe(lambda change: seen.append(change["new"]), names="value")
    for i, value in enumerate(ex.controls[0].values):
        ratio.value = i
        assert widget_value(ratio) == value and ratio.index == i and ratio.label
        title = out.outputs[0]["data"]["application/vnd.plotly.v1+json"]["layout"]["title"]["text"]
        assert title == ex.frame(ratio=value).layout["title.text"]
    default = ex.controls[0].default_index
    assert seen == list(range(len(ex.controls[0].values)))[1 if default == 0 else 0:]


def test_square_panels_keep_their_ranges_at_any_width():
    """An explorer panel held square (``scaleanchor``) must shrink its domain, not change its
    ranges, with the figure's width: the live face draws its first figure before the page
    lays it out, so a width-dependent range made the RoPE explorer's first figure differ from
    the same values drawn again after sliding away and back."""
    from llmviz.explore import factories

    checked = 0
    for _, make, args in factories():
        try:
            ex = make(*args)
        except TypeError:  # needs data (weights_explorer, whose panels are not square)
            continue
        layout = ex._base_layout()
        for name, axis in layout.items():
            if isinstance(axis, dict) and "scaleanchor" in axis:
                anchor = axis["scaleanchor"]
                other = layout.get(anchor[0] + "axis" + anchor[1:], {})
                assert axis.get("constrain") == "domain" and other.get("constrain") == "domain", \
                    f"{make.__name__}: {name} and its anchor need constrain='domain'"
                checked += 1
    assert checked >= 3
