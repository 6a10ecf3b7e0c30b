"""Prose that names code cannot drift: every dotted ``llmviz.`` reference in the package's
docstrings and comments resolves, and the kinds that docstrings list come from the registries."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r"\bllmviz(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# References in files other branches are rewriting (hf/ by the HF bridge, attention/functional.py
# and attention/_checks.py by the input-checks work); delete each entry once its file is fixed.
KNOWN_STALE = {
    ("llmviz/hf/layers.py", "llmviz.attention.linear.GatedDeltaNet"),
    ("llmviz/attention/functional.py", "llmviz.masks"),
    ("llmviz/attention/_checks.py", "llmviz.masks.padding_mask"),
}


def resolves(ref: str) -> bool:
    parts = ref.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_resolver_catches_a_drifted_name():
    assert resolves("llmviz.norm.make_norm") and resolves("llmviz.model.kinds.ATTENTIONS")
    assert not resolves("llmviz.norms.make_norm")  # the name block.py used to give


@pytest.mark.parametrize("path", sorted((ROOT / "llmviz").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_dotted_reference_resolves(path):
    rel = str(path.relative_to(ROOT))
    refs = {m.group(0).rstrip(".") for m in REF.finditer(path.read_text())}
    broken = sorted(r for r in refs if (rel, r) not in KNOWN_STALE and not resolves(r))
    assert not broken, f"{rel} names {broken}, which do not exist; point the prose at the real name"


def test_known_stale_references_are_still_there():
    for rel, ref in KNOWN_STALE:
        assert ref in (ROOT / rel).read_text() and not resolves(ref), (
            f"{rel} no longer names {ref}: drop it from KNOWN_STALE")


def test_docstring_lists_of_kinds_are_the_registries():
    from llmviz.attention.mask_kinds import MASK_KINDS
    from llmviz.ffn import FFN_KINDS, FFNS, make_ffn
    from llmviz.model.config import ATTN_KINDS
    from llmviz.model.kinds import ATTENTIONS
    from llmviz.norm import MODEL_NORMS, NORM_KINDS, NORMS, make_norm
    from llmviz.position import POSITION_SCHEMES, POSITIONS

    assert NORM_KINDS == tuple(NORMS) and MODEL_NORMS == NORMS.names(per_token=True)
    assert tuple(FFN_KINDS) == tuple(FFNS) and ATTN_KINDS == tuple(ATTENTIONS)
    assert POSITIONS == tuple(POSITION_SCHEMES)
    # docstrings point at the registry instead of copying its names ...
    assert ":data:`NORM_KINDS`" in make_norm.__doc__ and ":data:`FFNS`" in make_ffn.__doc__
    # ... and where a docstring does list names, it lists exactly the registered ones
    text = (ROOT / "llmviz/model/config.py").read_text()
    for field, registry in (("local_attention", MASK_KINDS.names(local=True)),
                            ("attn_kind", tuple(ATTENTIONS))):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{field}:"))
        assert set(re.findall(r'"([a-z_]+)"', line.split("#", 1)[1])) == set(registry), line
