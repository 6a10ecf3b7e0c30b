"""Tests for llmviz.norm.reduction: the cells each norm reduces over, checked against the norms."""

from __future__ import annotations

import pytest
import torch

from llmviz.norm import (
    REDUCTION_KINDS,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    reduction_mask,
    rms_norm,
)


@pytest.mark.parametrize("kind,count", [("layer", 6), ("rms", 6), ("batch", 12), ("instance", 4), ("group", 12)])
def test_reduction_mask_matches_the_norms(kind, count):
    mask = reduction_mask(kind, (3, 4, 6), n_groups=2)
    assert mask.sum() == count and mask[0, 0, 0]
    # The mask is what the norm really does: perturbing a cell outside it leaves the
    # statistics of cell (0, 0, 0) unchanged; perturbing one inside changes them.
    x = torch.randn(3, 4, 6, dtype=torch.float64)
    fn = {"layer": lambda v: layer_norm(v), "rms": lambda v: rms_norm(v),
          "batch": lambda v: batch_norm(v), "instance": lambda v: instance_norm(v),
          "group": lambda v: group_norm(v, 2)}[kind]
    base = fn(x)[0, 0, 0]
    for idx in map(tuple, mask.nonzero().tolist()):
        if idx == (0, 0, 0):
            continue
        y = x.clone()
        y[idx] += 3.0
        assert not torch.isclose(fn(y)[0, 0, 0], base)
    for idx in map(tuple, (~mask).nonzero()[:10].tolist()):
        y = x.clone()
        y[idx] += 3.0
        assert torch.isclose(fn(y)[0, 0, 0], base)


@pytest.mark.parametrize("kind", REDUCTION_KINDS)
def test_every_cell_belongs_to_exactly_one_group(kind):
    B, T, C = 2, 3, 4
    cells = [(b, t, c) for b in range(B) for t in range(T) for c in range(C)]
    masks = {cell: reduction_mask(kind, (B, T, C), cell=cell) for cell in cells}
    for cell, mask in masks.items():
        assert mask[cell]  # a cell shares its statistics with itself
        for other in map(tuple, mask.nonzero().tolist()):
            assert torch.equal(masks[other], mask)  # sharing is an equivalence relation


def test_bad_input_names_the_values():
    with pytest.raises(ValueError, match="kind='cube' is not supported"):
        reduction_mask("cube")
    with pytest.raises(ValueError, match=r"C \(6\) must be divisible by n_groups \(4\)"):
        reduction_mask("group", (3, 4, 6), n_groups=4)
    with pytest.raises(ValueError, match=r"cell \(3, 0, 0\) is outside the shape"):
        reduction_mask("layer", (3, 4, 6), cell=(3, 0, 0))
    with pytest.raises(ValueError, match=r"\(B, T, C\) triples"):
        reduction_mask("layer", (3, 4))
