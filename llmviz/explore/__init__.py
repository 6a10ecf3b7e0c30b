"""Explorers: live ipywidgets in a kernel, plotly sliders on the static site (see ``_core``)."""

from ._core import Control, Explorer, Frame, face

__all__ = ["Control", "Explorer", "Frame", "face"]
