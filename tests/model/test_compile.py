"""Every preset compiles as one graph: no host reads in the forward, with or without a KV cache.

``torch.compile(model, fullgraph=True)`` raises on the first graph break, so a ``.item()``,
a ``bool(tensor)`` or a data-dependent ``if`` anywhere in the forward fails these tests. They use
dynamo's ``"eager"`` backend: graph capture is what is tested (and the outputs are compared),
not inductor's code generation, which keeps the whole file to a few seconds on a CPU.
``benchmarks/bench_compile.py`` measures compiled (inductor) against eager.
"""

from __future__ import annotations

import pytest
import torch

from llmviz.model.lm import DecoderLM
from llmviz.model.presets import PRESETS, preset

try:
    import torch._dynamo as dynamo
except Exception as exc:  # pragma: no cover - platform without dynamo
    pytest.skip(f"torch.compile is unavailable here ({exc})", allow_module_level=True)
if not hasattr(torch, "compile") or not dynamo.is_dynamo_supported():  # pragma: no cover
    pytest.skip("torch.compile is not supported on this platform/Python", allow_module_level=True)


def _tiny(name: str) -> DecoderLM:
    torch.manual_seed(0)
    # the toy presets: byte vocabulary, C = 64, 2 layers
    return DecoderLM(preset(name, n_layers=2)).eval()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_full_forward_compiles_without_graph_break(name):
    model = _tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids).logits, model(ids).logits)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_kv_cache_decode_step_compiles_without_graph_break(name):
    model = _tiny(name)
    ids = torch.randint(0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(2))
    dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        cache, ref_cache = model.new_cache(), model.new_cache()
        model(ids[:, :8], cache=cache)
        model(ids[:, :8], cache=ref_cache)
        got = compiled(ids[:, 8:], cache=cache).logits  # (B, 1, V)
        want = model(ids[:, 8:], cache=ref_cache).logits
    torch.testing.assert_close(got, want)
    assert cache.length() == ref_cache.length() == 9


def test_padded_forward_compiles_without_graph_break():
    """An HF attention_mask (padding) adds no host read either."""
    model = _tiny("llama2")
    ids = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(3))
    attention_mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        got = compiled(ids, attention_mask=attention_mask).logits
        want = model(ids, attention_mask=attention_mask).logits
    torch.testing.assert_close(got, want)
