"""Machinery of the bad-input walk (tests/test_bad_input.py): the public API, valid arguments
by parameter name, bad variants of each argument, and the judge of an exception.

A raised error is *clean* when it is a ValueError or TypeError raised by llmviz's own code
(the innermost frame of its traceback is in the llmviz package) with a message of its own; it
is *raw* when it is any other type, when it comes from inside torch, numpy, matplotlib or
plotly (their own ValueError/TypeError included), or when it is one of Python's own messages
about an operation (``'<' not supported``, ``object is not subscriptable``...).
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import llmviz

PKG_DIR = str(Path(llmviz.__file__).resolve().parent)

#: Side effects or slow work by design (threads, seeds, files, processes, timing loops, the
#: network); each has its own tests of its checks.
SKIP = {
    "setup_notebook", "threads", "show_source", "device", "in_book_build", "run_size", "pick",
    "load_corpus", "train", "measure", "compare", "run_seeds", "run_grid", "claims_file",
    "glue_number", "glue_text", "header", "speed_claim", "check_tensor", "check_choice",
    "check_positive", "check_positive_int", "check_mask", "check_qkv", "save", "face",
    "peak_memory", "Callable", "Union", "Any",
}

_PYTHON_OWN = re.compile(
    r"not supported between instances|unsupported operand|object is not (subscriptable|"
    r"callable|iterable)|takes \d+ positional|got an unexpected keyword|missing \d+ required|"
    r"argument must be a string or a real number|object of type .* has no len|cannot unpack|"
    r"only integer tensors of a single element|can't convert|must be real number, not|"
    r"unhashable type"
)


def public_callables() -> dict[str, Callable]:
    """Every callable in the ``__all__`` of every llmviz module (private modules excluded)."""
    found: dict[str, Callable] = {}
    for info in pkgutil.walk_packages(llmviz.__path__, "llmviz."):
        # llmviz.experiments holds the book's experiment definitions: called by the records
        # machinery and the chapters with their declared sizes, not an API for bad input
        if "._" in info.name or info.name.startswith("llmviz.experiments"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if not callable(obj) or name in SKIP:
                continue
            if not (getattr(obj, "__module__", "") or "").startswith("llmviz"):
                continue
            found[f"{obj.__module__}.{getattr(obj, '__qualname__', name)}"] = obj
    return found


def origin(err: BaseException) -> str:
    """The file of the innermost traceback frame: where ``err`` was raised."""
    tb = err.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last.tb_frame.f_code.co_filename if last is not None else ""


def verdict(err: BaseException) -> str | None:
    """None for a clean refusal, else why the error is raw."""
    where = origin(err)
    if not isinstance(err, (ValueError, TypeError)):
        return f"raw {type(err).__name__} from {where}"
    if not str(err):
        return f"{type(err).__name__} with no message"
    if not where.startswith(PKG_DIR):
        return f"{type(err).__name__} raised inside {where}"
    if _PYTHON_OWN.search(str(err)):
        return f"Python's own {type(err).__name__} in {where}"
    return None


# ----------------------------------------------------------------------------- valid arguments
def _tiny_config():
    from llmviz.model import ModelConfig

    return ModelConfig(vocab_size=32, d_model=16, n_layers=2, n_heads=2, max_seq_len=16)


def _tiny_model():
    from llmviz.model import DecoderLM

    torch.manual_seed(0)
    return DecoderLM(_tiny_config()).eval()


def _weights():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 2, 5, 5, generator=g).softmax(-1)


def _randn(*shape):
    return lambda: torch.randn(*shape, generator=torch.Generator().manual_seed(0))


#: A valid value for a required parameter, by its name (shapes agree with each other:
#: B=2, H=G=2, T=S=5, head dim 8, width 16, vocabulary 32). A function whose required
#: parameters are not all here, or whose call with these fails, is walked by part 1 only.
VALID: dict[str, Callable[[], Any]] = {
    "q": _randn(2, 2, 5, 8), "k": _randn(2, 2, 5, 8), "v": _randn(2, 2, 5, 8),
    "x": _randn(2, 5, 16), "logits": _randn(2, 32), "weights": _weights,
    "T": lambda: 5, "S": lambda: 5, "window": lambda: 3, "n_heads": lambda: 2,
    "n_kv_heads": lambda: 1, "head_dim": lambda: 8, "d_model": lambda: 16, "d": lambda: 16,
    "d_ff": lambda: 32, "n_layers": lambda: 2, "n_experts": lambda: 4, "top_k": lambda: 2,
    "seq_len": lambda: 8, "batch_size": lambda: 2, "n_rep": lambda: 2, "stride": lambda: 2,
    "dilation": lambda: 2, "depth": lambda: 2, "n": lambda: 4, "max_distance": lambda: 4,
    "n_positions": lambda: 6, "dims": lambda: [0, 1], "pair": lambda: 1, "n_bits": lambda: 3,
    "positions": lambda: torch.arange(5), "inv_freq": lambda: 1.0 / 10000 ** (torch.arange(4) / 4.0),
    "mask": lambda: torch.ones(5, 5, dtype=torch.bool).tril(), "config": _tiny_config,
    "model": _tiny_model, "input_ids": lambda: torch.randint(0, 32, (2, 5)),
    "max_new_tokens": lambda: 2, "temperature": lambda: 0.7, "p": lambda: 0.9, "min_p": lambda: 0.1,
    "cap": lambda: 5.0, "relative_position": lambda: torch.arange(-4, 5), "slopes": lambda: [0.5, 0.25],
    "offsets": lambda: torch.arange(6), "pe": _randn(6, 8), "matrix": _randn(4, 4),
    "bias": _randn(2, 4, 4), "values": _randn(40), "before": _randn(4, 16), "after": lambda: {"LN": torch.randn(4, 16)},
    "a": lambda: [1.0, 2.0, 3.0], "b": lambda: [1.5, 2.5, 2.0], "max_positions": lambda: 8,
    "block_q": lambda: 2, "block_k": lambda: 2, "state": _randn(4, 4), "n_groups": lambda: 2,
    "kind": lambda: "layer", "name": lambda: "relu", "labels": lambda: ["a", "b"],
    "n_pairs": lambda: 2, "n_tokens": lambda: 4, "tokens": lambda: torch.randint(0, 32, (64,)),
    "scores": _randn(6), "bound": _randn(6), "actual": _randn(6), "d_k": lambda: 8, "d_v": lambda: 8,
    "qk_head_dim": lambda: 8, "latent_rank": lambda: 4, "k_": lambda: 3, "d_expert": lambda: 8,
}

_SIZE_NAME = re.compile(
    r"^(n|bins|block|block_[qk]|d|d_model|d_ff|d_k|d_v|head_dim|dim|dimension|window|stride|"
    r"dilation|depth|max_positions|max_distance|num_buckets|n_[a-z_]+|[a-z_]*_size|seq_len|"
    r"max_new_tokens|steps|top_k|latent_rank|[a-z_]*_dim|n_rep)$"
)
#: Free text (labels, titles, colours) where any string is valid.
_TEXT_NAME = re.compile(r"(label|title|name|color|colour|text|note|xlabel|ylabel|prefix|cmap|key)")


def bad_variants(name: str, value: Any) -> list[tuple[str, Any, bool]]:
    """Bad versions of a valid ``value`` for parameter ``name``: ``(kind, value, clearly
    invalid)``. A clearly invalid one must be refused; the others may also give a correct
    result (a NaN input can give a NaN output), but never a raw error."""
    out: list[tuple[str, Any, bool]] = []
    if isinstance(value, bool):
        out += [("None for a flag", None, False), ("str for a flag", "yes", False)]
    elif isinstance(value, int):
        size = bool(_SIZE_NAME.match(name))
        out += [("zero", 0, size), ("negative", -1, size), ("float for an int", 2.5, False),
                ("nan", math.nan, True), ("str", "4", True)]
    elif isinstance(value, float):
        out += [("nan", math.nan, True), ("inf", math.inf, False), ("negative", -1.0, False),
                ("str", "1.0", True)]
    elif isinstance(value, str):
        if not _TEXT_NAME.search(name):
            out += [("unknown choice", "no-such-kind", True), ("int for a str", 3, False)]
    elif isinstance(value, torch.Tensor) and value.ndim:
        if value.is_floating_point():
            out += [("uint8 tensor", value.to(torch.uint8), False),
                    ("bool tensor", value > 0, False),
                    ("int64 tensor", value.long(), False),
                    ("NaN-filled", torch.full_like(value, math.nan), False),
                    ("float16", value.half(), False)]
        elif value.dtype == torch.bool:
            out += [("int 0/1 mask", value.long(), False), ("uint8 mask", value.to(torch.uint8), False),
                    ("float mask", value.float(), False)]
        else:
            out += [("float ids", value.float(), False), ("bool ids", value > 0, False),
                    ("uint8 ids", value.to(torch.uint8), False),
                    ("out-of-range ids", value + 10_000, False),
                    ("negative ids", value - 10_000, False)]
        out += [("one rank more", value[None], False), ("one rank less", value.flatten()[: max(1, value.numel() // 2)] if value.ndim == 1 else value[0], False),
                ("batch + 1", torch.cat([value, value[:1]]), False),
                ("empty", value[:0], False), ("numpy array", value.numpy(), False)]
    elif isinstance(value, (list, tuple)) and value:
        out += [("empty sequence", type(value)(), False), ("None", None, False)]
    return out


def signature_of(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def baseline(fn) -> dict[str, Any] | None:
    """Valid keyword arguments for ``fn``'s required parameters, or None if some are unknown."""
    sig = signature_of(fn)
    if sig is None:
        return None
    kwargs = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not inspect.Parameter.empty:
            continue
        if p.name not in VALID or p.kind is p.POSITIONAL_ONLY:
            return None
        kwargs[p.name] = VALID[p.name]()
    return kwargs


def perturbations(fn, kwargs: dict[str, Any]):
    """``(parameter, kind, clearly invalid, kwargs with that parameter made bad)``."""
    sig = signature_of(fn)
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = kwargs[p.name] if p.name in kwargs else p.default
        if value is inspect.Parameter.empty or value is None:
            continue
        for kind, bad, clear in bad_variants(p.name, value):
            yield p.name, kind, clear, {**kwargs, p.name: bad}


def clone(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


__all__ = ["public_callables", "verdict", "baseline", "perturbations", "bad_variants", "VALID",
           "origin", "np"]
