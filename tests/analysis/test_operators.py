import pytest
import torch
import torch.nn.functional as F

from llmviz.analysis.operators import compute_ops


def test_a_composite_lists_its_arithmetic_in_order():
    x = torch.randn(4, 8)
    assert compute_ops(lambda: (x * 2 + 1).exp()) == ["mul", "add", "exp"]


def test_layer_norm_is_one_kernel_on_the_cpu():
    x, w, b = torch.randn(2, 3, 16), torch.ones(16), torch.zeros(16)
    assert compute_ops(lambda: F.layer_norm(x, (16,), w, b, 1e-5)) == ["native_layer_norm"]


def test_a_parent_operator_is_not_counted_with_its_children():
    x = torch.randn(4, 8)
    ops = compute_ops(lambda: x.mean(-1))  # mean may call sum and div underneath
    assert "mean" not in ops or ops == ["mean"]
    assert ops  # something did arithmetic


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="callable with no arguments"):
        compute_ops(torch.randn(3))
