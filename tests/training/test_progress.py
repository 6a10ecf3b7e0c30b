"""train()'s progress bar: shown to a reader, silent in the book build."""

import sys

import pytest
import torch

from llmviz.training import TrainConfig, train


@pytest.fixture
def cpu_only_fork(monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("fork workers are a Linux strategy")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)


def _run(progress: bool = True) -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(7, 4), torch.nn.Linear(4, 7))
    batch = lambda gen: (torch.randint(0, 7, (2, 3), generator=gen),) * 2  # noqa: E731
    train(model, batch, config=TrainConfig(steps=3, warmup=0), progress=progress)


def test_the_bar_shows_outside_the_build_and_not_inside(monkeypatch, capsys):
    monkeypatch.delenv("LLMVIZ_BUILD", raising=False)
    _run()
    assert "train" in capsys.readouterr().err  # tqdm writes "train: ..." outside a notebook
    monkeypatch.setenv("LLMVIZ_BUILD", "1")
    _run()
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("LLMVIZ_BUILD")
    _run(progress=False)
    assert capsys.readouterr().err == ""


def _seeded_run(seed: int) -> dict:
    torch.manual_seed(seed)
    _run()
    return {"done": 1.0}


def test_no_bar_from_the_seeds_runners_worker_processes(monkeypatch, capfd, cpu_only_fork):
    from llmviz.evidence import run_seeds

    monkeypatch.delenv("LLMVIZ_BUILD", raising=False)
    runs = run_seeds(_seeded_run, range(2), processes=2, strategy="fork")
    assert runs.strategy == "fork"
    assert "train" not in capfd.readouterr().err  # the workers' stderr is this process's
