"""How the seeds run, by device: fork on a CPU-only Linux machine, serial once a GPU is present
(mocked here: CI has none), spawn on request with an up-front check that fn can be sent."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import types

import pytest
import torch

from llmviz.evidence import run_grid, run_seeds
from llmviz.evidence.seeds import PRELOAD
from llmviz.evidence.strategy import STRATEGIES, check_sendable, choose_strategy

LINUX = sys.platform.startswith("linux")


def _square(seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {"v": float(seed) ** 2, "r": torch.rand(1, generator=gen).item()}


def _cell(variant: str, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed * 7 + len(variant))
    return {"v": len(variant) * 10.0 + seed, "r": torch.rand(1, generator=gen).item()}


@pytest.mark.skipif(not LINUX, reason="fork is chosen on Linux only")
def test_auto_forks_on_a_cpu_only_linux_machine(cpu_only):
    assert choose_strategy(3) == "fork"
    assert run_seeds(_square, range(3), processes=2).strategy == "fork"


@pytest.mark.parametrize("present", ["cuda_available", "cuda_initialised", "mps"])
def test_auto_runs_serially_once_an_accelerator_is_present(cpu_only, monkeypatch, present):
    target = {"cuda_available": (torch.cuda, "is_available"),
              "cuda_initialised": (torch.cuda, "is_initialized"),
              "mps": (torch.backends.mps, "is_available")}[present]
    monkeypatch.setattr(*target, lambda: True)
    assert choose_strategy(3) == "serial"
    runs = run_seeds(_square, range(3), processes=2)
    assert runs.strategy == "serial" and not runs.parallel
    assert runs.values("v") == [0.0, 1.0, 4.0]
    assert run_grid(_cell, ["a", "bb"], range(3), processes=2).strategy == "serial"


def test_explicit_fork_is_refused_once_cuda_is_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(ValueError, match=r"strategy='fork' after CUDA is initialised.*'serial'"):
        run_seeds(_square, range(3), processes=2, strategy="fork")


def test_one_seed_or_one_process_is_serial_whatever_is_asked():
    assert choose_strategy(1, None, "spawn") == "serial"
    assert choose_strategy(4, 1, "fork") == "serial"
    assert choose_strategy(4, 2, "serial") == "serial"
    assert set(STRATEGIES) == {"auto", "fork", "spawn", "serial"}
    with pytest.raises(ValueError, match=r"strategy='threads' is not one of .*leave it 'auto'"):
        run_seeds(_square, range(3), strategy="threads")


def test_every_strategy_gives_the_same_numbers(cpu_only):
    serial = run_grid(_cell, ["a", "bb"], [4, 0, 2], strategy="serial")
    spawn = run_grid(_cell, ["a", "bb"], [4, 0, 2], processes=2, strategy="spawn")  # one start
    assert spawn.strategy == "spawn" and spawn.seeds == [4, 0, 2]
    assert spawn.values("bb", "v") == [24.0, 20.0, 22.0]
    assert dict(spawn.items()) == dict(serial.items())
    if LINUX:
        forked = run_seeds(_square, [4, 0, 2], processes=2)
        assert dict(forked.items()) == dict(run_seeds(_square, [4, 0, 2], processes=1).items())


def test_spawn_refuses_a_lambda_or_closure_naming_it_and_the_fix():
    offset = 1.0
    with pytest.raises(TypeError, match=r"run_seeds\(strategy='spawn'\).*test_spawn_refuses"
                       r".*<lambda>' cannot be sent.*lambda as a def at the top level of a .py "
                       r"module.*'serial'"):
        run_seeds(lambda s: {"v": s + offset}, range(3), processes=2, strategy="spawn")

    def local_cell(variant, seed):
        return {"v": offset}

    with pytest.raises(TypeError, match=r"run_grid\(strategy='spawn'\).*local_cell"):
        run_grid(local_cell, ["a"], range(3), processes=2, strategy="spawn")


def test_spawn_refuses_a_notebook_function(monkeypatch):
    notebook_main = types.ModuleType("__main__")  # a kernel's __main__ has no __file__
    monkeypatch.setitem(sys.modules, "__main__", notebook_main)

    def run(seed):
        return {"v": seed}

    run.__module__, run.__qualname__ = "__main__", "run"
    with pytest.raises(TypeError, match=r"'run' cannot be sent: it is defined in a notebook cell"):
        check_sendable(run)
    notebook_main.run = run  # found there by the parent's pickle, never by a spawned child
    with pytest.raises(TypeError, match=r"it refers to something defined in a notebook cell"):
        check_sendable(functools.partial(run))


def test_spawn_refuses_a_function_holding_something_unpicklable():
    fn = functools.partial(_cell, threading.Lock())
    with pytest.raises(TypeError, match=r"cannot be sent: pickling it fails \(TypeError"):
        check_sendable(fn)
    check_sendable(_square)  # a module-level function passes



_FRESH = """
import sys
from llmviz.evidence import run_seeds
assert "torch._dynamo" not in sys.modules  # a fresh process: nothing imported it yet
def seen(seed):
    return {"dynamo": float("torch._dynamo" in sys.modules)}
runs = run_seeds(seen, range(2), processes=2, strategy="fork")
print(runs.strategy, [runs[s]["dynamo"] for s in runs.seeds])
"""


@pytest.mark.skipif(not LINUX, reason="fork is chosen on Linux only")
def test_fork_workers_inherit_the_lazily_imported_modules(cpu_only):
    # torch's optimisers import torch._dynamo on first use; forked workers that had to import it
    # themselves would pay about a second on every pool. The parent imports it before forking.
    assert "torch._dynamo" in PRELOAD
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["fork", "[1.0,", "1.0]"]


@pytest.mark.parametrize("cores, jobs, asked, expected", [
    (2, 1, None, 1), (2, 2, None, 2), (2, 3, None, 3),  # three seeds: one process each
    (2, 4, None, 2), (2, 5, None, 2), (2, 9, None, 2),  # beyond two per core: one per core
    (16, 18, None, 18), (16, 32, None, 16), (16, 40, None, 16),
    (2, 3, 2, 2), (2, 3, 8, 3),  # asked for: at most one per job
])
def test_pool_size_fills_the_last_round(monkeypatch, cores, jobs, asked, expected):
    from llmviz.evidence import strategy as strategy_mod

    monkeypatch.setattr(strategy_mod, "_cores", lambda: cores)
    assert strategy_mod.pool_size(jobs, asked) == expected


def test_three_seeds_on_two_cores_run_in_three_processes_with_the_same_numbers(monkeypatch):
    """The pool's size does not reach the numbers: each seed's run is the same in any worker."""
    import time

    from llmviz.evidence import strategy as strategy_mod

    if not sys.platform.startswith("linux"):
        pytest.skip("fork workers are Linux-only here")
    monkeypatch.setattr(strategy_mod, "_cores", lambda: 2)

    def fn(s):
        time.sleep(0.5)  # long enough that no worker is free to take a second seed
        return {"pid": os.getpid(), "x": float(torch.randn(3, generator=torch.Generator().manual_seed(s)).sum())}

    pids = run_seeds(fn, range(3), strategy="fork")
    assert len(set(pids.values("pid"))) == 3
    serial = run_seeds(lambda s: {"x": float(torch.randn(3, generator=torch.Generator().manual_seed(s)).sum())},
                       range(3), strategy="serial")
    assert pids.values("x") == serial.values("x")


@pytest.mark.parametrize("jobs, asked, match", [
    (0, None, "n_jobs"), (3, 0, "processes"), (2.5, None, "n_jobs"), (3, "2", "processes"),
])
def test_pool_size_names_bad_input(jobs, asked, match):
    from llmviz.evidence.strategy import pool_size

    with pytest.raises((ValueError, TypeError), match=match):
        pool_size(jobs, asked)
