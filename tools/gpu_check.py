"""Run every chapter as a reader runs it, on this machine's device, and report per chapter.

Each chapter notebook runs top to bottom in a fresh Jupyter kernel (nbclient) at each asked
size (``LLMVIZ_SCALE``), as on Colab: ``LLMVIZ_BUILD`` unset, and ``myst_nb``, ``sphinx`` and
``jupyter_book`` made unimportable by a meta-path hook in a first, added cell (``--no-colab``
leaves them importable). A last added cell reads the kernel's peak GPU memory. Then, unless
skipped, the CUDA tests (``pytest -m cuda`` and the seeds-runner and device tests) and the GPU
benchmarks (``benchmarks/bench_seeds.py``) run.

Output: one JSON line per chapter and size in ``<out>/chapters.jsonl`` (written as each ends,
so a run cut short keeps what finished; ``--resume`` skips what is there), the test and
benchmark logs, and ``<out>/report.md``: chapter | size | seconds | peak GPU MiB | trains |
result. A chapter fails when a cell raises, when it exceeds ``--limit`` seconds, or when it
trains (``train(``, ``run_seeds``, ``run_grid`` or ``.backward(`` in its code) on a machine with
a GPU yet allocated nothing there. Executed notebooks of failed chapters are kept in
``<out>/failed/``.

Usage (from the repository root; a GPU session has little device time, so split the work)::

    python tools/gpu_check.py --sizes cpu --out gpu_report             # every chapter, default size
    python tools/gpu_check.py --sizes full --chapters 06 09 --out gpu_report --resume
    python tools/gpu_check.py --only tests bench --out gpu_report --resume
    python tools/gpu_check.py --deadline 500 ...   # start no chapter after 500 s
    python tools/gpu_check.py --jobs 6 --stop 540 ...  # six chapters at once; stop all at 540 s

With ``--jobs N`` each chapter and size runs in its own process, N at a time, sharing the GPU;
its seconds then include that sharing (the report says how many ran at once). ``--stop`` ends
every chapter still running at that many seconds and reports it as not finished.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("myst_nb", "sphinx", "jupyter_book")

#: A meta-path hook that makes the book's toolchain unimportable, as on Colab.
BLOCKER = textwrap.dedent(f"""\
    import sys as _sys
    class _ColabBlocker:
        blocked = {BLOCKED!r}
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: Colab has none)",
                                          name=name)
            return None
    for _name in [m for m in _sys.modules if m.split(".")[0] in _ColabBlocker.blocked]:
        del _sys.modules[_name]
    _sys.meta_path.insert(0, _ColabBlocker())
    """)

_MARK = "__llmviz_gpu__"
#: The last cell: what the kernel allocated on the GPU, in bytes.
PEAK_CELL = textwrap.dedent(f"""\
    import json as _json, torch as _torch
    print({_MARK!r} + _json.dumps({{
        "peak_bytes": _torch.cuda.max_memory_allocated() if _torch.cuda.is_initialized() else 0,
        "cuda_initialised": _torch.cuda.is_initialized()}}))
    """)

TRAINS = re.compile(r"\btrain\(|\brun_seeds\(|\brun_grid\(|\.backward\(|\.run\(")


def chapters(root: Path = ROOT, folder: Path | None = None) -> list[Path]:
    return sorted((folder or root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def kernel_env(size: str, root: Path = ROOT) -> dict[str, str]:
    """The reader's environment: this checkout importable, the size set, no book build."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLMVIZ_BUILD", "LLMVIZ_CLAIMS_DIR")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["LLMVIZ_SCALE"] = size
    return env


def run_notebook(nb, *, env: dict[str, str], cwd: Path, timeout: float, colab: bool = True) -> dict:
    """Execute ``nb`` (an nbformat notebook) cell by cell in a new kernel.

    Returns ``{"ok", "seconds", "error", "peak_bytes", "cuda_initialised"}``; the notebook keeps
    its outputs. ``timeout`` bounds each cell (seconds).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    cells = list(nb.cells)
    if colab:
        cells = [nbformat.v4.new_code_cell(BLOCKER)] + cells
    nb.cells = cells + [nbformat.v4.new_code_cell(PEAK_CELL)]
    client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3",
                            interrupt_on_timeout=True, resources={"metadata": {"path": str(cwd)}})
    out = {"ok": True, "error": None, "peak_bytes": None, "cuda_initialised": None}
    start = time.perf_counter()
    with client.setup_kernel(env=env, cwd=str(cwd)):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            last = index == len(nb.cells) - 1
            if not last and not out["ok"]:
                continue  # after a failure only the memory cell runs
            if last:
                out["seconds"] = round(time.perf_counter() - start, 1)
            try:
                client.execute_cell(cell, index)
            except (CellExecutionError, CellTimeoutError) as err:
                if last:
                    break
                first = str(err).strip().splitlines()
                out["ok"], out["error"] = False, f"cell {index}: " + (first[-1] if first else repr(err))
    for o in nb.cells[-1].get("outputs", []):
        for line in o.get("text", "").splitlines():
            if line.startswith(_MARK):
                out.update(json.loads(line[len(_MARK):]))
    return out


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return False


def run_chapter(path: Path, size: str, *, limit: float, colab: bool, gpu: bool, failed_dir: Path) -> dict:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    trains = bool(TRAINS.search(code))
    row = {"chapter": path.stem, "size": size, "trains": trains,
           **run_notebook(nb, env=kernel_env(size), cwd=path.parent, timeout=limit, colab=colab)}
    if row["ok"] and row["seconds"] > limit:
        row["ok"], row["error"] = False, f"took {row['seconds']} s, over the {limit:.0f} s limit"
    if row["ok"] and gpu and trains and not row["peak_bytes"]:
        row["ok"], row["error"] = False, "trains, yet allocated nothing on the GPU (built on the CPU?)"
    if not row["ok"]:
        failed_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, failed_dir / f"{path.stem}.{size}.ipynb")
    return row


def report(rows: list[dict], device: str, jobs: int = 1) -> str:
    shared = "" if jobs == 1 else f" ({jobs} chapters at a time, so each one's seconds include the sharing)"
    lines = [f"Chapters run as on Colab on {device}{shared}.", "",
             "| chapter | size | seconds | peak GPU MiB | trains | result |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        peak = "-" if r.get("peak_bytes") is None else f"{r['peak_bytes'] / 2**20:.0f}"
        result = "pass" if r["ok"] else f"FAIL: {r['error']}"
        lines.append(f"| {r['chapter']} | {r['size']} | {r.get('seconds', '-')} | {peak} | "
                     f"{r['trains'] if r['trains'] == '-' else 'yes' if r['trains'] else 'no'} | {result} |")
    passed = sum(r["ok"] for r in rows)
    lines += ["", f"{passed} of {len(rows)} passed."]
    return "\n".join(lines)


def _run_logged(cmd: list[str], log: Path, timeout: float) -> dict:
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env=kernel_env("cpu"))
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        code, text = "timeout", f"{err}"
    log.write_text(text)
    tail = text.strip().splitlines()[-1] if text.strip() else ""
    return {"cmd": " ".join(cmd), "rc": code, "seconds": round(time.perf_counter() - start, 1),
            "last_line": tail}


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc; a Jupyter kernel starts its own session)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _run_parallel(pairs: list[tuple[Path, str]], args, began: float) -> list[dict]:
    """Run each (chapter, size) in its own ``gpu_check.py`` process, ``args.jobs`` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def one(pair: tuple[Path, str]) -> dict:
        path, size = pair
        if args.deadline is not None and time.perf_counter() - began > args.deadline:
            return {}
        out = args.out / "jobs" / f"{path.stem}.{size}"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--only", "chapters", "--sizes", size,
               "--chapters", path.stem, "--limit", str(args.limit), "--out", str(out),
               "--notebooks", str(path.parent)]
        if args.no_colab:
            cmd.append("--no-colab")
        left = None if args.stop is None else max(1.0, args.stop - (time.perf_counter() - began))
        start = time.perf_counter()
        with (args.out / "jobs" / f"{path.stem}.{size}.log").open("w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                for pid in [proc.pid, *_descendants(proc.pid)]:  # the kernel (own session) too
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                proc.wait()
        rows = [json.loads(x) for x in (out / "chapters.jsonl").read_text().splitlines()] \
            if (out / "chapters.jsonl").exists() else []
        if rows:
            return rows[0]
        waited = round(time.perf_counter() - start, 1)
        return {"chapter": path.stem, "size": size, "trains": "-", "ok": False, "seconds": waited,
                "peak_bytes": None, "error": f"not finished: stopped after {waited} s at the run's end"}

    (args.out / "jobs").mkdir(parents=True, exist_ok=True)
    rows = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(one, pairs):
            if row:
                rows.append(row)
                with (args.out / "chapters.jsonl").open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{row['chapter']:34s} {row['size']:5s} {row.get('seconds', '-'):>7} s "
                      f"{'pass' if row['ok'] else 'FAIL ' + str(row['error'])}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["cpu", "full"], choices=["cpu", "full"])
    ap.add_argument("--chapters", nargs="*", default=None, help="numbers or stems (default: all)")
    ap.add_argument("--only", nargs="+", default=["chapters", "tests", "bench"],
                    choices=["chapters", "tests", "bench"])
    ap.add_argument("--limit", type=float, default=600.0, help="seconds a chapter may take")
    ap.add_argument("--deadline", type=float, default=None, help="start nothing after this many seconds")
    ap.add_argument("--no-colab", action="store_true", help="leave myst_nb & co. importable")
    ap.add_argument("--resume", action="store_true", help="skip chapter/size pairs already in the output")
    ap.add_argument("--out", type=Path, default=ROOT / "gpu_report")
    ap.add_argument("--notebooks", type=Path, default=None, help=argparse.SUPPRESS)  # tests: another folder
    ap.add_argument("--jobs", type=int, default=1, help="chapters run at once, each in its own process")
    ap.add_argument("--stop", type=float, default=None, help="end every chapter still running at this many seconds")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    late = lambda: args.deadline is not None and time.perf_counter() - began > args.deadline  # noqa: E731
    gpu = _has_gpu()
    import torch
    device = torch.cuda.get_device_name() if gpu else "the CPU (no CUDA GPU present)"
    device += f", torch {torch.__version__}, python {sys.version.split()[0]}"
    jsonl = args.out / "chapters.jsonl"
    rows = [json.loads(x) for x in jsonl.read_text().splitlines()] if args.resume and jsonl.exists() else []
    done = {(r["chapter"], r["size"]) for r in rows}
    wanted = chapters(folder=args.notebooks)
    if args.chapters:
        # in the order asked (with --jobs, put the longest first)
        wanted = [p for c in args.chapters for p in wanted if p.stem == c or p.stem[:2] == c.zfill(2)]
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    if "chapters" in args.only and args.jobs > 1:
        pairs = [(p, size) for p in wanted for size in args.sizes if (p.stem, size) not in done]
        rows += _run_parallel(pairs, args, began)
    elif "chapters" in args.only:
        for size in args.sizes:
            for path in wanted:
                if (path.stem, size) in done or late():
                    continue
                row = run_chapter(path, size, limit=args.limit, colab=not args.no_colab, gpu=gpu,
                                  failed_dir=args.out / "failed")
                rows.append(row)
                with jsonl.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{row['chapter']:34s} {size:5s} {row.get('seconds', '-'):>7} s "
                      f"{'pass' if row['ok'] else 'FAIL ' + str(row['error'])}", flush=True)
    extra = []
    if "tests" in args.only and not late():
        extra.append(_run_logged([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "0",
                                  "-m", "cuda or not site", "tests/evidence/test_strategy.py",
                                  "tests/experiments/test_devices.py", "tests/hf/test_tolerance.py"],
                                 args.out / "tests_runner.log", 600))
        extra.append(_run_logged([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "0",
                                  "-m", "cuda", "tests"], args.out / "tests_cuda.log", 900))
    if "bench" in args.only and not late():
        extra.append(_run_logged([sys.executable, "-m", "benchmarks.bench_seeds"],
                                 args.out / "bench_seeds.log", 600))
    text = report(rows, device, args.jobs)
    if extra:
        text += "\n\n| command | rc | seconds | last line |\n|---|---|---|---|\n" + "\n".join(
            f"| `{e['cmd']}` | {e['rc']} | {e['seconds']} | {e['last_line']} |" for e in extra)
    (args.out / "report.md").write_text(text + "\n")
    print(text)
    ok = all(r["ok"] for r in rows) and all(e["rc"] == 0 for e in extra)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
