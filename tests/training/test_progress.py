"""train()'s progress bar: shown to a reader, silent in the book build."""

import torch

from llmviz.training import TrainConfig, train


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
