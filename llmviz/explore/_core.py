"""Explorers: one definition, two faces.

An explorer is a pure function from parameters to figure data (a :class:`Frame` of plotly
traces), plus the controls that say which values each parameter takes.

* In a live kernel it shows ipywidgets controls; moving one calls the function again with torch
  and redraws the figure.
* On the static site (the book build) it shows one plotly figure that holds the frame of every
  combination of the controls' values, with one plotly slider per control. A few lines of
  JavaScript, embedded with the figure, combine the sliders' positions into the index of the
  frame to show, so several sliders work together without a kernel.

Which face appears is decided by :func:`face`: the environment variable ``LLMVIZ_EXPLORER``
(``live`` or ``static``) if set, else ``static`` during the book build (``LLMVIZ_BUILD`` set by
the book's Sphinx extension), else ``live``.

line budget: one Explorer class holds its data, its static face and its live face.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import plotly.graph_objects as go
import plotly.io as pio

from ._render import (
    _in_kernel,
    face,
    PLOTLY_MIME,
    SLIDER_JS,
    FrameCache,
    LatestWins,
    figure_json,
    format_value,
    make_widget,
    widget_value,
    plotly_layout,
    unflatten,
)

__all__ = ["Control", "Frame", "Explorer", "face", "MAX_STATIC_FRAMES"]

#: Upper bound on the static grid (product of the controls' value counts): page weight.
MAX_STATIC_FRAMES = 400
#: Figures the live face keeps per explorer (a value seen before redraws without computing).
LIVE_CACHE_SIZE = 256
#: An explorer whose first frame takes longer than this (seconds) computes, while the reader
#: looks, the values one step away from what is shown (:meth:`Explorer.neighbours`).
PREFETCH_ABOVE_S = 0.02

@dataclass(frozen=True)
class Control:
    """One parameter of an explorer.

    Args:
        name: keyword argument of the explorer function.
        values: the values the static site steps through (at least 2), in slider order.
        default: starting value; must be one of ``values``. Defaults to the middle one.
        label: text shown beside the slider (defaults to ``name``).
        live: optional ``(min, max, step)`` for a finer numeric slider in a live kernel; the
            static grid still uses ``values``.
    """

    name: str
    values: tuple
    default: Any = None
    label: str | None = None
    live: tuple | None = None

    def __post_init__(self) -> None:
        values = tuple(self.values)
        object.__setattr__(self, "values", values)
        if len(values) < 2:
            raise ValueError(
                f"Control {self.name!r} needs at least 2 values to slide over, got {values}"
            )
        if self.default is None:
            object.__setattr__(self, "default", values[len(values) // 2])
        elif self.default not in values:
            raise ValueError(
                f"Control {self.name!r}: default {self.default!r} is not one of its values "
                f"{values}; add it to values or pick one of them"
            )
        if self.live is not None and len(self.live) != 3:
            raise ValueError(
                f"Control {self.name!r}: live must be (min, max, step), got {self.live!r}"
            )

    @property
    def text(self) -> str:
        return self.label or self.name

    @property
    def default_index(self) -> int:
        return self.values.index(self.default)


@dataclass
class Frame:
    """What an explorer function returns: plotly traces and per-frame layout changes.

    ``layout`` holds plotly ``relayout`` keys that change with the parameters, e.g.
    ``{"title.text": "base = 10000"}``; layout that never changes belongs to the
    :class:`Explorer` (``layout=``).
    """

    traces: list
    layout: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.traces, (list, tuple)) or not self.traces:
            raise TypeError(
                "Frame.traces must be a non-empty list of plotly traces, got "
                f"{type(self.traces).__name__}"
            )
        self.traces = list(self.traces)


class Explorer:
    """An explorer: ``fn(**params) -> Frame`` plus its controls.

    Args:
        fn: pure function of the controls' names returning a :class:`Frame`.
        controls: the parameters and the values each takes.
        title: figure title (per-frame titles go in ``Frame.layout``).
        layout: plotly layout shared by every frame (axis titles, fixed ranges, size).
        fixed: extra keyword arguments passed to ``fn`` on every call (not slid).

    The object displays itself: the last expression of a notebook cell shows the face chosen
    by :func:`face`. ``frame(**params)`` and ``static_figure()`` give the data directly.
    """

    def __init__(
        self,
        fn: Callable[..., Frame],
        controls: Sequence[Control],
        *,
        title: str = "",
        layout: Mapping[str, Any] | None = None,
        fixed: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        controls = list(controls)
        if not controls:
            raise ValueError("an Explorer needs at least one Control")
        names = [c.name for c in controls]
        if len(set(names)) != len(names):
            raise ValueError(f"control names must be unique, got {names}")
        n_frames = math.prod(len(c.values) for c in controls)
        if n_frames > MAX_STATIC_FRAMES:
            raise ValueError(
                f"the static grid has {n_frames} frames (product of "
                f"{[len(c.values) for c in controls]}), more than {MAX_STATIC_FRAMES}; "
                "use fewer values per control"
            )
        self.fn = fn
        self.controls = controls
        self.title = title
        self.layout = dict(layout or {})
        self.fixed = dict(fixed or {})

    # ------------------------------------------------------------------ data
    @property
    def defaults(self) -> dict:
        return {c.name: c.default for c in self.controls}

    def frame(self, **params: Any) -> Frame:
        """Call the explorer function with ``params`` (missing ones take their defaults)."""
        unknown = set(params) - {c.name for c in self.controls}
        if unknown:
            raise ValueError(
                f"unknown explorer parameter(s) {sorted(unknown)}; this explorer takes "
                f"{[c.name for c in self.controls]}"
            )
        kwargs = {**self.defaults, **params, **self.fixed}
        out = self.fn(**kwargs)
        if not isinstance(out, Frame):
            raise TypeError(
                f"explorer function {getattr(self.fn, '__name__', self.fn)!r} must return a "
                f"Frame, got {type(out).__name__}"
            )
        return out

    def grid(self) -> list[dict]:
        """Every combination of the controls' values, first control slowest."""
        combos = itertools.product(*(c.values for c in self.controls))
        return [dict(zip((c.name for c in self.controls), combo)) for combo in combos]

    def neighbours(self, params: Mapping[str, Any]) -> list[dict]:
        """The parameter sets one step from ``params``: each control moved one value down and
        one up (one ``step`` of its live range if it has one, else its neighbours in
        ``values``), the others kept. What a reader's next arrow-key press can ask for."""
        out = []
        for c in self.controls:
            value = params.get(c.name, c.default)
            steps: list = []
            if c.live is not None:
                lo, hi, step = c.live
                steps = [v for v in (value - step, value + step) if lo <= v <= hi]
                if all(isinstance(x, int) for x in c.live):
                    steps = [int(v) for v in steps]
                else:
                    steps = [round(v, 12) for v in steps]
            elif value in c.values:
                i = c.values.index(value)
                steps = [c.values[j] for j in (i - 1, i + 1) if 0 <= j < len(c.values)]
            out.extend({**params, c.name: v} for v in steps)
        return out

    def _strides(self) -> list[int]:
        strides, step = [], 1
        for c in reversed(self.controls):
            strides.append(step)
            step *= len(c.values)
        return list(reversed(strides))

    def _base_layout(self) -> dict:
        layout = {
            "template": "plotly_white",
            "margin": {"t": 60, "b": 70 + 70 * len(self.controls), "l": 60, "r": 20},
            "height": 420 + 50 * len(self.controls),
        }
        if self.title:
            layout["title"] = {"text": self.title}
        layout.update(self.layout)
        return layout

    # ------------------------------------------------------------------ static face
    def static_figure(self) -> tuple[go.Figure, dict]:
        """The static face: one figure with every frame, and the spec the sliders' script uses.

        Returns ``(figure, spec)``; ``spec["ranges"][i]`` is the ``[start, stop)`` trace range of
        grid point ``i`` and ``spec["layouts"][i]`` its layout changes.
        """
        fig = go.Figure(layout=self._base_layout())
        ranges, layouts = [], []
        default_idx = sum(
            c.default_index * s for c, s in zip(self.controls, self._strides())
        )
        for i, params in enumerate(self.grid()):
            frame = self.frame(**params)
            start = len(fig.data)
            for trace in frame.traces:
                trace = trace.to_plotly_json() if hasattr(trace, "to_plotly_json") else trace
                fig.add_trace(trace)
                fig.data[-1].visible = i == default_idx
            ranges.append([start, len(fig.data)])
            layouts.append(frame.layout)
            if i == default_idx and frame.layout:
                fig.update_layout(unflatten(frame.layout))
        sliders = []
        for k, c in enumerate(self.controls):
            sliders.append(
                {
                    "name": c.name,
                    "active": c.default_index,
                    "currentvalue": {"prefix": f"{c.text} = "},
                    "pad": {"t": 60 + 70 * k},  # below the x-axis title
                    "len": 0.9,
                    "x": 0.05,
                    "steps": [
                        {"label": format_value(v), "method": "skip", "args": [None]} for v in c.values
                    ],
                }
            )
        fig.update_layout(sliders=sliders)
        spec = {
            "names": [c.name for c in self.controls],
            "strides": self._strides(),
            "state": [c.default_index for c in self.controls],
            "ranges": ranges,
            "layouts": layouts,
            "n_traces": len(fig.data),
        }
        return fig, spec

    def static_html(self) -> str:
        """HTML for the static face (plotly.js itself is not included: the site serves it)."""
        fig, spec = self.static_figure()
        script = SLIDER_JS.replace("__SPEC__", json.dumps(spec))
        return pio.to_html(
            fig,
            include_plotlyjs=False,
            full_html=False,
            post_script=script,
            config={"displaylogo": False, "responsive": True},
        )

    # ------------------------------------------------------------------ live face
    def live(self, *, background: bool | None = None):
        """The live face: ipywidgets controls above an output that redraws on every change.

        Updates go through :class:`~llmviz.explore._render.LatestWins`: while one computes,
        only the newest control value is kept, and a figure is shown only if the controls
        still have its value. ``background`` (default: inside a kernel) computes in a worker
        thread so the kernel keeps receiving control changes meanwhile.
        """
        import ipywidgets as widgets

        if background is None:
            background = _in_kernel()
        start = time.perf_counter()
        first = self.frame()
        first_s = time.perf_counter() - start
        slow = first_s > 0.05
        controls = {c.name: make_widget(c, widgets, continuous=not slow) for c in self.controls}
        out = widgets.Output()
        cache = FrameCache(LIVE_CACHE_SIZE)
        base = self._base_layout()
        base.update(margin={**base["margin"], "b": 60},
                    height=base["height"] - 50 * len(self.controls))
        base = plotly_layout(base)  # template expanded once, not on every update

        def figure(params: dict) -> dict:
            """The plotly JSON the front end draws; cached per value (the function is pure)."""
            key = FrameCache.key(params)
            spec = cache.get(key)
            if spec is None:
                frame = first if params == self.defaults else self.frame(**params)
                spec = figure_json(frame, base)
                cache.put(key, spec)
            return spec

        def prepare(shown: dict, stop: Callable[[], bool]) -> None:
            """While the reader looks: compute the values one step from ``shown`` (slow
            explorers only), so the next arrow-key press or slider step is a cache hit."""
            for params in self.neighbours(shown):
                if stop():
                    return
                if cache.get(FrameCache.key(params), count=False) is None:
                    try:
                        figure(params)
                    except Exception:  # noqa: BLE001 - a real update reports it when asked
                        return

        def draw(spec: dict) -> None:
            # Set the Output's content directly (works from the worker thread; no display
            # hooks), only the plotly mimetype: no HTML copy of the same figure alongside.
            out.outputs = ({"output_type": "display_data", "metadata": {},
                            "data": {PLOTLY_MIME: spec, "text/plain": "<plotly figure>"}},)

        def failed(exc: BaseException) -> None:
            text = f"{type(exc).__name__}: {exc}"
            out.outputs = ({"output_type": "stream", "name": "stderr", "text": text},)

        updates = LatestWins(figure, draw, background=background, on_error=failed,
                             idle=prepare if first_s > PREFETCH_ABOVE_S else None)
        box = widgets.VBox([widgets.HBox(list(controls.values())), out])
        box.updates = updates  # for tests: .wait(), .drawn
        box.cache = cache  # for tests: .hits, .misses

        def changed(*_: Any) -> None:
            updates.submit({name: widget_value(w) for name, w in controls.items()})

        for w in controls.values():
            w.observe(changed, names="value")
        draw(figure(self.defaults))
        updates.drawn = dict(self.defaults)
        updates.start_idle()  # a slow explorer prepares the defaults' neighbours at once
        return box

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include=None, exclude=None):
        if face() == "live":
            try:
                return self.live()._repr_mimebundle_(include=include, exclude=exclude)
            except ImportError:  # no ipywidgets: fall back to the static face
                pass
        return {"text/html": self.static_html(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        ctrls = ", ".join(f"{c.name}={list(c.values)}" for c in self.controls)
        return f"Explorer({getattr(self.fn, '__name__', 'fn')}; {ctrls})"
