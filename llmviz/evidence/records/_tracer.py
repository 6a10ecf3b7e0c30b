"""What a recorded run executed: :class:`CodeTracer`, a ``sys.settrace`` hook that collects the
functions run under the given folders (see :mod:`._fingerprint`, which hashes them)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["CodeTracer"]

_OWN_FILE = str(Path(__file__).resolve())  # the tracer's own exit is not the run's code


_UNBOUND = object()


class CodeTracer:
    """Collect the functions executed under ``roots`` while the ``with`` block runs.

    ``functions``: ``{module name: {qualified name, ...}}`` after the block.
    """

    def __init__(self, roots: list[Path]) -> None:
        self.roots = tuple(str(Path(r).resolve()) + os.sep for r in roots)
        self._seen_code: set[Any] = set()
        self._files: dict[str, set[str]] = {}
        self._touched: set[str] = set()  # modules whose generated code ran (dataclass init)
        self._previous = None
        self._inside_cache: dict[str, bool] = {}

    def _inside(self, filename: str) -> bool:
        known = self._inside_cache.get(filename)
        if known is None:
            resolved = str(Path(filename).resolve())
            known = resolved.startswith(self.roots) and resolved != _OWN_FILE
            self._inside_cache[filename] = known
        return known

    def _trace(self, frame, event, arg):
        local = self._previous(frame, event, arg) if self._previous is not None else None
        code = frame.f_code
        if code in self._seen_code:
            return local
        self._seen_code.add(code)
        filename = code.co_filename
        if not filename.startswith("<"):
            if self._inside(filename):
                self._files.setdefault(filename, set()).add(code.co_qualname)
        elif "self" in code.co_varnames:  # generated: a dataclass's __init__, __eq__, ...
            # ``self`` may be a plain local not bound yet at the call (Python 3.12's frozen
            # importlib has ``self = super().__new__(...)`` in a ``__new__``): nothing to read.
            owner = frame.f_locals.get("self", _UNBOUND)
            if owner is not _UNBOUND:
                module = sys.modules.get(type(owner).__module__)
                path = getattr(module, "__file__", None)
                if path and self._inside(path):
                    self._touched.add(module.__name__)
        return local

    def __enter__(self) -> CodeTracer:
        self._previous = sys.gettrace()  # keep a coverage tool or debugger working
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._previous)

    @property
    def functions(self) -> dict[str, list[str]]:
        by_file = {str(Path(getattr(m, "__file__", "") or "").resolve()): name
                   for name, m in list(sys.modules.items()) if getattr(m, "__file__", None)}
        out: dict[str, set[str]] = {m: set() for m in self._touched}
        for filename, names in self._files.items():
            module = by_file.get(str(Path(filename).resolve()))
            if module is not None:
                out.setdefault(module, set()).update(
                    n for n in map(_enclosing, names) if n is not None)
        return {m: sorted(names) for m, names in sorted(out.items())}

    def dump(self, path: Path, **extra: Any) -> None:
        """Write what was collected (and ``extra``) as JSON: a forked worker's report."""
        path.write_text(json.dumps({"functions": self.functions, **extra}))


def _enclosing(qualname: str) -> str | None:
    """The named function a code object belongs to: a lambda, comprehension or generator
    expression is hashed with the function around it; module-level code has none."""
    parts = []
    for part in qualname.split("."):
        if part.startswith("<") and part != "<locals>":
            break
        parts.append(part)
    while parts and parts[-1] == "<locals>":
        parts.pop()
    return ".".join(parts) or None
