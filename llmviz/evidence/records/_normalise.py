"""How a source file is normalised before its functions are hashed, by fingerprint version.

A record stores the version of the rule its hashes were taken with (``code["version"]``; a
record without one was made with version 1), and :func:`~._fingerprint.changes` re-hashes with
that same rule, so a record made under an older rule keeps being checked correctly until
``python -m llmviz.evidence.records refingerprint`` moves it to the current one.

* **Version 1**: docstrings are removed; comments and layout never reach the syntax tree.
* **Version 2** (current): as version 1, and *refusals* are removed as well, so adding a check
  that refuses bad input to a function leaves the records that executed it fresh.

A refusal is one of these statements:

1. ``raise ValueError(...)`` or ``raise TypeError(...)`` (with or without ``from ...``): the
   two errors the library refuses input with. Any other ``raise`` (an ``AttributeError`` a
   ``hasattr`` reads, a ``StopIteration``, a re-raise) stays hashed.
2. ``assert ...``.
3. A call whose result is dropped, to a ``check_...`` function the module imports from a
   ``_checks`` module (``from .._checks import check_positive``, then
   ``check_positive(lr, "lr")``). Those modules hold the package's shared checks, which only
   inspect their arguments and raise: they assign no attribute or item and draw no random
   number (``tests/evidence/test_fingerprint_refusals.py`` reads every one of them to hold
   them to that). If the run executed one, its own body is hashed as usual. A check whose
   result is kept (``lr = check_positive(lr, "lr")``), a method (``self._check_x()``) and a
   ``check_...`` function defined anywhere else (``check_moe``, which also fills in defaults)
   stay hashed.
4. An ``if`` whose body is refusals only and whose ``else``/``elif`` branches are absent or
   refusals only (``if lr <= 0: raise ValueError(...)``, ``if eps is not None:
   check_eps(eps)`` with ``check_eps`` imported from a ``_checks`` module, a chain of
   ``elif ...: raise``).

In every statement above, the condition, the assertion and the call's arguments may not bind a
name (``:=``), ``yield`` or ``await``; one that does stays hashed. They are otherwise assumed to
read their values without changing them, as checks do. Refusals are not removed from the body
of a ``try`` that has ``except`` clauses, nor from a ``with`` block's body: there an exception
may be caught or swallowed and choose the run's path. A statement list left empty becomes
``pass``.

Why removing them is safe: a refusal can change a run only by raising. A recorded run completed
(a run that raised wrote no record), so it raised at none of the refusals it met, and removing
them from the hash hides no change to what it computed. The one way a refusal added later can
matter is by firing on the recorded inputs, and then the record can no longer be re-made. That
is not silent: ``records check`` re-runs a prefix of the record's first (variant, seed) and a
refusal raised there fails the check (``ERROR``); one that fires only in another variant or at
a later step shows when the record is next re-made, as the refusal's own message. Nothing else
is removed: a changed condition that still only refuses, or a changed message, does not change
the numbers a completed run produced.
"""

from __future__ import annotations

import ast

__all__ = ["VERSION", "VERSIONS", "normalise", "is_refusal", "checks_imported"]

#: The rule new fingerprints are taken with.
VERSION = 2
#: The rules :func:`normalise` knows.
VERSIONS = (1, 2)

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_REFUSED = frozenset({"ValueError", "TypeError"})
_BINDS = (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)


def normalise(tree: ast.Module, version: int) -> ast.Module:
    """Normalise ``tree`` in place by the rule of ``version`` and return it."""
    if version not in VERSIONS:
        raise ValueError(f"fingerprint version {version!r} is unknown (known: {VERSIONS}); the "
                         "record was made by a newer llmviz: update llmviz")
    _strip_docstrings(tree)
    if version >= 2:
        _strip_refusals(tree, checks_imported(tree))
    return tree


def checks_imported(tree: ast.AST) -> frozenset[str]:
    """The ``check_...`` names ``tree`` imports from a ``_checks`` module (as it binds them)."""
    return frozenset(
        alias.asname or alias.name for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "_checks"
        for alias in node.names if alias.name.startswith("check_"))


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """Remove every docstring from ``tree``, in place."""
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(n, (*_DEFS, ast.Module)) and body and isinstance(body[0], ast.Expr) and (
            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
        ):
            n.body = body[1:] or [ast.Pass()]
    return tree


def _binds(*nodes: ast.AST | None) -> bool:
    return any(isinstance(n, _BINDS) for node in nodes if node is not None
               for n in ast.walk(node))


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def is_refusal(stmt: ast.stmt, checks: frozenset[str] = frozenset()) -> bool:
    """Whether ``stmt`` can only refuse input (see the module docstring); ``checks``: the
    names :func:`checks_imported` finds in its module."""
    if isinstance(stmt, ast.Raise):
        return stmt.exc is not None and _name(stmt.exc) in _REFUSED and not _binds(
            stmt.exc, stmt.cause)
    if isinstance(stmt, ast.Assert):
        return not _binds(stmt.test, stmt.msg)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return isinstance(func, ast.Name) and func.id in checks and not _binds(stmt.value)
    if isinstance(stmt, ast.If):
        return (not _binds(stmt.test) and all(is_refusal(s, checks) for s in stmt.body)
                and all(is_refusal(s, checks) for s in stmt.orelse))
    return False


def _strip_refusals(node: ast.AST, checks: frozenset[str]) -> None:
    """Remove every refusal from the statement lists under ``node``, in place."""
    for field, value in ast.iter_fields(node):
        if not isinstance(value, list):
            continue
        if field == "body" and (isinstance(node, (ast.With, ast.AsyncWith)) or (
                isinstance(node, _TRY) and node.handlers)):
            continue  # an exception raised here may be caught: the raise may choose a path
        if value and all(isinstance(v, ast.stmt) for v in value):
            value = [s for s in value if not is_refusal(s, checks)]
            if not value and field == "body":
                value = [ast.Pass()]
            setattr(node, field, value)
        for child in value:
            if isinstance(child, ast.AST):
                _strip_refusals(child, checks)


_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
