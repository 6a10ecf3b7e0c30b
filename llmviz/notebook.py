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

    def __repr__(self) -> str:
        return (
            f"llmviz {self.llmviz} · torch {self.torch} · python {self.python} · "
            f"device {self.device} · LLMVIZ_SCALE={self.scale} · seed {self.seed}"
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


def setup_notebook(seed: int = 0) -> NotebookInfo:
    """Seed Python and torch, and configure figures for where the notebook runs.

    Returns a :class:`NotebookInfo` (versions, device, size knob) to show under the cell.
    """
    from . import __version__

    random.seed(seed)
    torch.manual_seed(seed)
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
    )
