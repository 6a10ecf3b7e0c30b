"""Fingerprints of the code a recorded run executed, blind to comments, docstrings and layout.

A record must go stale when the code behind it changes, and only then: a 30-minute run should
not be thrown away because a comment was reworded. So a record stores, for every function the
run *actually executed* in the library (or beside the experiment's own module), a hash of that
function's source normalised by ``ast`` (comments, docstrings and formatting do not reach the
syntax tree), plus one hash per module touched of its module-level statements other than
functions and imports (constants, class fields such as a config dataclass's defaults).

* :class:`CodeTracer` collects the functions: a ``sys.settrace`` hook that sees each code object
  once (it returns no local tracer, so the run's speed is not affected beyond one call per
  Python frame). Code generated at run time (a dataclass's ``__init__``) has no file; its
  ``self``'s class marks that class's module as touched.
* :func:`fingerprint` hashes what was collected; :func:`changes` re-hashes the stored names from
  the files on disk and lists what differs. A changed call graph always shows: to call a new
  function, some executed function's source must change.

Not seen: behaviour that changes without any source change in those files (a data file, a
package upgrade; the record stores torch's and Python's versions for that).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["CodeTracer", "fingerprint", "changes", "module_of"]

_OWN_FILE = str(Path(__file__).resolve())  # the tracer's own exit is not the run's code
#: Parsed files, by path, with the (mtime, size) they were read at.
_TREES: dict[str, tuple[tuple[int, int], ast.Module]] = {}


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
            module = sys.modules.get(type(frame.f_locals["self"]).__module__)
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


def module_of(module: str) -> Path | None:
    """The source file of ``module`` (without importing it), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") else None


def _tree(path: Path) -> ast.Module:
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _TREES.get(str(path))
    if cached is None or cached[0] != key:
        cached = (key, ast.parse(path.read_text(), filename=str(path)))
        _TREES[str(path)] = cached
    return cached[1]


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _defs_named(node: ast.AST, name: str) -> list[ast.AST]:
    """Definitions called ``name`` directly inside ``node`` (through if/try/with blocks, not
    through other definitions)."""
    found, queue = [], list(ast.iter_child_nodes(node))
    while queue:
        child = queue.pop(0)
        if isinstance(child, _DEFS):
            if child.name == name:
                found.append(child)
            continue
        queue.extend(ast.iter_child_nodes(child))
    return found


def _strip_docstrings(node: ast.AST) -> ast.AST:
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, (*_DEFS, ast.Module)) and body and isinstance(body[0], ast.Expr) and (
            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
        ):
            n.body = body[1:] or [ast.Pass()]
    return node


def _digest(nodes: list[ast.AST]) -> str:
    text = "\n".join(ast.dump(_strip_docstrings(n)) for n in nodes)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def _function_hash(tree: ast.Module, qualname: str) -> str | None:
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    if not parts or any(p.startswith("<") for p in parts):
        return None
    node: ast.AST = tree
    for part in parts[:-1]:
        found = _defs_named(node, part)
        if not found:
            return None
        node = found[0]
    found = _defs_named(node, parts[-1])
    return _digest(found) if found else None


def _skeleton(node: ast.AST) -> list[ast.AST]:
    """Module- or class-level statements other than functions, imports and ``__all__``."""
    out = []
    for stmt in getattr(node, "body", []):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
        ):
            continue
        if isinstance(stmt, ast.ClassDef):
            shell = copy.copy(stmt)
            shell.body = _skeleton(stmt) or [ast.Pass()]
            out.append(shell)
            continue
        out.append(stmt)
    return out


def _module_hash(tree: ast.Module) -> str:
    return _digest(_skeleton(_strip_docstrings(tree)))


def fingerprint(functions: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """``{"functions": {"module:qualname": hash}, "modules": {module: hash}}`` for the names in
    ``functions`` (``{module: [qualname, ...]}``), hashed from their files now."""
    out: dict[str, dict[str, str]] = {"functions": {}, "modules": {}}
    for module, names in sorted(functions.items()):
        path = module_of(module)
        if path is None:
            continue
        tree = _tree(path)
        out["modules"][module] = _module_hash(tree)
        for name in names:
            digest = _function_hash(tree, name)
            if digest is not None:
                out["functions"][f"{module}:{name}"] = digest
    return out


def changes(stored: dict[str, dict[str, str]]) -> list[str]:
    """What changed since ``stored`` (a :func:`fingerprint`) was taken: one phrase per change."""
    out = []
    for module, digest in sorted(stored.get("modules", {}).items()):
        path = module_of(module)
        if path is None:
            out.append(f"module {module} no longer exists")
        elif _module_hash(_tree(path)) != digest:
            out.append(f"module-level code of {module} changed")
    for key, digest in sorted(stored.get("functions", {}).items()):
        module, name = key.split(":", 1)
        path = module_of(module)
        now = _function_hash(_tree(path), name) if path is not None else None
        if now is None:
            out.append(f"{key} no longer exists")
        elif now != digest:
            out.append(f"{key} changed")
    return out
