"""The book's recorded runs: every experiment module imports cleanly, and every record in the
repository is fresh and reproduces its prefix (``python -m llmviz.evidence.records check``).

When a record fails here, the message names the command that re-creates it.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil

import llmviz.experiments
from llmviz.evidence import EXPERIMENTS_ENV, RECORDS_DIR_ENV, Experiment, experiments


def _clean_env(monkeypatch):
    monkeypatch.delenv(RECORDS_DIR_ENV, raising=False)
    monkeypatch.delenv(EXPERIMENTS_ENV, raising=False)


def test_every_experiment_module_defines_experiments_with_distinct_names(monkeypatch):
    _clean_env(monkeypatch)
    found = experiments()  # raises on two experiments of one name
    modules = [m.name for m in pkgutil.iter_modules(llmviz.experiments.__path__)]
    for name in modules:
        module = importlib.import_module(f"llmviz.experiments.{name}")
        defined = [v for v in vars(module).values() if isinstance(v, Experiment)]
        assert all(found[e.name] is e for e in defined)
    for exp in found.values():
        assert len(exp.seeds) >= 3, f"{exp.name} has {len(exp.seeds)} seeds; 3 or more"


def test_records_in_the_repository_are_fresh_and_reproducible(monkeypatch):
    """The issue's guarantee: `check` passes on a clean clone; a failure names the refresh."""
    from llmviz.evidence.records.__main__ import main

    _clean_env(monkeypatch)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check"])
    assert code == 0, (
        "stale or irreproducible records (refresh each with the command named):\n"
        + out.getvalue()
    )
