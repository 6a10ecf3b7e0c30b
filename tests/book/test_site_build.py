"""When the test session builds the book before its workers start (``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import _site_tests_selected

TESTS = Path(__file__).resolve().parents[1]


def _config(args, markexpr="", keyword=""):
    return SimpleNamespace(args=list(args), option=SimpleNamespace(markexpr=markexpr, keyword=keyword),
                           invocation_params=SimpleNamespace(dir=TESTS.parent))


@pytest.mark.parametrize("args, markexpr, keyword, expected", [
    (["tests"], "", "", True),  # the README's command (testpaths)
    (["tests/book/test_site.py"], "", "", True),
    (["tests/book/test_site.py::test_page"], "", "", True),
    (["tests/book"], "site", "", True),
    (["tests"], "not site", "", False),
    (["tests"], "cuda", "", False),
    (["tests"], "", "weights", False),
    (["tests/attention", "tests/test_checks.py"], "", "", False),
    (["tests/book/test_notebooks.py"], "", "", False),
])
def test_site_tests_selected(args, markexpr, keyword, expected, monkeypatch) -> None:
    monkeypatch.delenv("LLMVIZ_SITE_PREBUILT", raising=False)
    assert _site_tests_selected(_config(args, markexpr, keyword)) is expected


def test_prebuilt_site_is_not_rebuilt(monkeypatch) -> None:
    monkeypatch.setenv("LLMVIZ_SITE_PREBUILT", "1")
    assert _site_tests_selected(_config(["tests"])) is False


def test_controller_builds_before_workers_with_the_run_id(monkeypatch, capsys) -> None:
    import tests.book.site_build as site_build
    from tests.conftest import pytest_configure

    calls = []
    monkeypatch.delenv("LLMVIZ_SITE_PREBUILT", raising=False)
    monkeypatch.setattr(site_build, "build_book", lambda run_id: calls.append(run_id))
    config = _config(["tests"])
    config.option.numprocesses, config.option.collectonly, config.option.testrunuid = 2, False, None
    pytest_configure(config)
    assert len(calls) == 1 and calls[0] == config.option.testrunuid  # the id xdist passes on
    config.workerinput = {"testrunuid": calls[0]}  # a worker never builds here
    pytest_configure(config)
    assert len(calls) == 1
    assert "book built" in capsys.readouterr().out


def test_failed_build_is_reported_not_retried(tmp_path, monkeypatch) -> None:
    import tests.book.site_build as site_build

    monkeypatch.setattr(site_build, "BUILD", tmp_path)
    monkeypatch.setattr(site_build, "STAMP", tmp_path / "stamp")
    monkeypatch.setattr(site_build, "FAILED", tmp_path / "failed")
    (tmp_path / "failed").write_text("run-1\nbuild exploded at chapter 3")
    with pytest.raises(site_build.BookBuildError, match="chapter 3"):
        site_build.build_book("run-1")
