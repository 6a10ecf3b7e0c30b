"""Fingerprints of the code a recorded run executed, blind to comments, docstrings and layout.

A record must go stale when the code behind it changes, and only then: a 30-minute run should
not be thrown away because a comment was reworded. So a record stores, for every function the
run *actually executed* in the library (or beside the experiment's own module), a hash of that
function's source normalised by ``ast`` (comments, docstrings and formatting do not reach the
syntax tree), plus one hash per module touched of its module-level statements other than
functions, imports and ``Experiment(...)`` definitions (constants, class fields such as a config
dataclass's defaults). An experiment's parameters are compared size by size instead, so tuning
its live size leaves its long record fresh.

* :class:`CodeTracer` (:mod:`._tracer`) collects the functions: a ``sys.settrace`` hook that sees each code object
  once (it returns no local tracer, so the run's speed is not affected beyond one call per
  Python frame). Code generated at run time (a dataclass's ``__init__``) has no file; its
  ``self``'s class marks that class's module as touched.
* :func:`fingerprint` hashes what was collected; :func:`changes` re-hashes the stored names from
  the files on disk and lists what differs. A changed call graph always shows: to call a new
  function, some executed function's source must change.
* The source is normalised before hashing by a versioned rule (:mod:`._normalise`): version 2,
  the current one, also leaves out *refusals*: ``if ...: raise ValueError(...)``, ``assert``,
  calls of the shared ``check_...`` functions, which a completed run never acted on (why that
  is safe, and exactly what counts, is in that module). A record stores its rule's version (none: version
  1) and is always compared by that rule; ``python -m llmviz.evidence.records refingerprint``
  moves a record that is fresh under its own rule to the current one (:mod:`._migrate`).

Not seen: behaviour that changes without any source change in those files (a data file, a
package upgrade; the record stores torch's and Python's versions for that).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from ._normalise import VERSION, normalise
from ._tracer import CodeTracer

__all__ = ["CodeTracer", "fingerprint", "changes", "stored_functions", "module_of", "VERSION"]

#: Normalised files, by (path, rule version): the (mtime, size) they were read at, the tree,
#: the hashes taken.
_TREES: dict[tuple[str, int], tuple[tuple[int, int], ast.Module, dict[str, str | None]]] = {}
#: Module name -> its source file.
_PATHS: dict[str, Path | None] = {}


def module_of(module: str) -> Path | None:
    """The source file of ``module`` (found once, without importing it), or None."""
    if module not in _PATHS:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None)
        _PATHS[module] = Path(origin) if origin and origin.endswith(".py") else None
    return _PATHS[module]


def _source(path: Path | None, version: int) -> tuple[ast.Module, dict[str, str | None]] | None:
    """The file's syntax tree, normalised by rule ``version``, and a memo of the hashes taken
    from it, re-read when the file changes; None when it is gone."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _TREES.get((str(path), version))
    if cached is None or cached[0] != key:
        tree = normalise(ast.parse(path.read_text(), filename=str(path)), version)
        cached = (key, tree, {})
        _TREES[(str(path), version)] = cached
    return cached[1], cached[2]


#: Source texts given as text (a git revision's), normalised: by (text's sha256, version).
_TEXTS: dict[tuple[str, int], tuple[ast.Module, dict[str, str | None]]] = {}
#: ``module name -> its source text`` (None: it does not exist there), to hash instead of the
#: files on disk.
Source = Callable[[str], "str | None"]


def _hash(module: str, qualname: str | None, version: int = VERSION,
          source: Source | None = None) -> str | None:
    """The hash of function ``qualname`` in ``module`` (None: of the module's other code), by
    the normalisation rule ``version``, from its file (or from ``source``)."""
    if source is None:
        found = _source(module_of(module), version)
    else:
        text = source(module)
        if text is None:
            return None
        key = (hashlib.sha256(text.encode()).hexdigest(), version)
        if key not in _TEXTS:
            _TEXTS[key] = (normalise(ast.parse(text), version), {})
        found = _TEXTS[key]
    if found is None:
        return None
    tree, memo = found
    slot = qualname or ""
    if slot not in memo:
        memo[slot] = _function_hash(tree, qualname) if qualname else _digest(_skeleton(tree))
    return memo[slot]


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


#: ``ast.dump``'s options that print a tree as Python 3.11 does (3.13 omits empty fields unless asked).
_DUMP_OPTIONS: dict[str, Any] = {"show_empty": True} if sys.version_info >= (3, 13) else {}


def _dump(node: ast.AST) -> str:
    """``ast.dump(node)`` as Python 3.11 prints it, on any later Python, so that a record's hashes
    do not change with the reader's Python (they did: on 3.12 every record read as stale). 3.12
    gave every function and class a ``type_params`` field, empty unless it has type parameters,
    which 3.11 code cannot have; an empty one is dropped (from the parsed tree, which is ours).
    Early 3.12 releases also end a nested f-string format spec with an empty string constant,
    which says nothing; those are dropped too."""
    for sub in ast.walk(node):
        if getattr(sub, "type_params", None) == []:
            del sub.type_params
        if isinstance(sub, ast.JoinedStr):
            sub.values = [v for v in sub.values if not (isinstance(v, ast.Constant) and v.value == "")]
    return ast.dump(node, **_DUMP_OPTIONS)


def _digest(nodes: list[ast.AST]) -> str:
    text = "\n".join(_dump(n) for n in nodes)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def _skeleton(node: ast.AST, skip: frozenset[str] | None = None) -> list[ast.AST]:
    """Module- or class-level statements other than functions, imports, ``__all__``, docstrings
    and an experiment's definition (``x = Experiment(...)`` and the module constants its
    ``sizes=`` is built from: its parameters are compared size by size instead, so a new live
    size leaves the long record fresh)."""
    skip = _size_names(node) if skip is None else skip
    out = []
    for stmt in getattr(node, "body", []):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)):
            continue
        targets = _targets(stmt)
        if targets and (targets <= skip | {"__all__"} or _experiment_call(stmt.value)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
                stmt.value.value, str):  # a docstring
            continue
        if isinstance(stmt, ast.ClassDef):
            shell = copy.copy(stmt)
            shell.body = _skeleton(stmt, frozenset()) or [ast.Pass()]
            out.append(shell)
            continue
        out.append(stmt)
    return out


def _targets(stmt: ast.stmt) -> set[str]:
    """The names a plain ``x = ...`` / ``x: t = ...`` statement binds (empty for anything else)."""
    if isinstance(stmt, ast.Assign):
        names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        return set(names) if len(names) == len(stmt.targets) else set()
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        return {stmt.target.id}
    return set()


def _experiment_call(value: ast.AST | None) -> bool:
    func = getattr(value, "func", None) if isinstance(value, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "Experiment"


def _size_names(tree: ast.AST) -> frozenset[str]:
    """Module-level names the ``sizes=`` of an ``Experiment(...)`` call is built from, and the
    module-level names those are built from in turn."""
    values = {name: stmt.value for stmt in getattr(tree, "body", []) for name in _targets(stmt)}
    todo = [n.id for call in ast.walk(tree) if _experiment_call(call)
            for kw in call.keywords if kw.arg == "sizes"
            for n in ast.walk(kw.value) if isinstance(n, ast.Name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in values:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(values[name]) if isinstance(n, ast.Name)]
    return frozenset(seen)


def fingerprint(functions: dict[str, list[str]], version: int = VERSION,
                source: Source | None = None) -> dict[str, Any]:
    """``{"functions": {"module:qualname": hash}, "modules": {module: hash}, "version": n}`` for
    the names in ``functions`` (``{module: [qualname, ...]}``), hashed by the normalisation
    rule ``version`` (default: the current one) from their files now, or from ``source``."""
    out: dict[str, Any] = {"functions": {}, "modules": {}}
    for module, names in sorted(functions.items()):
        digest = _hash(module, None, version, source)
        if digest is None:
            continue
        out["modules"][module] = digest
        for name in names:
            digest = _hash(module, name, version, source)
            if digest is not None:
                out["functions"][f"{module}:{name}"] = digest
    out["version"] = version
    return out


def stored_functions(stored: dict[str, Any]) -> dict[str, list[str]]:
    """The ``{module: [qualname, ...]}`` a stored fingerprint was taken of."""
    out: dict[str, list[str]] = {m: [] for m in stored.get("modules", {})}
    for key in stored.get("functions", {}):
        module, name = key.split(":", 1)
        out.setdefault(module, []).append(name)
    return out


def _installed_library(module: str) -> bool:
    """Whether ``module`` is another installed library's (torch's, say), not the book's code.

    Such code is not compared: its version is in the record's meta, and a reader with another
    torch would otherwise see every record that once ran a line of it called stale. (A record
    whose experiment function was wrapped, by ``torch.no_grad()`` for one, once took the
    wrapper's folder in torch for its own and fingerprinted torch's files there.)
    """
    if module.split(".")[0] == "llmviz":
        return False
    path = module_of(module)
    return path is not None and any(part in ("site-packages", "dist-packages") for part in path.parts)


def changes(stored: dict[str, Any], source: Source | None = None) -> list[str]:
    """What changed since ``stored`` (a :func:`fingerprint`) was taken: one phrase per change,
    re-hashed by the rule ``stored`` was taken with (no ``"version"``: version 1), from the
    files now or from ``source``."""
    version = stored.get("version", 1)
    out = []
    for module, digest in sorted(stored.get("modules", {}).items()):
        if _installed_library(module):
            continue
        now = _hash(module, None, version, source)
        if now is None:
            out.append(f"module {module} no longer exists")
        elif now != digest:
            out.append(f"module-level code of {module} changed")
    for key, digest in sorted(stored.get("functions", {}).items()):
        module, name = key.split(":", 1)
        if _installed_library(module):
            continue
        now = _hash(module, name, version, source)
        if now is None:
            out.append(f"{key} no longer exists")
        elif now != digest:
            out.append(f"{key} changed")
    return out
