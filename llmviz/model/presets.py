"""Configurations of real model families, at toy size by default and at their published sizes.

Each preset is ``family(size="toy", **overrides) -> ModelConfig``. ``"toy"`` keeps the family's
*architecture* (norm, placement, serial/parallel, position, feed-forward, GQA ratio, stability
tricks) at a size that runs a forward pass in milliseconds on a CPU (byte vocabulary, C = 64,
2 layers). A named size (``llama2("7b")``) gives the published shape; such configs are for
counting parameters, FLOPs and KV-cache bytes, not for instantiating in a notebook.

Sources (config files of the released checkpoints, and the papers):
    * GPT-2: Radford et al. 2019; Hugging Face ``gpt2``, ``gpt2-medium``, ``gpt2-large``, ``gpt2-xl``.
    * Llama 2: Touvron et al. 2023; ``meta-llama/Llama-2-{7b,13b,70b}-hf`` configs.
    * Mistral 7B: Jiang et al. 2023; ``mistralai/Mistral-7B-v0.1`` config.
    * Gemma 2: Gemma Team 2024; ``google/gemma-2-{2b,9b,27b}`` configs.
    * GPT-J: Wang & Komatsuzaki 2021; ``EleutherAI/gpt-j-6b`` config.
    * PaLM: Chowdhery et al. 2022, Table 1 (never released; dimensions from the paper).
    * BLOOM: BigScience 2022; ``bigscience/bloom`` and ``bloom-560m`` configs.

Simplifications (documented, deliberate):
    * Gemma 2 alternates local (4096-token window) and global layers; here ``global_every=2``
      makes every second layer global, as in the Hugging Face implementation. Gemma 2 also
      scales queries by ``query_pre_attn_scalar ** -0.5`` (27B: 144 instead of head_dim 128),
      which the presets set.
    * GPT-J's attention has no biases but its MLP does (``attn_bias=False, bias=True``); its
      ``lm_head`` bias is omitted.
    * PaLM uses LayerNorm without biases (``"layer_nobias"``), multi-query attention, a
      SwiGLU feed-forward of width 4C and z-loss 1e-4. Its 540B model has 48 heads of size 256
      (H * D = 12288 < C = 18432); with that head size the closed-form count gives 540B.

Assumed values (not facts about the model): a config needs a number for every field, and for
some families a source states none. :data:`ASSUMED` lists each such field with the reason, and
:func:`published_eps` returns ``None`` for an eps that no source states, so tables can print
"not published" instead of the placeholder. The one case so far: PaLM's norm eps (never
released, no config; the paper does not state it), built with 1e-5.
"""

from __future__ import annotations

from typing import Any

from .config import ModelConfig

__all__ = [
    "PRESETS", "ASSUMED", "gpt2", "llama2", "mistral", "gemma2", "gptj", "palm", "bloom", "preset",
    "published_eps", "trained_context",
]

_PALM_EPS_ASSUMED = 1e-5  # placeholder: no PaLM config was released and the paper states no eps

#: Fields whose preset value no source states: ``{family: {field: why the value is assumed}}``.
#: Tables should print "not published" for them (:func:`published_eps` does it for eps).
ASSUMED: dict[str, dict[str, str]] = {
    "palm": {
        "norm_eps": (
            "not published: PaLM was never released (no config to read) and Chowdhery et al. "
            f"2022 do not state the LayerNorm eps; {_PALM_EPS_ASSUMED:g} is assumed so the model "
            "can be built"
        ),
    },
}

_TOY = dict(vocab_size=256, d_model=64, n_layers=2, n_heads=4, max_seq_len=256)


def _build(family: str, arch: dict, sizes: dict, size: str, overrides: dict) -> ModelConfig:
    if size not in sizes:
        raise ValueError(
            f"{family} has no size {size!r}; choose one of {tuple(sizes)} "
            "(or pass any field as a keyword override)"
        )
    return ModelConfig(**{**arch, **sizes[size], **overrides})


def gpt2(size: str = "toy", **overrides: Any) -> ModelConfig:
    """GPT-2: learned positions, pre-LayerNorm, GELU (tanh) MLP with biases, tied embeddings."""
    arch = dict(position="learned", norm="layer", norm_eps=1e-5, placement="pre", ffn="mlp",
                activation="gelu_tanh", bias=True, tie_embeddings=True)
    sizes = {
        "toy": _TOY,
        "small": dict(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, max_seq_len=1024),
        "medium": dict(vocab_size=50257, d_model=1024, n_layers=24, n_heads=16, max_seq_len=1024),
        "large": dict(vocab_size=50257, d_model=1280, n_layers=36, n_heads=20, max_seq_len=1024),
        "xl": dict(vocab_size=50257, d_model=1600, n_layers=48, n_heads=25, max_seq_len=1024),
    }
    return _build("gpt2", arch, sizes, size, overrides)


def llama2(size: str = "toy", **overrides: Any) -> ModelConfig:
    """Llama 2: RMSNorm pre-norm, RoPE, SwiGLU, no biases, untied; GQA only at 70B (and 34B)."""
    arch = dict(position="rope", rope_base=10000.0, norm="rms", norm_eps=1e-5, placement="pre",
                ffn="swiglu", bias=False, tie_embeddings=False)
    real = dict(vocab_size=32000, max_seq_len=4096)
    sizes = {
        "toy": dict(_TOY, n_kv_heads=4),
        "7b": dict(real, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, d_ff=11008),
        "13b": dict(real, d_model=5120, n_layers=40, n_heads=40, n_kv_heads=40, d_ff=13824),
        "70b": dict(real, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672),
    }
    return _build("llama2", arch, sizes, size, overrides)


def mistral(size: str = "toy", **overrides: Any) -> ModelConfig:
    """Mistral 7B: the Llama recipe plus GQA (8 kv heads) and a 4096-token sliding window."""
    arch = dict(position="rope", rope_base=10000.0, norm="rms", norm_eps=1e-5, placement="pre",
                ffn="swiglu", bias=False, tie_embeddings=False)
    sizes = {
        "toy": dict(_TOY, n_kv_heads=1, sliding_window=16),
        "7b": dict(vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                   d_ff=14336, max_seq_len=32768, sliding_window=4096),
    }
    return _build("mistral", arch, sizes, size, overrides)


def gemma2(size: str = "toy", **overrides: Any) -> ModelConfig:
    """Gemma 2: sandwich RMSNorm (1 + w), GeGLU (tanh GELU), GQA, soft-capping, local/global."""
    arch = dict(position="rope", rope_base=10000.0, norm="rms_gemma", norm_eps=1e-6,
                placement="sandwich", ffn="geglu", activation="gelu_tanh", bias=False,
                tie_embeddings=True, embed_scale=True, attn_softcap=50.0, final_softcap=30.0,
                global_every=2)
    real = dict(vocab_size=256000, max_seq_len=8192, sliding_window=4096)
    sizes = {
        "toy": dict(_TOY, n_kv_heads=2, head_dim=32, sliding_window=16),
        "2b": dict(real, d_model=2304, n_layers=26, n_heads=8, n_kv_heads=4, head_dim=256, d_ff=9216),
        "9b": dict(real, d_model=3584, n_layers=42, n_heads=16, n_kv_heads=8, head_dim=256, d_ff=14336),
        "27b": dict(real, d_model=4608, n_layers=46, n_heads=32, n_kv_heads=16, head_dim=128, d_ff=36864,
                    query_pre_attn_scalar=144.0),
    }
    return _build("gemma2", arch, sizes, size, overrides)


def gptj(size: str = "toy", **overrides: Any) -> ModelConfig:
    """GPT-J: parallel block with one shared LayerNorm, partial interleaved RoPE, GELU MLP."""
    arch = dict(position="rope", rope_layout="interleaved", norm="layer", norm_eps=1e-5,
                placement="pre", parallel=True, ffn="mlp", activation="gelu_tanh", bias=True,
                attn_bias=False, tie_embeddings=False)
    sizes = {
        "toy": dict(_TOY, rotary_dim=8),
        "6b": dict(vocab_size=50400, d_model=4096, n_layers=28, n_heads=16, rotary_dim=64,
                   max_seq_len=2048),
    }
    return _build("gptj", arch, sizes, size, overrides)


def palm(size: str = "toy", **overrides: Any) -> ModelConfig:
    """PaLM: parallel block, bias-free LayerNorm, multi-query attention, RoPE, SwiGLU, z-loss.

    ``norm_eps`` is an assumption (see :data:`ASSUMED`): PaLM's eps is not published.
    """
    arch = dict(position="rope", norm="layer_nobias", norm_eps=_PALM_EPS_ASSUMED, placement="pre",
                parallel=True, ffn="swiglu", bias=False, tie_embeddings=True, z_loss_weight=1e-4)
    real = dict(vocab_size=256000, max_seq_len=2048, n_kv_heads=1)
    sizes = {
        "toy": dict(_TOY, n_kv_heads=1, d_ff=256),
        "8b": dict(real, d_model=4096, n_layers=32, n_heads=16, d_ff=4 * 4096),
        "62b": dict(real, d_model=8192, n_layers=64, n_heads=32, d_ff=4 * 8192),
        "540b": dict(real, d_model=18432, n_layers=118, n_heads=48, head_dim=256, d_ff=4 * 18432),
    }
    return _build("palm", arch, sizes, size, overrides)


def bloom(size: str = "toy", **overrides: Any) -> ModelConfig:
    """BLOOM: ALiBi (no position embedding), pre-LayerNorm plus a LayerNorm on the embeddings,
    GELU MLP with biases, serial blocks, tied embeddings."""
    arch = dict(position="alibi", norm="layer", norm_eps=1e-5, placement="pre", parallel=False,
                ffn="mlp", activation="gelu_tanh", bias=True, tie_embeddings=True, embed_norm=True)
    sizes = {
        "toy": _TOY,
        "560m": dict(vocab_size=250880, d_model=1024, n_layers=24, n_heads=16, max_seq_len=2048),
        "176b": dict(vocab_size=250880, d_model=14336, n_layers=70, n_heads=112, max_seq_len=2048),
    }
    return _build("bloom", arch, sizes, size, overrides)


#: Every family by name.
PRESETS = {
    "gpt2": gpt2, "llama2": llama2, "mistral": mistral, "gemma2": gemma2,
    "gptj": gptj, "palm": palm, "bloom": bloom,
}


def preset(name: str, size: str = "toy", **overrides: Any) -> ModelConfig:
    """``preset("llama2", "7b")`` == ``llama2("7b")``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {tuple(PRESETS)}")
    return PRESETS[name](size, **overrides)


def published_eps(name: str) -> float | None:
    """The norm eps of family ``name`` as its sources state it, or ``None`` where none does.

    ``published_eps("llama2") == 1e-5`` (the released configs); ``published_eps("palm") is None``:
    the preset builds PaLM with an assumed eps (:data:`ASSUMED`), which is not a fact about PaLM.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {tuple(PRESETS)}")
    if "norm_eps" in ASSUMED.get(name, {}):
        return None
    return PRESETS[name]().norm_eps


def trained_context(name: str) -> int:
    """The sequence length family ``name`` was trained at, as its paper states it (tokens).

    Not always the preset's ``max_seq_len``, which copies the released config's position-table
    size: Mistral 7B ships ``max_position_embeddings=32768`` but was trained at 8192 tokens
    (Jiang et al. 2023, Table 1, ``context_len``). A chapter that means "the context the model
    was trained at" reads it here. Sources: GPT-2 1024 (Radford et al. 2019, Sec. 2.3);
    Llama 2 4096 (Touvron et al. 2023, Table 1); Mistral 7B 8192 (Jiang et al. 2023, Table 1);
    Gemma 2 8192 (Gemma Team 2024, Table 1); GPT-J 2048 (the released config's ``n_positions``;
    Wang and Komatsuzaki 2021); PaLM 2048 (Chowdhery et al. 2022, Sec. 5); BLOOM 2048
    (BigScience 2022, Table 3).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {tuple(PRESETS)}")
    published = {"gpt2": 1024, "llama2": 4096, "mistral": 8192, "gemma2": 8192, "gptj": 2048,
                 "palm": 2048, "bloom": 2048}
    return published[name]
