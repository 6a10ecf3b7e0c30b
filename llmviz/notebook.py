"""Notebook set-up: one call at the top of every chapter.

``setup_notebook()`` fixes the seeds, picks the device, and, during the book build only, makes
plotly emit HTML the static site can show (plotly's default output is a MIME type the site
drops). Outside the build, plotly's own renderer is left alone (JupyterLab, VS Code, Colab).
"""

from __future__ import annotations

import os
import platform
import random
from dataclasses import dataclass

import torch

from ._utils import device as _device
from ._utils import scale as _scale

__all__ = ["setup_notebook", "NotebookInfo", "in_book_build"]

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


def _register_book_renderer() -> None:
    import plotly.io as pio
    from plotly.io.base_renderers import MimetypeRenderer

    class _BookHTML(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            html = pio.to_html(
                fig_dict, include_plotlyjs=False, full_html=False, validate=False,
                config={"displaylogo": False, "responsive": True},
            )
            return {"text/html": html}

    pio.renderers[_RENDERER] = _BookHTML()
    pio.renderers.default = _RENDERER


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

    if cpu_threads is not None and (not isinstance(cpu_threads, int) or cpu_threads < 1):
        raise ValueError(f"cpu_threads must be a positive int or None, got {cpu_threads!r}")
    random.seed(seed)
    torch.manual_seed(seed)
    if cpu_threads is not None and _scale() == "cpu":
        torch.set_num_threads(cpu_threads)
    if in_book_build():
        _register_book_renderer()
    try:  # crisp inline matplotlib figures in any Jupyter front end
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png")
    except ImportError:  # pragma: no cover
        pass
    import matplotlib as mpl

    mpl.rcParams["figure.dpi"] = 110
    return NotebookInfo(
        llmviz=__version__,
        torch=torch.__version__,
        python=platform.python_version(),
        device=_device(),
        scale=_scale(),
        seed=seed,
        threads=torch.get_num_threads(),
    )
