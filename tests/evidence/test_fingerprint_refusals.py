"""Fingerprint rule 2: a check that only refuses input leaves a record fresh; any other edit,
including one that looks like a check but could change a completed run, makes it stale. A
record keeps being compared by the rule it was made with."""

from __future__ import annotations

import ast
import json
import os
import textwrap
import uuid

import pytest

from llmviz.evidence.records._fingerprint import VERSION, changes, fingerprint
from llmviz.evidence.records._normalise import checks_imported

from .test_records import ROOT, Toy

BASE = '''
from llmviz._checks import check_positive, check_x
from ._checks import check_eps


def f(x, eps=1e-5):
    """Doubled, plus eps."""
    y = x * 2
    return y + eps
'''

#: Edits that only refuse: each, inserted before ``y = x * 2``, leaves the hash unchanged.
REFUSALS = {
    "if-raise": 'if eps <= 0:\n    raise ValueError(f"eps must be positive, got {eps}")',
    "if-raise from": "if eps <= 0:\n    raise TypeError('eps') from None",
    "nested ifs": ("if x is not None:\n    if x < 0:\n        raise ValueError('x')\n"
                   "    check_x(x)\n    raise TypeError('never')"),
    "elif chain": ("if eps < 0:\n    raise ValueError('a')\nelif eps == 0:\n"
                   "    raise TypeError('b')\nelse:\n    assert eps > 0"),
    "assert": "assert eps > 0, f'eps={eps}'",
    "check call": "check_positive(eps, 'eps')",
    "optional check": "if eps is not None:\n    check_eps(eps)",
}

#: Edits that must make the record stale (inserted the same way).
NOT_REFUSALS = {
    "a non-raise body": "if eps <= 0:\n    eps = 1e-5",
    "raise, else a statement": "if eps <= 0:\n    raise ValueError('eps')\nelse:\n    eps = eps * 1",
    "another error (control flow)": "if eps <= 0:\n    raise AttributeError('eps')",
    "a re-raise": "if eps <= 0:\n    raise",
    "a check whose result is kept": "eps = check_positive(eps, 'eps')",
    "a call not named check": "validate(eps)",
    "a check_ function defined elsewhere (it may fill in defaults)": "check_moe(eps)",
    "a check method": "self._check_shape(x, ndim=3)",
    "a condition binding a name": "if (n := eps) <= 0:\n    raise ValueError(n)",
    "inside try/except": "try:\n    if eps <= 0:\n        raise ValueError('eps')\nexcept ValueError:\n    eps = 1.0",
    "inside a with block": "with ctx():\n    if eps <= 0:\n        raise ValueError('eps')",
}


class Module:
    """A module ``fp_<tag>`` written under ``tmp_path``, importable, edited in place."""

    def __init__(self, tmp_path, monkeypatch) -> None:
        self.name = f"fp_{uuid.uuid4().hex[:8]}"
        self.path = tmp_path / f"{self.name}.py"
        self.tick = 10**18
        self.write(BASE)
        monkeypatch.syspath_prepend(str(tmp_path))

    def write(self, text: str) -> None:
        self.path.write_text(text)
        self.tick += 10**9  # a new mtime each write: the hash cache re-reads the file
        os.utime(self.path, ns=(self.tick, self.tick))

    def insert(self, lines: str) -> None:
        self.write(BASE.replace("    y = x * 2", textwrap.indent(lines, "    ") + "\n    y = x * 2"))

    def stored(self, version: int = VERSION) -> dict:
        return fingerprint({self.name: ["f"]}, version)


@pytest.fixture
def module(tmp_path, monkeypatch):
    return Module(tmp_path, monkeypatch)


def test_the_current_rule_is_version_2_and_recorded(module):
    stored = module.stored()
    assert VERSION == 2 and stored["version"] == 2
    assert set(stored["functions"]) == {f"{module.name}:f"} and module.name in stored["modules"]
    assert changes(stored) == []


@pytest.mark.parametrize("edit", sorted(REFUSALS))
def test_adding_a_refusal_leaves_the_fingerprint_unchanged(module, edit):
    stored = module.stored()
    module.insert(REFUSALS[edit])
    assert module.stored() == stored
    assert changes(stored) == []
    # a version-1 fingerprint of the same code still sees the edit: its rule is kept
    module.write(BASE)
    old = module.stored(1)
    assert "version" in old and old["version"] == 1
    module.insert(REFUSALS[edit])
    assert changes(old) == [f"{module.name}:f changed"]
    legacy = {k: v for k, v in old.items() if k != "version"}  # a record made before versions
    assert changes(legacy) == [f"{module.name}:f changed"]


def test_changing_a_refusal_message_or_condition_leaves_it_unchanged(module):
    module.insert(REFUSALS["if-raise"])
    stored = module.stored()
    module.insert(REFUSALS["if-raise"].replace("<= 0", "< 1e-12").replace("must be", "has to be"))
    assert changes(stored) == []


@pytest.mark.parametrize("edit", sorted(NOT_REFUSALS))
def test_an_edit_that_could_change_a_completed_run_makes_it_stale(module, edit):
    stored = module.stored()
    module.insert(NOT_REFUSALS[edit])
    assert changes(stored) == [f"{module.name}:f changed"], edit


def test_changing_a_real_statement_makes_it_stale(module):
    module.insert(REFUSALS["if-raise"])
    stored = module.stored()
    module.write(module.path.read_text().replace("y = x * 2", "y = x * 3"))
    assert changes(stored) == [f"{module.name}:f changed"]
    # a module-level refusal is not module code either; a constant is
    module.write(BASE + "\nif 1 > 2:\n    raise ValueError('never')\n")
    fresh = module.stored()
    module.write(BASE)
    assert changes(fresh) == []
    module.write(BASE + "\nSCALE = 2\n")
    assert changes(fresh) == [f"module-level code of {module.name} changed"]


def test_an_unknown_rule_is_refused_naming_the_fix(module):
    stored = {**module.stored(), "version": 9}
    with pytest.raises(ValueError, match=r"fingerprint version 9 is unknown .*update llmviz"):
        changes(stored)


def test_a_record_stays_fresh_when_a_check_is_added_and_check_fails_when_it_fires(
        tmp_path, monkeypatch):
    toy = Toy(tmp_path, monkeypatch)
    record = toy.exp.produce("long", processes=2)
    assert json.loads(record.path.read_text())["code"]["version"] == VERSION
    toy.edit_lib("    err = x @ w - y\n",
                 "    if lr < 0:\n        raise ValueError(f'lr must be >= 0, got {lr}')\n"
                 "    err = x @ w - y\n")
    assert toy.exp.record("long").stale is None
    ok = toy.cli("check", toy.name)  # a new process: it imports the edited library
    assert ok.returncode == 0 and f"ok {toy.name}.long" in ok.stdout, ok.stdout + ok.stderr
    # a refusal that fires on the recorded inputs (the slow variant's lr is 0.01): not silent
    toy.edit_lib("if lr < 0:", "if 0 < lr < 0.02:")
    assert toy.exp.record("long").stale is None
    fired = toy.cli("check", toy.name)
    assert fired.returncode == 1, fired.stdout + fired.stderr
    assert (f"ERROR {toy.name}.long: RuntimeError: fn('slow', 0) failed: ValueError: lr must be "
            ">= 0, got 0.01") in fired.stdout


#: What a shared check may not do: store into an attribute or item, or call one of these.
_MUTATING = ("setattr", "__setattr__", "seed", "rand", "append", "extend", "insert", "update",
             "pop", "remove", "clear", "add_", "fill_", "copy_", "zero_", "print", "write")


def test_the_shared_checks_only_inspect_and_raise():
    """Rule 2 drops a dropped-result call to a check imported from a ``_checks`` module: every
    function in those modules must then have no effect but raising (read statically)."""
    modules = sorted((ROOT / "llmviz").rglob("_checks.py"))
    assert len(modules) >= 3
    names, offences = set(), []
    for path in modules:
        tree = ast.parse(path.read_text())
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            names.add(fn.name)
            for node in ast.walk(fn):
                targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                           if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                    offences.append(f"{path.name}:{fn.name} stores into {ast.unparse(node)}")
                if isinstance(node, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom)):
                    offences.append(f"{path.name}:{fn.name} uses {type(node).__name__}")
                if isinstance(node, ast.Call):
                    called = ast.unparse(node.func).split(".")[-1]
                    if any(bad in called for bad in _MUTATING):
                        offences.append(f"{path.name}:{fn.name} calls {called}")
    assert not offences, offences
    assert {"check_flag", "check_positive", "check_mask", "check_indices"} <= names
    # and what the rule reads: the names a module imports from a _checks module
    tree = ast.parse("from .._checks import check_a, check_b as cb, other\n"
                     "from .checks import check_c\nfrom llmviz.attention._checks import check_d\n")
    assert checks_imported(tree) == {"check_a", "cb", "check_d"}
