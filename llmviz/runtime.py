"""Where and how a chapter runs: device, size setting, thread policy, source display, set-up.

* :func:`device` picks CUDA, then Apple MPS, then the CPU.
* :func:`run_size` reads the size setting ``LLMVIZ_SCALE`` (``"cpu"``, the default, or
  ``"full"``); :func:`pick` chooses a value by it (``pick(cpu=200, full=5000)``).
* :func:`setup_notebook` is the one call at the top of every chapter: seeds, thread policy,
  and (during the book build only) plotly output the static site can show.
* :func:`threads` is the one place the torch thread count is changed for a block of code.
* :func:`show_source` displays a library function's source in a notebook.

Nothing here has side effects at import time.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import platform
import random
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ._checks import check_positive_int

__all__ = [
    "device",
    "run_size",
    "pick",
    "show_source",
    "setup_notebook",
    "NotebookInfo",
    "in_book_build",
    "threads",
]

_SCALES = ("cpu", "full")


def device() -> torch.device:
    """The best device present: CUDA, then Apple MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def run_size() -> str:
    """The experiment size from ``LLMVIZ_SCALE``: ``"cpu"`` (default) or ``"full"``.

    ``"cpu"`` runs every notebook in under 90 s on a 2-core CPU; ``"full"`` runs the real-size
    experiments and is meant for a GPU.
    """
    value = os.environ.get("LLMVIZ_SCALE", "cpu").strip().lower() or "cpu"
    if value not in _SCALES:
        raise ValueError(
            f"LLMVIZ_SCALE={value!r} is not a known size; use one of {_SCALES} "
            "(unset means 'cpu')"
        )
    return value


def pick(cpu: Any, full: Any) -> Any:
    """Return ``cpu`` or ``full`` according to :func:`run_size` (``pick(cpu=200, full=5000)``)."""
    return full if run_size() == "full" else cpu


def show_source(obj: Any) -> Any:
    """Display the source of a library function or class, syntax-highlighted, in a notebook.

    Returns an object that renders as highlighted HTML in Jupyter and as plain text elsewhere;
    nothing is printed.
    """
    source = inspect.getsource(obj)
    module = inspect.getmodule(obj)
    where = f"{module.__name__}.{obj.__qualname__}" if module else obj.__qualname__
    return _Source(where, source)


class _Source:
    def __init__(self, where: str, source: str) -> None:
        self.where = where
        self.source = source

    def __repr__(self) -> str:
        return f"# {self.where}\n{self.source}"

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import PythonLexer
        except ImportError:  # pragma: no cover - pygments ships with IPython
            import html

            return f"<pre>{html.escape(repr(self))}</pre>"
        formatter = HtmlFormatter(noclasses=True, style="default")
        body = highlight(self.source, PythonLexer(), formatter)
        return (
            f'<div class="llmviz-source"><p><code>{self.where}</code></p>{body}</div>'
        )


#: The name the book build once registered its plotly renderer under (kept: module-level constants
#: are part of the recorded runs' code fingerprints).
_RENDERER = "llmviz_book"


def in_book_build() -> bool:
    """True while the book's Sphinx build is executing this kernel (``LLMVIZ_BUILD`` is set)."""
    return bool(os.environ.get("LLMVIZ_BUILD"))


@dataclass(frozen=True)
class NotebookInfo:
    """What a chapter runs on; shown under the set-up cell."""

    llmviz: str
    torch: str
    python: str
    device: torch.device
    scale: str
    seed: int
    threads: int

    def __repr__(self) -> str:
        return (
            f"llmviz {self.llmviz} · torch {self.torch} · python {self.python} · "
            f"device {self.device} · LLMVIZ_SCALE={self.scale} · seed {self.seed} · "
            f"{self.threads} CPU thread(s)"
        )


def _book_bundle(fig: Any) -> dict[str, str]:
    """A plotly figure as the book's pages show it: HTML whose plotly.js the site serves itself."""
    import plotly.io as pio

    html = pio.to_html(fig, include_plotlyjs=False, full_html=False, validate=False,
                       config={"displaylogo": False, "responsive": True})
    return {"text/html": html}


def _show_book_figure(fig: Any, *args: Any, **kwargs: Any) -> None:
    """Display ``fig`` as :func:`_book_bundle` (plotly's ``show``, while the book builds)."""
    from IPython.display import publish_display_data

    publish_display_data(_book_bundle(fig))
    return None


def _register_book_renderer() -> None:
    """While the book builds, every plotly figure a cell shows (as its value, with ``display``
    or with ``fig.show()``) becomes :func:`_book_bundle`.

    The figure type is registered with the kernel's display formatter and ``show`` is routed to
    it, rather than a renderer being added to plotly's registry: importing that registry imports
    nbformat and, through it, jsonschema, which builds an IRI grammar on import (about 1.5 s per
    chapter, half a minute over the book). Outside an IPython kernel there is nothing to show.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the book's kernels have IPython
        return
    shell = get_ipython()
    if shell is None:
        return
    from plotly.basedatatypes import BaseFigure

    shell.display_formatter.ipython_display_formatter.for_type(BaseFigure, _show_book_figure)
    BaseFigure.show = _show_book_figure


def setup_notebook(seed: int = 0, *, cpu_threads: int | None = 1) -> NotebookInfo:
    """Seed Python and torch, and configure figures for where the notebook runs.

    Args:
        seed: seed for Python's and torch's generators.
        cpu_threads: torch intra-op threads when the chapter runs at the CPU size
            (``LLMVIZ_SCALE=cpu``, the default). The book's models are tiny: splitting each small
            matrix product over cores costs more than it saves (measured several times slower
            with 2 threads on a busy 2-core machine). ``None`` leaves torch's default; at
            ``LLMVIZ_SCALE=full`` torch's default is always kept.

    Returns a :class:`NotebookInfo` (versions, device, size knob, threads) to show under the cell.
    """
    from . import __version__

    if cpu_threads is not None:
        check_positive_int(cpu_threads, "cpu_threads")
    random.seed(seed)
    torch.manual_seed(seed)
    if cpu_threads is not None and run_size() == "cpu":
        torch.set_num_threads(cpu_threads)
    if in_book_build():
        _register_book_renderer()
    _sharp_figures()
    from .training.corpus_id import corpus_note  # noqa: PLC0415 - reads the corpus; only here

    note = corpus_note("prose")
    if note is not None:
        print(note)
    return NotebookInfo(
        llmviz=__version__,
        torch=torch.__version__,
        python=platform.python_version(),
        device=device(),
        scale=run_size(),
        seed=seed,
        threads=torch.get_num_threads(),
    )


#: Inline matplotlib figures: their size on the page in CSS pixels per inch, and how many
#: image pixels each CSS pixel gets (2: sharp on high-density screens and when a phone or the
#: reader zooms in; the PNG carries its display size, so it is not drawn twice as large).
FIGURE_DPI = 110
FIGURE_PIXEL_RATIO = 2


def _sharp_figures() -> None:
    """Inline matplotlib figures as PNGs at ``FIGURE_PIXEL_RATIO`` x ``FIGURE_DPI`` with their
    display size in the output's metadata (IPython's "retina" format); myst-nb writes that size
    on the site's ``<img>``. Chosen over SVG by measurement (``benchmarks/bench_figures.py``):
    over a representative set of the book's figures the 2x PNGs weigh about twice the 1x ones
    and less than the SVGs (heatmaps, histograms and 3D cubes are heavier as SVG; only plain
    line plots are lighter), and a PNG looks the same whatever fonts the reader has."""
    import matplotlib as mpl

    mpl.rcParams["figure.dpi"] = FIGURE_DPI
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # pragma: no cover - comes with ipykernel
        return
    set_matplotlib_formats("retina" if FIGURE_PIXEL_RATIO == 2 else "png")


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[int]:
    """Run a block with ``n`` torch intra-op threads, then restore the previous count.

    ``None`` leaves the count as it is. Yields the count in force inside the block::

        with lv.threads(1):
            ...  # a measurement on one core
    """
    if n is not None:
        check_positive_int(n, "n")
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
