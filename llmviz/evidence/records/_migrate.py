"""Moving a stored record to the current fingerprint rule (``records refingerprint``).

A record's hashes were taken by the normalisation rule of its ``code["version"]`` (none:
version 1; see :mod:`._normalise`). When the rule changes, a record that is fresh under its own
rule is re-hashed, for the same functions and modules, by the current rule; nothing else in the
file changes. A record that is stale under its own rule is refused: re-hashing it would hide
the change. ``at`` takes the code from a git revision instead of the files on disk (the
revision a record was made at, when the code has moved on since): the record must be fresh
there under its own rule, and the hashes written are that revision's, so ``check`` compares
the code now with the code the record was made by, as it always does.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from typing import Any

from ._fingerprint import VERSION, Source, fingerprint, module_of, stored_functions
from ...training.corpus_id import corpus_digests
from ._meta import PACKAGE_DIR, dumps
from ._record import Record

__all__ = ["refingerprint", "git_source", "stamp_corpus"]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(PACKAGE_DIR.parent), *args], capture_output=True,
                          text=True, timeout=60, check=False)


def git_source(revision: str) -> Source:
    """``module -> its source text at git revision`` of the llmviz checkout (None: absent)."""
    if not isinstance(revision, str) or not revision:
        raise TypeError(f"revision must be a git revision (str), got {revision!r}")
    found = _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if found.returncode:
        raise ValueError(f"revision {revision!r} is not a commit of {PACKAGE_DIR.parent}; pass a "
                         "commit hash or branch (a record's meta['commit'] names its own)")
    commit, root = found.stdout.strip(), PACKAGE_DIR.parent.resolve()

    def source(module: str) -> str | None:
        path = module_of(module)
        if path is None:
            return None
        try:
            rel = path.resolve().relative_to(root)
        except ValueError:
            raise ValueError(f"module {module} ({path}) is outside the llmviz checkout {root}; "
                             "refingerprint it without a revision") from None
        shown = _git("show", f"{commit}:{rel.as_posix()}")
        return shown.stdout if shown.returncode == 0 else None

    return source


def refingerprint(record: Record, at: str | None = None) -> str:
    """Re-hash ``record``'s stored fingerprint by the current rule and rewrite its file (only
    ``code`` changes). Returns what was done; raises ``ValueError`` when the record is stale
    under its own rule (at ``at``, a git revision, when given)."""
    if not isinstance(record, Record):
        raise TypeError(f"record must be a Record (exp.record(size)), got {type(record).__name__}")
    stored: dict[str, Any] = record.data["code"]
    version = stored.get("version", 1)
    if version == VERSION:
        return f"already fingerprinted by rule {VERSION}; unchanged"
    source = None if at is None else git_source(at)
    where = "now" if at is None else f"at {at}"
    stale = record.why_stale(source)
    if stale:
        made = record.meta.get("commit", "?")
        raise ValueError(f"stale under its own rule (version {version}) {where}: {stale}; "
                         f"re-make it (`{record.refresh_command}`), or if it was made at another "
                         f"commit ({made}) and only checks changed since, pass --at that commit")
    new = fingerprint(stored_functions(stored), VERSION, source)
    if set(new["functions"]) != set(stored["functions"]) or set(new["modules"]) != set(
            stored["modules"]):
        raise ValueError("the current rule finds other functions than the record stores; "
                         f"re-make it (`{record.refresh_command}`)")
    data = json.loads(record.path.read_text())
    data["code"] = new
    tmp = record.path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(dumps(data))
    tmp.replace(record.path)
    moved = sum(new["functions"][k] != v for k, v in stored["functions"].items())
    return (f"rule {version} -> {VERSION} ({where}): {moved} of {len(new['functions'])} function "
            "hashes changed (they hold refusals the new rule leaves out)")


def stamp_corpus(record: Record) -> str:
    """Write into ``record``'s meta the digests of the corpus text it was trained on (records made
    before meta held them), computed here: only on the Python version the record was made with,
    whose corpora are that text. Returns what was done; nothing else in the file changes."""
    if not isinstance(record, Record):
        raise TypeError(f"record must be a Record, got {type(record).__name__}")
    made, here = record.meta.get("python"), platform.python_version()
    if made != here:
        raise ValueError(f"{record.path.name} was made on Python {made}, this is Python {here}: its "
                         f"corpus text can be read only on Python {made}; run stamp-corpus there")
    digests = corpus_digests()
    if record.meta.get("corpus") == digests:
        return "already stamped"
    if record.meta.get("corpus"):
        raise ValueError(f"{record.path.name} names other corpus digests ({record.meta['corpus']}) than "
                         f"this Python {here}'s ({digests}); it is left as it is")
    data = json.loads(record.path.read_text())
    data["meta"]["corpus"] = digests
    tmp = record.path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(dumps(data))
    tmp.replace(record.path)
    return f"stamped with Python {here}'s corpus digests"
