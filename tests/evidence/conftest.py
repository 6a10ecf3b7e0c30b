"""Fixtures of the evidence tests."""

import pytest
import torch


@pytest.fixture
def cpu_only(monkeypatch):
    """Pretend no GPU is present (CUDA or MPS), so run_seeds' auto strategy forks on Linux even
    on a machine that has one (the forked tests' functions use the CPU only)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
