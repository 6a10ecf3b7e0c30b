"""Shared fixtures: seeded RNG, and the devices each parity test runs on.

Tests parametrised with ``device`` run on the CPU always, and on CUDA when a GPU is present
(those cases carry the ``cuda`` marker, so ``pytest -m cuda`` runs just them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_CUDA = torch.cuda.is_available()

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[pytest.mark.cuda, pytest.mark.skipif(not _CUDA, reason="no CUDA GPU present")],
    ),
]


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """Each test using this fixture runs once per available device."""
    return torch.device(request.param)


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator with a fixed seed: tests draw their random inputs from it."""
    return torch.Generator().manual_seed(1234)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


# ----------------------------------------------------------------------------- the book first
def _site_tests_selected(config) -> bool:
    """Whether this run will run the browser tests (decided from the command line, before
    collection): not with ``LLMVIZ_SITE_PREBUILT``, ``-m`` excluding ``site``, ``-k``, or paths
    that leave ``tests/book/test_site.py`` out."""
    if os.environ.get("LLMVIZ_SITE_PREBUILT") or config.option.keyword:
        return False
    if config.option.markexpr:
        from _pytest.mark.expression import Expression

        def has(name, **kwargs):  # the site tests carry exactly the marks "site" and xdist_group
            return name in ("site", "xdist_group")

        if not Expression.compile(config.option.markexpr).evaluate(has):
            return False
    site = (Path(__file__).parent / "book" / "test_site.py").resolve()
    for arg in config.args:
        target = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
        if target == site or target in site.parents:
            return True
    return False


def pytest_configure(config) -> None:
    """Under ``pytest -n N`` (the README's test command), build the book on the controller before
    any worker starts: the build then has every core to itself, as with the README's build
    command, and the chapter times it records are the ones a reader gets. The site tests find
    the build done (same run id) and only open it."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if config.option.collectonly or not _site_tests_selected(config):
        return
    import uuid

    from tests.book.site_build import BUILD, BookBuildError, build_book

    if config.option.testrunuid is None:
        config.option.testrunuid = uuid.uuid4().hex  # xdist hands this id to the workers
    print(f"building the book before the tests start (log in {BUILD / 'site_build.log'}) ...",
          flush=True)
    start = time.perf_counter()
    try:
        build_book(config.option.testrunuid)
    except BookBuildError as err:  # recorded: the site tests fail with it, without a rebuild
        print(f"the book build failed: the site tests will report it\n{err}", flush=True)
    else:
        print(f"book built in {time.perf_counter() - start:.0f} s", flush=True)
