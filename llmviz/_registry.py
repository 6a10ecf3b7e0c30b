"""One registry type for every kind a model is built from (norms, feed-forwards, positions, masks).

A :class:`Kind` says, in one place, how a kind is built and how many parameters the built
module holds. Everything else (config validation, closed-form counts, explorer options, the
lists of names in docstrings) reads the registry, so adding a kind is one ``register`` call next
to its code.

Parameter counts are *declared* as closed forms, not derived by building the module on the meta
device. Two reasons: the counts are what the book teaches (``2C`` for a LayerNorm, ``3CF`` for a
GLU), and :func:`llmviz.analysis.count_parameters` runs inside search loops
(:func:`llmviz.analysis.match_width`), where building a module per call costs about 40x more. A
declared count can drift from the module it describes; ``tests/model/test_kinds.py`` closes that
door by building every registered kind and comparing its declared count with ``numel``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from ._checks import check_choice

__all__ = ["Kind", "Registry"]


@dataclass(frozen=True)
class Kind:
    """One registered kind: its ``build`` function, its declared ``params`` count and facts.

    ``build`` and ``params`` take the same arguments (whatever the registry documents), so
    ``kind.params(*args) == numel(kind.build(*args))`` is the property every test checks.
    ``info`` holds per-kind facts other code reads (a default activation, where a position
    scheme acts, whether a norm works per token).
    """

    name: str
    build: Callable[..., Any]
    params: Callable[..., int]
    summary: str = ""
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)


class Registry(Mapping[str, Kind]):
    """An ordered ``name -> Kind`` mapping with one ``register`` door and a checked lookup.

    Args:
        what: how error messages name a value of this kind (``"norm kind"``).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._kinds: dict[str, Kind] = {}

    def register(self, name: str, *, build: Callable[..., Any], params: Callable[..., int],
                 summary: str = "", **info: Any) -> Kind:
        """Add a kind; a name registered twice is an error (no silent override)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.what} name must be a non-empty str, got {name!r}")
        if name in self._kinds:
            raise ValueError(f"{self.what} {name!r} is already registered; pick another name")
        kind = Kind(name, build, params, summary, dict(info))
        self._kinds[name] = kind
        return kind

    def __getitem__(self, name: str) -> Kind:
        return self._kinds[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def kind(self, name: Any, label: str | None = None) -> Kind:
        """The kind called ``name``, or a ValueError that lists the registered names."""
        check_choice(name, label or self.what, tuple(self._kinds))
        return self._kinds[name]

    def names(self, **info: Any) -> tuple[str, ...]:
        """Registered names in order, optionally only those whose ``info`` matches ``info``."""
        return tuple(n for n, k in self._kinds.items()
                     if all(k.info.get(key) == value for key, value in info.items()))

    def describe(self, **info: Any) -> str:
        """The names as a docstring list: ````a````, ````b```` ..."""
        return ", ".join(f"``{n!r}``" for n in self.names(**info))

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._kinds)})"
