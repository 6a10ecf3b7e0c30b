"""llmviz: the anatomy of a large language model, implemented, checked and drawn.

Shape letters used throughout: B batch, T query length, S key length, H heads, G kv heads,
D head dim, C model dim.
"""

__version__ = "0.1.0"

from ._utils import device, pick, scale, show_source
from .notebook import setup_notebook

__all__ = ["__version__", "device", "scale", "pick", "show_source", "setup_notebook"]
