"""Shared fixtures: seeded RNG, and the devices each parity test runs on.

Tests parametrised with ``device`` run on the CPU always, and on CUDA when a GPU is present
(those cases carry the ``cuda`` marker, so ``pytest -m cuda`` runs just them).
"""

from __future__ import annotations

import os

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
