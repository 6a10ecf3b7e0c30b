"""Every chapter experiment builds its models on ``llmviz.device()``.

On a GPU a model built on the CPU trains there with the GPU idle (chapter 6 did, for 136 s at
full size). CI has no GPU, so ``llmviz.device()`` is replaced by the ``meta`` device, a device
no code reaches by accident: every binding of it in every loaded llmviz module is patched, so
``lv.device()`` and ``from llmviz.runtime import device`` both answer ``meta``. Each experiment
then runs until its first forward pass, where a global forward hook records the device of every
parameter and input tensor of the module called and stops the run. A parameter or input that is
not on ``meta`` was put somewhere other than ``llmviz.device()``.

The experiments are found, not listed: every module-level object with ``fn``, ``variants`` and
``sizes`` (an ``llmviz.evidence.Experiment``) in every module under ``llmviz/experiments/``; a
new chapter module is checked as soon as it exists. Each runs its first variant, seed 0, at the
``cpu`` size with its reproducibility prefix (the hook stops it at its first forward anyway).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types
from typing import Any

import pytest
import torch

import llmviz
from llmviz import runtime

FAKE = torch.device("meta")


class _Reached(Exception):
    """Raised by the hook at the first forward pass: what was to be seen has been seen."""


def _experiments() -> list[tuple[str, Any]]:
    try:
        package = importlib.import_module("llmviz.experiments")
    except ModuleNotFoundError:
        return []
    found = []
    for info in pkgutil.walk_packages(package.__path__, "llmviz.experiments."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if all(hasattr(obj, a) for a in ("fn", "variants", "sizes")) and callable(obj.fn):
                found.append((f"{info.name}.{name}", obj))
    return found


def _patch_device(monkeypatch, fake: torch.device) -> None:
    """Make every binding of ``llmviz.runtime.device`` in loaded llmviz modules return ``fake``."""
    original = runtime.device
    for name, module in list(sys.modules.items()):
        if (name == "llmviz" or name.startswith("llmviz.")) and isinstance(module, types.ModuleType):
            for attr, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attr, lambda: fake)


def first_forward_devices(call) -> dict[str, torch.device]:
    """Run ``call()`` up to its first module forward; the devices of that module's parameters,
    buffers and tensor inputs, by name. Raises ``AssertionError`` if no forward is reached."""
    seen: dict[str, torch.device] = {}

    def hook(module: torch.nn.Module, args: tuple) -> None:
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            seen[f"{type(module).__name__}.{name}"] = t.device
        for k, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                seen[f"{type(module).__name__} input {k}"] = a.device
        raise _Reached

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        call()
    except _Reached:
        return seen
    except Exception as err:  # noqa: BLE001 - reported with the run's own error
        raise AssertionError(
            f"no forward pass reached with llmviz.device() = {FAKE}; the run failed first with "
            f"{type(err).__name__}: {err}"
        ) from err
    finally:
        handle.remove()
    raise AssertionError("the run finished without calling any torch.nn.Module")


def _misplaced(devices: dict[str, torch.device]) -> dict[str, str]:
    return {k: str(d) for k, d in devices.items() if d.type != FAKE.type}


# ------------------------------------------------------------- the checker checks what it says
def _good(variant: str, seed: int, *, prefix: int | None = None, d: int = 4) -> dict:
    model = torch.nn.Linear(d, d).to(llmviz.device())
    x = torch.randn(2, d, device=runtime.device())
    return {"loss": model(x).sum().item()}


def _model_on_the_cpu(variant: str, seed: int, *, prefix: int | None = None, d: int = 4) -> dict:
    model = torch.nn.Linear(d, d)  # forgot .to(lv.device())
    return {"loss": model(torch.randn(2, d, device=llmviz.device())).sum().item()}


def _data_on_the_cpu(variant: str, seed: int, *, prefix: int | None = None, d: int = 4) -> dict:
    model = torch.nn.Linear(d, d).to(llmviz.device())
    return {"loss": model(torch.randn(2, d)).sum().item()}


def test_the_checker_tells_a_placed_model_from_a_misplaced_one(monkeypatch):
    _patch_device(monkeypatch, FAKE)
    assert llmviz.device() == FAKE and runtime.device() == FAKE
    assert not _misplaced(first_forward_devices(lambda: _good("a", 0)))
    assert _misplaced(first_forward_devices(lambda: _model_on_the_cpu("a", 0))) == {
        "Linear.weight": "cpu", "Linear.bias": "cpu"}
    assert _misplaced(first_forward_devices(lambda: _data_on_the_cpu("a", 0))) == {
        "Linear input 0": "cpu"}
    with pytest.raises(AssertionError, match="without calling any torch.nn.Module"):
        first_forward_devices(lambda: torch.ones(1))


def test_train_moves_its_batches_to_the_models_device(monkeypatch):
    """The library's loop, as the chapters call it: a model on llmviz.device() gets its data
    there too (data made on the CPU is moved by train)."""
    from llmviz.training import TrainConfig, train

    _patch_device(monkeypatch, FAKE)
    model = torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.Linear(8, 11)).to(llmviz.device())
    batches = lambda gen: (torch.randint(0, 11, (2, 5)), torch.randint(0, 11, (2, 5)))  # noqa: E731
    devices = first_forward_devices(
        lambda: train(model, batches, config=TrainConfig(steps=1, warmup=0), progress=False))
    assert devices and not _misplaced(devices), _misplaced(devices)


def _check(exp) -> dict[str, str]:
    """Run ``exp``'s first variant, seed 0, at the cpu size up to its first forward pass; what
    lives off llmviz.device() (patched to meta by the caller)."""
    params = dict(exp.sizes["cpu"])
    variant = list(exp.variants)[0]
    prefix = exp.prefix_for("cpu") if hasattr(exp, "prefix_for") else 1  # the run stops earlier
    return _misplaced(first_forward_devices(lambda: exp.fn(variant, 0, prefix=prefix, **params)))


def test_experiments_are_found_in_any_new_chapter_module(tmp_path, monkeypatch):
    (tmp_path / "ch99.py").write_text(
        "import types, torch, llmviz\n"
        "def fn(variant, seed, *, prefix=None, d):\n"
        "    m = torch.nn.Linear(d, d).to(llmviz.device()) if variant == 'on' else torch.nn.Linear(d, d)\n"
        "    return {'loss': m(torch.ones(1, d, device=llmviz.device())).sum().item()}\n"
        "good = types.SimpleNamespace(name='good', fn=fn, variants=['on'], sizes={'cpu': {'d': 3}})\n"
        "bad = types.SimpleNamespace(name='bad', fn=fn, variants=['off'], sizes={'cpu': {'d': 3}})\n"
    )
    package = types.ModuleType("llmviz.experiments")
    package.__path__ = [str(tmp_path)]
    monkeypatch.setitem(sys.modules, "llmviz.experiments", package)
    monkeypatch.delitem(sys.modules, "llmviz.experiments.ch99", raising=False)
    found = dict(_experiments())
    assert sorted(found) == ["llmviz.experiments.ch99.bad", "llmviz.experiments.ch99.good"]
    _patch_device(monkeypatch, FAKE)
    assert _check(found["llmviz.experiments.ch99.good"]) == {}
    assert _check(found["llmviz.experiments.ch99.bad"]) == {"Linear.weight": "cpu", "Linear.bias": "cpu"}


EXPERIMENTS = _experiments()


@pytest.mark.skipif(not EXPERIMENTS, reason="llmviz/experiments/ holds no Experiment yet")
@pytest.mark.parametrize("exp", [e for _, e in EXPERIMENTS], ids=[n for n, _ in EXPERIMENTS])
def test_experiment_builds_on_llmviz_device(exp, monkeypatch):
    _patch_device(monkeypatch, FAKE)
    misplaced = _check(exp)
    assert not misplaced, (
        f"{getattr(exp, 'name', exp)}: these live off llmviz.device(): {misplaced}; build "
        "models and tensors with device=lv.device() (or .to(lv.device()))"
    )
