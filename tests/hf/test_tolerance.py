"""match_tolerance: the bound by dtype and device, relative to the reference's size."""

import pytest
import torch

from llmviz.hf import match_tolerance
from llmviz.hf.tolerance import RELATIVE, relative_tolerance


def test_float32_cpu_is_relative_to_the_largest_value():
    ref = torch.tensor([0.5, -4.0, 2.0])
    assert match_tolerance(ref) == pytest.approx(RELATIVE[torch.float32, "cpu"] * 4.0)
    small = torch.tensor([0.01, -0.02])  # below 1 the bound is absolute
    assert match_tolerance(small) == pytest.approx(RELATIVE[torch.float32, "cpu"])


def test_coarser_dtypes_get_wider_bounds():
    ref = torch.ones(3)
    t64, t32 = match_tolerance(ref.double()), match_tolerance(ref)
    t16, tbf = match_tolerance(ref.half()), match_tolerance(ref.bfloat16())
    assert t64 < t32 < t16 < tbf


def test_accelerator_float32_is_looser_and_tf32_looser_still(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    cpu, gpu = relative_tolerance(torch.float32, "cpu"), relative_tolerance(torch.float32, "cuda")
    assert gpu == RELATIVE[torch.float32, "accelerator"] > cpu
    assert relative_tolerance(torch.float32, "mps") == gpu
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert relative_tolerance(torch.float32, "cuda") == RELATIVE["tf32", "accelerator"] > gpu
    assert relative_tolerance(torch.float32, "cpu") == cpu  # TF32 does not touch the CPU
    assert relative_tolerance(torch.bfloat16, "cuda") == RELATIVE[torch.bfloat16, "accelerator"]


def test_bad_reference_is_refused_with_the_fix():
    with pytest.raises(TypeError, match="torch.Tensor"):
        match_tolerance([1.0, 2.0])
    with pytest.raises(TypeError, match="floating point"):
        match_tolerance(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"reference.float\(\)"):
        match_tolerance(torch.ones(2).to(torch.float8_e4m3fn))
    with pytest.raises(ValueError, match="torch.int64"):
        relative_tolerance(torch.int64, "cuda")
