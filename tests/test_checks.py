"""The shared input checks: one wording for every error message."""

import math

import numpy as np
import pytest
import torch

from llmviz import _checks


def test_check_tensor_messages():
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        _checks.check_tensor([1, 2], "x")
    with pytest.raises(ValueError, match=r"q must have 4 dimensions, got shape \(2, 3\)"):
        _checks.check_tensor(torch.zeros(2, 3), "q", ndim=4)
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        _checks.check_tensor(torch.zeros(2), "q", ndim=(3, 4))
    with pytest.raises(TypeError, match=r"floating-point.*torch.int64.*x.float\(\)"):
        _checks.check_tensor(torch.zeros(2, dtype=torch.long), "x", floating=True)
    x = torch.zeros(1, 2, 3, 4)
    assert _checks.check_tensor(x, "q", ndim=4, floating=True) is x


def test_check_dtype_matches_outside_autocast_only():
    w = torch.zeros(2, 2)
    with pytest.raises(TypeError, match=r"MLP got x of dtype torch.float64 but its weights are torch.float32; cast"):
        _checks.check_dtype_matches(torch.zeros(2, dtype=torch.float64), w, "MLP")
    _checks.check_dtype_matches(torch.zeros(2), w, "MLP")  # same dtype: fine
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _checks.check_dtype_matches(torch.zeros(2, dtype=torch.bfloat16), w, "MLP")  # autocast casts
    with pytest.raises(TypeError, match=r"got x of dtype torch.bfloat16 but its weights are torch.float32"):
        _checks.check_dtype_matches(torch.zeros(2, dtype=torch.bfloat16), w, "MLP")
    _checks.check_dtype_matches(torch.zeros(2, dtype=torch.bfloat16), w, "norm", low_precision_ok=True)
    with pytest.raises(TypeError, match=r"model.double\(\) for float64 input"):
        _checks.check_dtype_matches(torch.zeros(2, dtype=torch.float64), w, "norm", low_precision_ok=True)


def test_check_hidden_one_wording_for_every_layer_input():
    w = torch.zeros(4, 8)
    x = torch.zeros(2, 3, 8)
    assert _checks.check_hidden(x, 8, w, "Layer", ndim=3) is x
    assert _checks.check_hidden(torch.zeros(5, 8), 8, w, "Layer") is not None  # any (..., C)
    with pytest.raises(ValueError, match=r"Layer was built for d_model=8, but x has shape "
                                         r"\(2, 3, 6\) \(width 6\); x must be \(B, T, C\) with C = 8"):
        _checks.check_hidden(torch.zeros(2, 3, 6), 8, w, "Layer", ndim=3)
    with pytest.raises(ValueError, match=r"x must have 3 dimensions, got shape \(3, 8\)"):
        _checks.check_hidden(torch.zeros(3, 8), 8, w, "Layer", ndim=3)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        _checks.check_hidden(torch.tensor(1.0), 8, w, "Layer")  # no last axis to read
    with pytest.raises(TypeError, match="floating-point"):
        _checks.check_hidden(torch.zeros(2, 8, dtype=torch.long), 8, w, "Layer")
    with pytest.raises(TypeError, match=r"Layer got x of dtype torch.float64 but its weights are torch.float32"):
        _checks.check_hidden(x.double(), 8, w, "Layer")


def test_check_real():
    assert _checks.check_real(-0.5, "top_p") == -0.5  # the range is the caller's
    with pytest.raises(TypeError, match=r"top_p must be a real number, got Tensor"):
        _checks.check_real(torch.tensor([0.5, 0.9]), "top_p")
    with pytest.raises(TypeError, match="top_p must be a real number, got bool True"):
        _checks.check_real(True, "top_p")
    with pytest.raises(ValueError, match="top_p must be finite, got nan"):
        _checks.check_real(math.nan, "top_p")


def test_check_tensor_min_ndim_and_array_hint():
    with pytest.raises(ValueError, match=r"logits must have at least 1 dimension\(s\), got shape \(\) \(0 dims\)"):
        _checks.check_tensor(torch.tensor(1.0), "logits", min_ndim=1)
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor, got ndarray; wrap it with torch.as_tensor"):
        _checks.check_tensor(np.zeros(3), "x")
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor, got NoneType$"):
        _checks.check_tensor(None, "x")
    x = torch.zeros(2, 3)
    assert _checks.check_tensor(x, "x", min_ndim=2) is x


def test_check_choice_and_positive():
    with pytest.raises(ValueError, match=r"layout='diag' is not supported; choose one of \('half', 'interleaved'\)"):
        _checks.check_choice("diag", "layout", ("half", "interleaved"))
    assert _checks.check_choice("half", "layout", ("half", "interleaved")) == "half"
    with pytest.raises(ValueError, match="eps must be positive, got 0"):
        _checks.check_positive(0, "eps")
    with pytest.raises(ValueError, match="window must be non-negative, got -1"):
        _checks.check_positive(-1, "window", allow_zero=True)
    assert _checks.check_positive(0, "window", allow_zero=True) == 0


def test_check_positive_rejects_bool_nan_inf_and_non_numbers():
    with pytest.raises(TypeError, match="lr must be a real number, got bool True"):
        _checks.check_positive(True, "lr")
    with pytest.raises(TypeError, match="lr must be a real number, got str '1'"):
        _checks.check_positive("1", "lr")
    with pytest.raises(ValueError, match="lr must be finite, got nan"):
        _checks.check_positive(math.nan, "lr")
    with pytest.raises(ValueError, match="lr must be finite, got inf"):
        _checks.check_positive(math.inf, "lr")
    assert _checks.check_positive(np.float32(0.5), "lr") == 0.5


def test_check_positive_int_one_rule_for_every_count():
    assert _checks.check_positive_int(3, "n_heads") == 3
    assert _checks.check_positive_int(np.int64(4), "n_heads") == 4
    assert type(_checks.check_positive_int(np.int64(4), "n_heads")) is int
    assert _checks.check_positive_int(0, "n_sinks", allow_zero=True) == 0
    with pytest.raises(TypeError, match="n_heads must be an int, got bool True"):
        _checks.check_positive_int(True, "n_heads")
    with pytest.raises(TypeError, match="n_heads must be an int, got float 2.0"):
        _checks.check_positive_int(2.0, "n_heads")
    with pytest.raises(ValueError, match="n_heads must be a positive int, got 0"):
        _checks.check_positive_int(0, "n_heads")
    with pytest.raises(ValueError, match="n_sinks must be a non-negative int, got -1"):
        _checks.check_positive_int(-1, "n_sinks", allow_zero=True)
