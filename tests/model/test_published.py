"""Real models' numbers come from their published configs (llmviz.model.published), never from a
transformers class default; every row chapters 14-19 print is checked against the zoo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmviz.model.zoo import PUBLISHED, SUB_1B, ZOO, published_config

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: A transformers config class called with no arguments: a class default standing for a model.
DEFAULT_CALL = re.compile(r"transformers\.\w+Config\(\s*\)")
#: Any transformers config class built in a chapter (16-19 build real models only from the zoo).
ANY_CALL = re.compile(r"transformers\.\w+Config\(")


def _code(chapter: int) -> str:
    (path,) = NOTEBOOKS.glob(f"{chapter:02d}_*.ipynb")
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("chapter", [14, 15, 16, 17, 18, 19])
def test_no_class_default_stands_for_a_model(chapter):
    code = _code(chapter)
    assert not DEFAULT_CALL.findall(code), f"chapter {chapter}: {DEFAULT_CALL.findall(code)}"
    if chapter >= 16:
        assert not ANY_CALL.findall(code), (
            f"chapter {chapter} builds a transformers config itself; use published_config(name)")


@pytest.mark.parametrize("chapter", [14, 16, 17, 18, 19])
def test_chapters_name_only_published_models(chapter):
    names = re.findall(r"published_config\(\s*\"([^\"]+)\"", _code(chapter))
    assert names, f"chapter {chapter} reads no published configuration"
    assert set(names) <= set(PUBLISHED), set(names) - set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_configs_agree_with_the_zoo(name):
    from llmviz.hf import anatomy

    entry = PUBLISHED[name]
    a = anatomy(published_config(name))
    if entry.zoo is None:
        return pytest.skip(f"{name} has no zoo row")
    (row,) = [e for e in ZOO + SUB_1B if e.name == entry.zoo]
    assert (a.n_layers, a.d_model, a.n_heads) == (row.n_layers, row.d_model, row.n_heads)
    if row.n_kv_heads is not None:
        assert a.n_kv_heads == row.n_kv_heads
    assert a.total_params / 1e9 == pytest.approx(row.params_b, rel=0.03)
    windows = {layer.window for layer in a.layers if layer.window is not None}
    assert windows == ({row.window} if row.window else set())
    if row.experts is not None:
        assert (a.experts, a.experts_active) == (row.experts, row.experts_active)


def test_published_values_the_review_checked():
    from llmviz.hf import anatomy

    gemma = anatomy(published_config("Gemma 3 27B"))
    assert {layer.window for layer in gemma.layers if layer.window} == {1024}
    assert gemma.kv_bytes_per_token == 496 * 1024  # bf16, 10 global and 52 sliding layers
    assert {layer.window for layer in anatomy(published_config("Gemma 3 1B")).layers
            if layer.window} == {512}
    oss = anatomy(published_config("gpt-oss-20b"))
    assert (oss.n_layers, oss.experts) == (24, 32) and oss.total_params / 1e9 == pytest.approx(20.9, abs=0.1)
    for name in ("SmolLM3 3B", "Qwen3-Next 80B-A3B"):
        bases = {layer.rope_base for layer in anatomy(published_config(name)).layers if layer.rope_base}
        assert bases == {5_000_000.0}, (name, bases)


def test_unknown_name_is_refused():
    with pytest.raises(ValueError, match="no published configuration named 'Gemma 3 2.6B'"):
        published_config("Gemma 3 2.6B")


def test_every_sub_1b_row_has_a_published_config():
    rows = {entry.zoo for entry in PUBLISHED.values()}
    assert {row.name for row in SUB_1B} <= rows, {row.name for row in SUB_1B} - rows
    assert all(row.params_b < 1 for row in SUB_1B)
    assert not {row.name for row in SUB_1B} & {row.name for row in ZOO}


def test_max_context_is_metadata_only():
    # the released context is held beside the fields, never passed to transformers
    assert PUBLISHED["Llama 2 7B"].max_context == published_config("Llama 2 7B").max_position_embeddings
    assert PUBLISHED["DeepSeek-V3"].max_context == 163840
    assert "max_context" not in PUBLISHED["DeepSeek-V3"].fields
    assert not hasattr(published_config("DeepSeek-V3"), "max_context")
    assert all(e.max_context is None or e.max_context >= 4096 for e in PUBLISHED.values())
