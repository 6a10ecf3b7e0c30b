"""The two faces' machinery: slider labels, nested layout keys, ipywidgets, the sliders' script.

Used by :class:`llmviz.explore.Explorer` (see :mod:`llmviz.explore._core` for the design).
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["format_value", "unflatten", "make_widget", "SLIDER_JS"]


def format_value(v: Any) -> str:
    """A control value as slider text (floats in ``%g``)."""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def unflatten(flat: Mapping[str, Any]) -> dict:
    """``{"title.text": "x"}`` -> ``{"title": {"text": "x"}}`` for ``update_layout``."""
    out: dict = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def make_widget(c: Any, widgets: Any, *, continuous: bool):
    """An ipywidgets control for the explorer Control ``c``: a slider for numbers, else a dropdown."""
    values = c.values
    common = {"description": c.text, "continuous_update": continuous,
              "style": {"description_width": "initial"}}
    if c.live is not None:
        lo, hi, step = c.live
        cls = widgets.IntSlider if all(isinstance(v, int) for v in c.live) else widgets.FloatSlider
        return cls(value=c.default, min=lo, max=hi, step=step, **common)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if numeric:
        return widgets.SelectionSlider(
            options=[(format_value(v), v) for v in values], value=c.default, **common
        )
    return widgets.Dropdown(
        options=[(format_value(v), v) for v in values], value=c.default,
        description=c.text, style={"description_width": "initial"},
    )


# The static face's script: several plotly sliders select one frame of the joint grid.
SLIDER_JS = """
(function () {
  var gd = document.getElementById('{plot_id}');
  var spec = __SPEC__;
  var state = spec.state.slice();
  gd.on('plotly_sliderchange', function (ev) {
    var k = spec.names.indexOf(ev.slider.name);
    if (k < 0) { return; }
    state[k] = ev.step._index;
    var idx = 0;
    for (var j = 0; j < state.length; j++) { idx += state[j] * spec.strides[j]; }
    var vis = new Array(spec.n_traces).fill(false);
    for (var t = spec.ranges[idx][0]; t < spec.ranges[idx][1]; t++) { vis[t] = true; }
    Plotly.restyle(gd, {visible: vis});
    if (Object.keys(spec.layouts[idx]).length) { Plotly.relayout(gd, spec.layouts[idx]); }
    gd.setAttribute('data-llmviz-frame', String(idx));
  });
  gd.setAttribute('data-llmviz-explorer', '1');
})();
"""
