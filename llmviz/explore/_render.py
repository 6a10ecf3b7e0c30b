"""The two faces' machinery: slider labels, nested layout keys, ipywidgets, the live face's
update scheduling (latest value wins), the sliders' script.

Used by :class:`llmviz.explore.Explorer` (see :mod:`llmviz.explore._core` for the design).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping

__all__ = ["format_value", "unflatten", "make_widget", "widget_value", "LatestWins", "SLIDER_JS",
           "PLOTLY_MIME", "FrameCache", "plotly_layout", "figure_json"]

#: The mimetype JupyterLab's plotly renderer draws (data, layout, config as JSON).
PLOTLY_MIME = "application/vnd.plotly.v1+json"


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
    # The options' values are their indices, never the control's values themselves: a value
    # of None (e.g. "no linear layers") would read as "nothing selected" to the widget, which
    # then shows an empty box. ``widget_value`` maps the index back.
    box = widgets.Dropdown(
        options=[(format_value(v), i) for i, v in enumerate(values)],
        value=list(values).index(c.default), description=c.text,
        style={"description_width": "initial"},
    )
    box.llmviz_values = tuple(values)
    return box


def widget_value(w: Any) -> Any:
    """The control value a widget from :func:`make_widget` holds (a dropdown holds an index)."""
    values = getattr(w, "llmviz_values", None)
    return w.value if values is None else values[w.value]


def _merge(base: dict, update: Mapping[str, Any]) -> dict:
    """``base`` updated recursively by ``update`` (nested dicts merge, other values replace)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def plotly_layout(layout: Mapping[str, Any]) -> dict:
    """A plotly layout as plain JSON-ready dicts: validated once (magic underscores such as
    ``xaxis_title`` resolved) and the named template (``"plotly_white"``) expanded, so the
    live face can merge per-frame changes into it without building a ``go.Figure``."""
    import plotly.graph_objects as go

    return json.loads(go.Layout(layout).to_json())


def figure_json(frame: Any, base_layout: Mapping[str, Any]) -> dict:
    """The plotly JSON of one live update: ``frame``'s traces on ``base_layout`` (from
    :func:`plotly_layout`) with ``frame.layout``'s changes merged in.

    The traces are already validated plotly objects (``to_plotly_json``, numpy arrays turned
    into lists); the per-frame layout changes are validated as a partial ``go.Layout``. This
    skips building and validating a whole ``go.Figure`` on every slider move (tens of ms).
    """
    import plotly.graph_objects as go
    import plotly.io as pio

    data = [t.to_plotly_json() if hasattr(t, "to_plotly_json") else dict(t) for t in frame.traces]
    layout = dict(base_layout)
    if frame.layout:
        layout = _merge(layout, go.Layout(unflatten(frame.layout)).to_plotly_json())
    return json.loads(pio.to_json({"data": data, "layout": layout}, validate=False))


class FrameCache:
    """A small least-recently-used store of live figures, keyed by the controls' values.

    The explorer functions are pure, so a value seen before (a slider moved back, a key held
    back and forth) redraws from here without computing.
    """

    def __init__(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"FrameCache size must be a positive int, got {size!r}")
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(params: Mapping[str, Any]) -> Hashable:
        """A hashable key for ``params`` (unhashable values are keyed by their repr)."""
        items = []
        for name in sorted(params):
            value = params[name]
            try:
                hash(value)
            except TypeError:
                value = ("<repr>", repr(value))
            items.append((name, value))
        return tuple(items)

    def get(self, key: Hashable, *, count: bool = True) -> Any:
        """The stored value or None; ``count=False`` leaves the hit/miss counts and the
        recency order alone (a look, not a use)."""
        if key in self._items:
            if count:
                self._items.move_to_end(key)
                self.hits += 1
            return self._items[key]
        if count:
            self.misses += 1
        return None

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class LatestWins:
    """Run the live face's updates so that the latest control value wins.

    ``submit(params)`` is called on every control change. While an update runs, further submits
    only replace the one pending value (the intermediate ones are dropped); when the running
    update ends, the newest pending value runs if it differs from what is on screen. Every
    submit bumps a generation counter, and a result is drawn only if no submit came while it
    was computed: the figure never shows a value the controls no longer have.

    With ``background=True`` (a live kernel) the computation runs in a worker thread, so the
    kernel keeps receiving control changes while it computes; otherwise ``submit`` runs the
    update before it returns (then nothing can arrive meanwhile, except from ``compute``).

    Args:
        compute: ``params -> result`` (slow; may run in the worker thread).
        draw: ``result -> None``, called only for the newest params.
        on_error: ``exception -> None`` in the background (default: re-raise in ``submit``).
        idle: ``(params on screen, stop) -> None``, run in the worker thread (background only)
            once after each drawn update when nothing is pending; it should check ``stop()``
            often and return when it is true (a new value arrived). The live face uses it to
            compute the values one step away before the reader asks for them.
    """

    def __init__(self, compute: Callable[[dict], Any], draw: Callable[[Any], None], *,
                 background: bool, on_error: Callable[[BaseException], None] | None = None,
                 drawn: Mapping[str, Any] | None = None,
                 idle: Callable[[dict, Callable[[], bool]], None] | None = None) -> None:
        self._compute, self._draw, self._on_error, self._idle = compute, draw, on_error, idle
        self._idled = True  # nothing drawn by the worker yet: nothing to prepare
        self.background = background
        self._lock = threading.RLock()
        self._generation = 0
        self._pending: tuple[int, dict] | None = None
        self._busy = False
        self.drawn: dict | None = dict(drawn) if drawn is not None else None
        self._worker: threading.Thread | None = None

    def submit(self, params: Mapping[str, Any]) -> None:
        with self._lock:
            self._generation += 1
            self._pending = (self._generation, dict(params))
            if self._busy:  # the running update picks it up when it ends
                return
            self._busy = True
        if self.background:
            self._worker = threading.Thread(target=self._run, name="llmviz-explorer", daemon=True)
            self._worker.start()
        else:
            self._run()

    def start_idle(self) -> None:
        """Run ``idle`` once now for what is on screen (``drawn``), in the worker thread: the
        first figure was drawn directly, not by the worker. Does nothing without a background
        worker or an ``idle`` callback, or while an update runs."""
        with self._lock:
            if not self.background or self._idle is None or self._busy or self.drawn is None:
                return
            self._idled = False
            self._busy = True
        self._worker = threading.Thread(target=self._run, name="llmviz-explorer", daemon=True)
        self._worker.start()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the background worker is idle (for tests and scripts)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    idle_now = (self._pending is None and self.background
                                and self._idle is not None and not self._idled)
                    if idle_now:
                        self._idled = True
                        shown = dict(self.drawn or {})
                    elif self._pending is None:
                        self._busy = False
                        return
                if idle_now:  # outside the lock: submits keep arriving and stop it
                    self._idle(shown, lambda: self._pending is not None)
                    continue
                with self._lock:
                    generation, params = self._pending
                    self._pending = None
                    if params == self.drawn:
                        continue
                result = self._compute(params)
                with self._lock:
                    if generation != self._generation:  # the controls moved on: drop it
                        continue
                    self._draw(result)
                    self.drawn = params
                    self._idled = False
        except BaseException as exc:  # noqa: BLE001 - reported, and the next submit runs again
            with self._lock:
                self._busy = False
                self._pending = None
            if self._on_error is None:
                raise
            self._on_error(exc)


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


_FACES = ("live", "static")


def face() -> str:
    """The face explorers show now: ``"live"`` (ipywidgets) or ``"static"`` (plotly sliders)."""
    forced = os.environ.get("LLMVIZ_EXPLORER", "").strip().lower()
    if forced:
        if forced not in _FACES:
            raise ValueError(
                f"LLMVIZ_EXPLORER={forced!r} is not a face; use 'live' or 'static' "
                "(or unset it to choose automatically)"
            )
        return forced
    if os.environ.get("LLMVIZ_BUILD"):
        return "static"
    return "live"


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a kernel attached)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None
