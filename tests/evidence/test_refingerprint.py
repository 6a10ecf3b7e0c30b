"""``records refingerprint``: a record made under fingerprint rule 1 that is fresh under rule 1
is moved to the current rule (only its ``code`` changes) and then stays fresh when a check is
added; one that is stale under its own rule is refused and left as it was; ``--at`` reads the
code at the git revision the record was made at."""

from __future__ import annotations

import json
import subprocess

import pytest

from llmviz.evidence.records import _migrate
from llmviz.evidence.records._fingerprint import VERSION, fingerprint, stored_functions
from llmviz.evidence.records._migrate import git_source, refingerprint

from .test_records import Toy

CHECK = ("    err = x @ w - y\n",
         "    if lr < 0:\n        raise ValueError(f'lr must be >= 0, got {lr}')\n"
         "    err = x @ w - y\n")


def _legacy(toy: Toy) -> dict:
    """Make the toy's long record and turn it into one written before rule versions existed."""
    record = toy.exp.produce("long", processes=1)
    data = json.loads(record.path.read_text())
    old = fingerprint(stored_functions(data["code"]), 1)
    del old["version"]
    data["code"] = old
    record.path.write_text(json.dumps(data, indent=1))
    return data


@pytest.fixture
def legacy(tmp_path, monkeypatch):
    toy = Toy(tmp_path, monkeypatch)
    toy.data = _legacy(toy)
    return toy


def test_a_fresh_version_1_record_is_moved_and_then_ignores_a_new_check(legacy):
    rec = legacy.exp.record("long")
    assert "version" not in rec.data["code"] and rec.stale is None  # checked by rule 1
    before = json.loads(rec.path.read_text())
    done = legacy.cli("refingerprint", legacy.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok {legacy.name}.long: rule 1 -> {VERSION} (now)" in done.stdout
    after = json.loads(rec.path.read_text())
    assert {k: v for k, v in after.items() if k != "code"} == {
        k: v for k, v in before.items() if k != "code"}  # nothing but the fingerprint moved
    assert after["code"]["version"] == VERSION
    assert set(after["code"]["functions"]) == set(before["code"]["functions"])
    assert set(after["code"]["modules"]) == set(before["code"]["modules"])
    legacy.edit_lib(*CHECK)
    assert legacy.exp.record("long").stale is None
    again = legacy.cli("refingerprint")
    assert again.returncode == 0 and "already fingerprinted by rule 2; unchanged" in again.stdout


def test_a_version_1_record_still_goes_stale_by_its_own_rule(legacy):
    legacy.edit_lib(*CHECK)
    assert legacy.exp.record("long").stale == f"code changed: {legacy.lib_name}:sgd_step changed"


def test_a_stale_record_is_refused_and_left_unchanged(legacy):
    legacy.edit_lib("lr * 2 * x.T", "lr * 3 * x.T")
    before = legacy.exp.path("long").read_text()
    refused = legacy.cli("refingerprint", legacy.name)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (f"REFUSED {legacy.name}.long: stale under its own rule (version 1) now: code "
            f"changed: {legacy.lib_name}:sgd_step changed; re-make it (`python -m "
            f"llmviz.evidence.records run {legacy.name} --size long`)") in refused.stdout
    assert legacy.exp.path("long").read_text() == before
    with pytest.raises(ValueError, match="stale under its own rule"):
        refingerprint(legacy.exp.record("long"))
    with pytest.raises(TypeError, match=r"record must be a Record \(exp.record\(size\)\)"):
        refingerprint("ch09_race")


def _git(root, *args):
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def test_at_a_revision_moves_a_record_made_before_checks_were_added(legacy, monkeypatch):
    # the toy's folder as a git checkout, its code committed as the record was made
    monkeypatch.setattr(_migrate, "PACKAGE_DIR", legacy.path / "pkg")
    _git(legacy.path, "init", "-q")
    _git(legacy.path, "add", f"{legacy.lib_name}.py", f"{legacy.module}.py")
    _git(legacy.path, "commit", "-q", "-m", "the code the record was made by")
    made = _git(legacy.path, "rev-parse", "HEAD")
    legacy.edit_lib(*CHECK)  # a check added since: stale by rule 1 now
    rec = legacy.exp.record("long")
    with pytest.raises(ValueError, match=r"pass --at that commit"):
        refingerprint(rec)
    assert refingerprint(rec, at=made).startswith(f"rule 1 -> {VERSION} (at {made})")
    assert legacy.exp.record("long").stale is None  # the check is not a change by rule 2
    legacy.edit_lib("lr * 2 * x.T", "lr * 3 * x.T")  # a real change since: still seen
    assert legacy.exp.record("long").stale == (
        f"code changed: {legacy.lib_name}:sgd_step changed")
    with pytest.raises(ValueError, match=r"revision 'no-such-rev' is not a commit"):
        git_source("no-such-rev")
    with pytest.raises(TypeError, match="revision must be a git revision"):
        git_source(None)


def test_git_source_reads_this_checkout_at_a_revision():
    source = git_source("HEAD")
    text = source("llmviz.evidence.records._normalise")
    assert text is not None and "VERSION = 2" in text
    with pytest.raises(ValueError, match="is outside the llmviz checkout"):
        source("json")
