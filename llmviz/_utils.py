"""Small helpers every module and notebook shares: device choice, the size knob, source display,
and the input checks that give the house's error messages.

Nothing here has side effects at import time.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Iterable

import torch

__all__ = [
    "device",
    "scale",
    "pick",
    "show_source",
    "check_tensor",
    "check_choice",
    "check_positive",
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


def scale() -> str:
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
    """Return ``cpu`` or ``full`` according to :func:`scale` (``pick(cpu=200, full=5000)``)."""
    return full if scale() == "full" else cpu


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


# ----------------------------------------------------------------------------- input checks
def check_tensor(
    x: Any,
    name: str,
    *,
    ndim: int | Iterable[int] | None = None,
    floating: bool = False,
) -> torch.Tensor:
    """Raise a clear ``TypeError``/``ValueError`` unless ``x`` is a tensor of the given rank."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {want} dimensions, got shape {tuple(x.shape)} ({x.ndim} dims)"
            )
    if floating and not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {x.dtype}; "
            f"convert it with {name}.float()"
        )
    return x


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Raise ``ValueError`` naming the allowed values unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not supported; choose one of {choices}")
    return value


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> Any:
    """Raise ``ValueError`` unless ``value`` is a positive number (or zero, if allowed)."""
    bad = value < 0 if allow_zero else value <= 0
    if bad:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {kind}, got {value}")
    return value
