"""One build of the book per test run, shared by the site tests and the test session's start.

``build_book(run_id)`` runs ``jupyter-book build . -W --keep-going`` into ``_build/`` unless
this run (``run_id``) has built it already: a lock file serialises callers (the xdist
controller, then the workers), and a stamp file records which run the build belongs to.

Under ``pytest -n 2`` the controller builds the book *before* the workers start
(``tests/conftest.py``), so the build has both cores to itself and its time is the time a reader
sees with the README's build command; the site tests then find the stamp and do not rebuild.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "_build"
HTML = BUILD / "html"
STAMP = BUILD / ".site_build_stamp"
FAILED = BUILD / ".site_build_failed"  # run id, then the error: a failed build is not retried
BUILD_TIMEOUT_S = 1800


class BookBuildError(RuntimeError):
    """The book build failed; the message holds the tail of its log."""


def _log_tail(text: str, n: int = 120) -> str:
    return "\n".join(text.splitlines()[-n:])


def build_book(run_id: str) -> Path:
    """Build the book once for ``run_id`` and return ``_build/html``.

    Raises:
        BookBuildError: the build exited non-zero (warnings are errors with ``-W``).
    """
    BUILD.mkdir(exist_ok=True)
    with open(BUILD / ".site_build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second caller waits here while one builds
        try:
            if STAMP.exists() and STAMP.read_text().strip() == run_id:
                return HTML
            if FAILED.exists():
                failed_id, _, message = FAILED.read_text().partition("\n")
                if failed_id == run_id:
                    raise BookBuildError(message)
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
                 "build", ".", "-W", "--keep-going"],
                cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
            )
            log = proc.stdout + proc.stderr
            (BUILD / "site_build.log").write_text(log)
            if proc.returncode != 0:
                STAMP.unlink(missing_ok=True)
                message = (f"jupyter-book build . -W --keep-going failed (exit {proc.returncode}); "
                           f"full log in {BUILD / 'site_build.log'}; last lines:\n{_log_tail(log)}")
                FAILED.write_text(f"{run_id}\n{message}")
                raise BookBuildError(message)
            (BUILD / "site_build_seconds.txt").write_text(f"{time.perf_counter() - start:.1f}\n")
            STAMP.write_text(run_id)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return HTML
