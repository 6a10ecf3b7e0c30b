"""Subpackages whose submodules load on first attribute access (``lv.plots.attention``)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from typing import Callable


def lazy_submodules(name: str, path: list[str], namespace: dict) -> tuple[Callable, Callable]:
    """Return ``(__getattr__, __dir__)`` for the package ``name`` at ``path``.

    ``__getattr__`` imports a public submodule the first time it is asked for; ``__dir__``
    lists the submodules beside the names the package already holds (``namespace``).
    """

    def __getattr__(attr: str):
        if not attr.startswith("_") and importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    def __dir__() -> list[str]:
        subs = [m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")]
        return sorted(set(namespace) | set(subs))

    return __getattr__, __dir__
