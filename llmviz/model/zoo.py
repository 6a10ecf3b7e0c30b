"""The architecture zoo: which published model made which design choice, as data.

Each :class:`ZooEntry` records one model's norm, serial or parallel block, norm placement,
position scheme, feed-forward activation, stability tricks and shape, with the source the
facts come from (the paper, or the released config file). :func:`zoo_table` returns them as
a ``pandas.DataFrame``. :data:`SUB_1B` holds the published models under a billion parameters.
(line budget: the module is one data table, one entry per model, and is read whole.)

The table corrects a widely shared lecture table (see the book's ERRATA): it has no "GPT-2
2020 RMSNorm" row (GPT-2 is 2019 and uses LayerNorm), BLOOM is serial and has 176B
parameters, Phi-3-small uses GeGLU, GPT-NeoX and GPT-J use RoPE (GPT-J and GPT-NeoX have
parallel blocks), Mistral 7B is a dense model (Mixtral is the mixture of experts), and
Llama 2 uses grouped-query attention only at 34B/70B (7B and 13B are plain multi-head).
Models whose architecture is not published (GPT-4, Claude, ...) are left out rather than
guessed. ``"unstated"`` marks a fact the source does not give (LaMDA's paper states neither its
norm nor whether its blocks are serial or parallel); ``None`` a number it does not give.

The ``block`` column tells the three layouts apart: serial, parallel with one shared norm
(GPT-J, PaLM: ``x + Attn(N(x)) + FFN(N(x))``) and parallel with two norms reading the same
input (GPT-NeoX, Falcon 40B: ``x + Attn(N1(x)) + FFN(N2(x))``). ``stability`` lists only what
a source introduces for training stability; other departures from the recipe (Qwen's QKV bias,
added for length extrapolation) go to ``extras``.

The columns of the 2025-26 block: a mixture of experts (routed experts, how many a token goes
through, shared experts, active parameters), multi-head latent attention (the latent key/value
width), local attention (its span and the local:global layer ratio), NoPE layers, a
linear-attention:softmax layer ratio, learned attention sinks, an output gate on attention and
multi-token prediction. :func:`zoo_table` derives one categorical column per family of choices
(``ffn_kind``, ``kv_kind``, ``layer_mix``, ``qk_norm``) for the adoption plots.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

__all__ = ["ZooEntry", "ZOO", "SUB_1B", "zoo_table", "PUBLISHED", "PublishedConfig", "published_config", "BLOCKS", "SERIAL", "PARALLEL_ONE_NORM",
           "PARALLEL_TWO_NORMS", "UNSTATED", "DERIVED_COLUMNS", "borrowed_shape"]

SERIAL = "serial"  # h = x + Attn(N1(x)); y = h + FFN(N2(h))
PARALLEL_ONE_NORM = "parallel, one norm"  # y = x + Attn(N(x)) + FFN(N(x)): GPT-J, PaLM
PARALLEL_TWO_NORMS = "parallel, two norms"  # y = x + Attn(N1(x)) + FFN(N2(x)): GPT-NeoX, Falcon 40B
UNSTATED = "unstated"  # the source does not say
#: The values of :attr:`ZooEntry.block`.
BLOCKS = (SERIAL, PARALLEL_ONE_NORM, PARALLEL_TWO_NORMS, UNSTATED)


@dataclass(frozen=True)
class ZooEntry:
    """One published model and its architectural choices."""

    name: str  # model (size)
    year: int  # year of the paper / release
    norm: str  # "LayerNorm", "RMSNorm", "LayerNorm (no bias)", ...
    block: str  # "serial", "parallel, one norm" (GPT-J, PaLM), "parallel, two norms" (NeoX), "unstated"
    placement: str  # "post", "pre", "pre+post" (sandwich) or "post (sublayer output)"
    position: str  # "sinusoidal", "learned", "relative", "RoPE", "ALiBi"
    activation: str  # feed-forward: "ReLU", "GELU", "SwiGLU", "GeGLU", "squared ReLU"
    stability: tuple[str, ...]  # tricks the source gives for training stability: z-loss, QK-norm, ...
    params_b: float  # parameters, billions
    n_layers: int | None  # decoder layers (encoder-decoder: per stack)
    d_model: int | None
    n_heads: int | None
    n_kv_heads: int | None  # = n_heads for MHA; 1 = MQA
    attention: str  # "MHA", "MQA", "GQA", plus sliding window / local-global notes
    source: str  # where the facts come from
    extras: tuple[str, ...] = ()  # other departures from the family recipe (e.g. QKV bias), with the reason given
    experts: int | None = None  # routed experts per MoE layer; None: a dense feed-forward
    experts_active: int | None = None  # routed experts each token goes through (top-k)
    shared_experts: int = 0  # experts every token goes through
    active_params_b: float | None = None  # parameters used per token, billions, as published
    latent_kv_rank: int | None = None  # multi-head latent attention: cached latent width; None: not MLA
    window: int | None = None  # span of the local layers (sliding window; Llama 4: chunk)
    local_global: tuple[int, int] | None = None  # (local, global) layers per repeat; (1, 0): all local
    nope_every: int | None = None  # every n-th layer has no position encoding (NoPE)
    linear_softmax: tuple[int, int] | None = None  # (linear-attention, softmax) layers per repeat
    sinks: bool = False  # learned per-head attention-sink logits
    output_gate: bool = False  # sigmoid gate on the attention output
    mtp: int = 0  # multi-token prediction modules (0: next token only)


def _e(name, year, norm, block, placement, position, activation, stability, params_b,
       n_layers, d_model, n_heads, n_kv_heads, source, attention=None, extras=(), **new) -> ZooEntry:
    if block not in BLOCKS:
        raise ValueError(f"block {block!r} of {name!r} must be one of {BLOCKS}")
    if (new.get("experts") is None) != (new.get("experts_active") is None):
        raise ValueError(f"{name!r}: give experts and experts_active together (got "
                         f"{new.get('experts')!r} and {new.get('experts_active')!r})")
    if attention is None:
        if n_kv_heads is None or n_heads is None:
            attention = "MHA"
        elif n_kv_heads == 1:
            attention = "MQA"
        elif n_kv_heads < n_heads:
            attention = "GQA"
        else:
            attention = "MHA"
    return ZooEntry(name, year, norm, block, placement, position, activation, tuple(stability),
                    params_b, n_layers, d_model, n_heads, n_kv_heads, attention, source,
                    tuple(extras), **new)


# Qwen adds biases to the query/key/value projections only; Bai et al. 2023 (Section 2.2) give
# length extrapolation as the reason, not training stability, and Qwen2 keeps them.
_QKV_BIAS = "QKV bias (for length extrapolation)"

#: The corrected model table, oldest first.
ZOO: tuple[ZooEntry, ...] = (
    _e("Transformer (big)", 2017, "LayerNorm", SERIAL, "post", "sinusoidal", "ReLU", (), 0.213,
       6, 1024, 16, 16, "Vaswani et al. 2017, Table 3 (encoder-decoder; 6 layers per stack)"),
    _e("GPT", 2018, "LayerNorm", SERIAL, "post", "learned", "GELU", (), 0.117,
       12, 768, 12, 12, "Radford et al. 2018"),
    _e("GPT-2 (1.5B)", 2019, "LayerNorm", SERIAL, "pre", "learned", "GELU", (), 1.5,
       48, 1600, 25, 25, "Radford et al. 2019; HF gpt2-xl config"),
    _e("T5 (11B)", 2019, "RMSNorm", SERIAL, "pre", "relative", "ReLU", (), 11.0,
       24, 1024, 128, 128, "Raffel et al. 2020 (scale-only LayerNorm without mean subtraction; "
       "relative position buckets; encoder-decoder)"),
    _e("GPT-3 (175B)", 2020, "LayerNorm", SERIAL, "pre", "learned", "GELU", (), 175.0,
       96, 12288, 96, 96, "Brown et al. 2020, Table 2.1",
       attention="MHA, alternating dense and locally banded sparse", local_global=(1, 1)),
    _e("T5 v1.1 (XXL)", 2020, "RMSNorm", SERIAL, "pre", "relative", "GeGLU", (), 11.0,
       24, 4096, 64, 64, "Google T5 v1.1 release notes; HF google/t5-v1_1-xxl config"),
    _e("mT5 (XXL)", 2020, "RMSNorm", SERIAL, "pre", "relative", "GeGLU", (), 13.0,
       24, 4096, 64, 64, "Xue et al. 2021 (T5 v1.1 recipe)"),
    _e("GPT-J (6B)", 2021, "LayerNorm", PARALLEL_ONE_NORM, "pre", "RoPE", "GELU", (), 6.05,
       28, 4096, 16, 16, "Wang & Komatsuzaki 2021; HF EleutherAI/gpt-j-6b config "
       "(RoPE on 64 of 256 head dims)"),
    _e("Gopher (280B)", 2021, "RMSNorm", SERIAL, "pre", "relative", "GELU", (), 280.0,
       80, 16384, 128, 128, "Rae et al. 2021, Table 1 (GPT-2 recipe with RMSNorm and "
       "Transformer-XL relative positions)"),
    _e("LaMDA (137B)", 2022, UNSTATED, UNSTATED, UNSTATED, "relative", "GeGLU", (), 137.0,
       64, 8192, 128, 128, "Thoppilan et al. 2022 (T5 relative attention, gated GELU; norm, "
       "its placement and serial/parallel not stated)"),
    _e("GPT-NeoX (20B)", 2022, "LayerNorm", PARALLEL_TWO_NORMS, "pre", "RoPE", "GELU", (), 20.0,
       44, 6144, 64, 64, "Black et al. 2022 (RoPE on 25% of head dims; input_layernorm and "
       "post_attention_layernorm both read x, use_parallel_residual)"),
    _e("OPT (175B)", 2022, "LayerNorm", SERIAL, "pre", "learned", "ReLU", (), 175.0,
       96, 12288, 96, 96, "Zhang et al. 2022, Table 1"),
    _e("BLOOM (176B)", 2022, "LayerNorm", SERIAL, "pre", "ALiBi", "GELU", ("embedding LayerNorm",),
       176.0, 70, 14336, 112, 112, "BigScience Workshop 2022; HF bigscience/bloom config"),
    _e("PaLM (540B)", 2022, "LayerNorm (no bias)", PARALLEL_ONE_NORM, "pre", "RoPE", "SwiGLU", ("z-loss",),
       540.0, 118, 18432, 48, 1, "Chowdhery et al. 2022, Table 1 and Section 2 (parallel "
       "layers: y = x + MLP(LN(x)) + Attention(LN(x)), one LayerNorm)"),
    _e("Chinchilla (70B)", 2022, "RMSNorm", SERIAL, "pre", "relative", "GELU", (), 70.0,
       80, 8192, 64, 64, "Hoffmann et al. 2022, Table 4 (Gopher architecture)"),
    _e("LLaMA (65B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 65.2,
       80, 8192, 64, 64, "Touvron et al. 2023a, Table 2"),
    _e("Llama 2 (7B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 6.74,
       32, 4096, 32, 32, "Touvron et al. 2023b; HF meta-llama/Llama-2-7b-hf config"),
    _e("Llama 2 (13B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 13.0,
       40, 5120, 40, 40, "Touvron et al. 2023b; HF meta-llama/Llama-2-13b-hf config"),
    _e("Llama 2 (34B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 34.0,
       48, 8192, 64, 8, "Touvron et al. 2023b, Table 1 (GQA for 34B/70B; model not released; "
       "shape of Code Llama 34B, Roziere et al. 2023)"),
    _e("Llama 2 (70B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 69.0,
       80, 8192, 64, 8, "Touvron et al. 2023b; HF meta-llama/Llama-2-70b-hf config"),
    _e("Qwen (14B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 14.0,
       40, 5120, 40, 40, "Bai et al. 2023, Table 1 and Section 2.2 (biases only in QKV)",
       extras=(_QKV_BIAS,)),
    _e("Falcon (40B)", 2023, "LayerNorm", PARALLEL_TWO_NORMS, "pre", "RoPE", "GELU", (), 40.0,
       60, 8192, 128, 8, "Almazrouei et al. 2023; HF tiiuae/falcon-40b config "
       "(new_decoder_architecture: ln_attn and ln_mlp, two norms on the same input)"),
    _e("Mistral (7B)", 2023, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 7.24,
       32, 4096, 32, 8, "Jiang et al. 2023, Table 1 (dense; Mixtral is the MoE)",
       attention="GQA + sliding window 4096", window=4096, local_global=(1, 0)),
    _e("Mixtral (8x7B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 46.7,
       32, 4096, 32, 8, "Jiang et al. 2024 (8 experts, top-2; 12.9B active parameters per token)",
       experts=8, experts_active=2, active_params_b=12.9),
    _e("OLMo (7B)", 2024, "LayerNorm (non-parametric)", SERIAL, "pre", "RoPE", "SwiGLU", (), 6.9,
       32, 4096, 32, 32, "Groeneveld et al. 2024, Table 1"),
    _e("DeepSeek LLM (67B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 67.0,
       95, 8192, 64, 8, "DeepSeek-AI 2024, Table 2"),
    _e("Yi (34B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 34.0,
       60, 7168, 56, 8, "Young et al. 2024, Table 1"),
    _e("Gemma 2 (27B)", 2024, "RMSNorm", SERIAL, "pre+post", "RoPE", "GeGLU",
       ("logit soft-capping", "pre+post norm"), 27.2, 46, 4608, 32, 16,
       "Gemma Team 2024, Table 1; HF google/gemma-2-27b config",
       attention="GQA, alternating local (4096) / global", window=4096, local_global=(1, 1)),
    _e("Phi-3-small (7B)", 2024, "LayerNorm", SERIAL, "pre", "RoPE", "GeGLU", (), 7.4,
       32, 4096, 32, 8, "Abdin et al. 2024; HF microsoft/Phi-3-small-8k-instruct config",
       attention="GQA, alternating dense / block-sparse"),
    _e("Llama 3 (70B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 70.6,
       80, 8192, 64, 8, "Dubey et al. 2024, Table 3 (RoPE base 500000)"),
    _e("Nemotron-4 (340B)", 2024, "LayerNorm", SERIAL, "pre", "RoPE", "squared ReLU", (), 340.0,
       96, 18432, 96, 8, "NVIDIA 2024, Nemotron-4 340B technical report, Table 1"),
    _e("Qwen2 (72B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 72.7,
       80, 8192, 64, 8, "Yang et al. 2024, Table 1 and Section 2.2 (QKV bias kept from Qwen)",
       extras=(_QKV_BIAS,)),
    _e("Llama 3.1 (405B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 405.0,
       126, 16384, 128, 8, "Dubey et al. 2024, Table 3"),
    _e("Llama 3.2 (1B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 1.24,
       16, 2048, 32, 8, "Meta 2024, Llama 3.2 model card; HF meta-llama/Llama-3.2-1B config "
       "(tied embeddings)", extras=("tied input and output embeddings",)),
    _e("DeepSeek-V3 (671B)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 671.0,
       61, 7168, 128, None, "DeepSeek-AI 2024b (DeepSeek-V3 technical report), Section 2 and "
       "4.2; HF transformers DeepseekV3Config defaults (first 3 layers dense; sigmoid router with "
       "auxiliary-loss-free bias balancing; RoPE on a decoupled 64-dim key)",
       attention="MLA (latent 512) + decoupled RoPE key", experts=256, experts_active=8,
       shared_experts=1, active_params_b=37.0, latent_kv_rank=512, mtp=1),
    _e("OLMo 2 (7B)", 2024, "RMSNorm", SERIAL, "post (sublayer output)", "RoPE", "SwiGLU",
       ("z-loss", "QK-norm"), 7.3, 32, 4096, 32, 32,
       "OLMo et al. 2024 (norm on attention/MLP outputs inside the residual)"),
    _e("Gemma 3 (27B)", 2025, "RMSNorm", SERIAL, "pre+post", "RoPE", "GeGLU",
       ("QK-norm", "pre+post norm"), 27.0, 62, 5376, 32, 16,
       "Gemma Team 2025; HF google/gemma-3-27b-pt config",
       attention="GQA, 5 local (1024) : 1 global", window=1024, local_global=(5, 1)),
    _e("SmolLM2 (1.7B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 1.7,
       24, 2048, 32, 32, "Allal et al. 2025; HF HuggingFaceTB/SmolLM2-1.7B config"),
    _e("Qwen3 (32B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", ("QK-norm",), 32.8,
       64, 5120, 64, 8, "Yang et al. 2025 (Qwen3 technical report), Table 1 and Section 2 "
       "(QKV bias dropped, QK-norm added for stable training)"),
    _e("Qwen3-MoE (235B-A22B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", ("QK-norm",),
       235.0, 94, 4096, 64, 4, "Yang et al. 2025 (Qwen3 technical report), Table 2 "
       "(128 experts, 8 per token, no shared expert)", experts=128, experts_active=8,
       active_params_b=22.0),
    _e("Llama 4 Scout (17B-16E)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 109.0,
       48, 5120, 40, 8, "Meta 2025, Llama 4 model card; HF transformers Llama4TextConfig "
       "defaults (16 routed experts, top-1, plus a shared one; no_rope_layer_interval 4; "
       "attention_chunk_size 8192 on the RoPE layers; use_qk_norm)",
       attention="GQA, 3 chunked-local (8192) : 1 global", extras=("QK-norm on the RoPE layers",),
       experts=16, experts_active=1, shared_experts=1, active_params_b=17.0, window=8192,
       local_global=(3, 1), nope_every=4),
    _e("SmolLM3 (3B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 3.08,
       36, 2048, 16, 4, "Hugging Face 2025, SmolLM3 release; HuggingFaceTB/SmolLM3-3B config.json "
       "(no_rope_layer_interval 4; RoPE base 5e6; tied embeddings)", nope_every=4,
       extras=("tied input and output embeddings",)),
    _e("gpt-oss (120B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 116.8,
       36, 2880, 64, 8, "OpenAI 2025, gpt-oss-120b and gpt-oss-20b model card; openai/gpt-oss-120b "
       "config.json (128 experts, top-4; sliding window 128 on every other layer; "
       "learned sinks; 5.1B active parameters per token)",
       attention="GQA, 1 local (128) : 1 global", extras=("biases in the attention projections",),
       experts=128, experts_active=4, active_params_b=5.1, window=128, local_global=(1, 1),
       sinks=True),
    _e("gpt-oss (20B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 20.9,
       24, 2880, 64, 8, "OpenAI 2025, gpt-oss model card; openai/gpt-oss-20b config.json (32 "
       "experts, top-4; 3.6B active parameters per token)",
       attention="GQA, 1 local (128) : 1 global", extras=("biases in the attention projections",),
       experts=32, experts_active=4, active_params_b=3.6, window=128, local_global=(1, 1),
       sinks=True),
    _e("Kimi K2 (1T)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", ("QK-clip",), 1040.0,
       61, 7168, 64, None, "Kimi Team 2025 (Kimi K2 technical report), Section 2 (DeepSeek-V3's "
       "architecture with 384 experts, 64 heads and 1 dense layer; QK-clip in the MuonClip "
       "optimizer bounds attention logits)", attention="MLA (latent 512) + decoupled RoPE key",
       experts=384, experts_active=8, shared_experts=1, active_params_b=32.0, latent_kv_rank=512),
    _e("Qwen3-Next (80B-A3B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU",
       ("QK-norm", "zero-centred, weight-decayed norm weights"), 80.0, 48, 2048, 16, 2,
       "Qwen Team 2025, Qwen3-Next release; Qwen/Qwen3-Next-80B-A3B-Instruct config.json (3 Gated "
       "DeltaNet layers : 1 gated-attention layer; 512 experts, 10 per token, plus a shared one; "
       "RoPE on 25% of head dims)", attention="GQA on 1 layer in 4, Gated DeltaNet on the rest",
       extras=("RoPE on a quarter of each head's dims",), experts=512, experts_active=10,
       shared_experts=1, active_params_b=3.0, linear_softmax=(3, 1), output_gate=True, mtp=1),
    _e("OLMo 3 (7B)", 2025, "RMSNorm", SERIAL, "post (sublayer output)", "RoPE", "SwiGLU",
       ("QK-norm",), 7.3, 32, 4096, 32, 32, "OLMo Team 2025 (OLMo 3); HF transformers Olmo3Config "
       "defaults (OLMo 2's block; sliding window 4096 on 3 of every 4 layers)",
       attention="MHA, 3 local (4096) : 1 global", window=4096, local_global=(3, 1)),
    _e("Qwen3.5 (35B-A3B)", 2026, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", ("QK-norm",), 35.0,
       40, 2048, 16, 2, "Qwen Team 2026, Qwen3.5 release; HF transformers Qwen3_5MoeTextConfig "
       "defaults, the language model of Qwen/Qwen3.5-35B-A3B (Qwen3-Next's layout: 3 Gated "
       "DeltaNet : 1 gated attention; 256 experts, 8 per token, plus a shared one; its "
       "checkpoints carry mtp.* weights, which transformers skips)",
       attention="GQA on 1 layer in 4, Gated DeltaNet on the rest",
       extras=("RoPE on a quarter of each head's dims", "vision encoder (not counted here)"),
       experts=256, experts_active=8, shared_experts=1, active_params_b=3.0,
       linear_softmax=(3, 1), output_gate=True, mtp=1),
    _e("Mistral Small 4 (119B)", 2026, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 119.0,
       36, 4096, 32, None, "Mistral AI 2026, Mistral Small 4 release; HF transformers "
       "Mistral4Config defaults, mistralai/Mistral-Small-4-119B-2603 (latent attention with a "
       "256-wide key/value latent; 128 experts, 4 per token, plus a shared one; active count "
       "not given there)", attention="MLA (latent 256) + decoupled RoPE key", experts=128,
       experts_active=4, shared_experts=1, latent_kv_rank=256),
)

#: Published models under about a billion parameters, the sizes where the embedding's share
#: and the depth-versus-width question are argued (chapters 13 and 14). They are kept apart from
#: :data:`ZOO`, which holds one row per family for the adoption counts; every row has a
#: released config in :data:`PUBLISHED` that a test checks it against.
SUB_1B: tuple[ZooEntry, ...] = (
    _e("MobileLLM (125M)", 2024, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 0.125,
       30, 576, 9, 3, "Liu et al. 2024 (MobileLLM), Table 9; HF facebook/MobileLLM-125M config "
       "(deep and thin by design; shared input and output embeddings)",
       extras=("tied input and output embeddings",)),
    _e("SmolLM2 (135M)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", (), 0.135,
       30, 576, 9, 3, "Allal et al. 2025; HF HuggingFaceTB/SmolLM2-135M config",
       extras=("tied input and output embeddings",)),
    _e("Gemma 3 (270M)", 2025, "RMSNorm", SERIAL, "pre+post", "RoPE", "GeGLU",
       ("QK-norm", "pre+post norm"), 0.268, 18, 640, 4, 1,
       "Gemma Team 2025, Gemma 3 270M release; HF google/gemma-3-270m config",
       attention="MQA, 5 local (512) : 1 global", window=512, local_global=(5, 1),
       extras=("tied input and output embeddings",)),
    _e("Qwen3 (0.6B)", 2025, "RMSNorm", SERIAL, "pre", "RoPE", "SwiGLU", ("QK-norm",), 0.596,
       28, 1024, 16, 8, "Yang et al. 2025 (Qwen3 technical report), Table 1; HF Qwen/Qwen3-0.6B "
       "config", extras=("tied input and output embeddings",)),
)

#: Columns :func:`zoo_table` derives from the fields, one per family of choices (for the
#: adoption plots): dense or mixture of experts, the key/value layout, how the layers mix local,
#: global and linear attention, and whether queries and keys are normalised.
DERIVED_COLUMNS = ("aspect", "d_model_per_head", "ffn_kind", "kv_kind", "layer_mix", "qk_norm",
                   "moe", "pattern")


def _kv_kind(e: ZooEntry) -> str:
    if e.latent_kv_rank is not None:
        return "MLA"
    if e.n_kv_heads is None or e.n_heads is None or e.n_kv_heads == e.n_heads:
        return "MHA"
    return "MQA" if e.n_kv_heads == 1 else "GQA"


def _layer_mix(e: ZooEntry) -> str:
    if e.linear_softmax is not None:
        return "linear + softmax"
    if e.local_global is None:
        return "all global"
    return "all local" if e.local_global[1] == 0 else "local + global"


def _moe(e: ZooEntry) -> str:
    if e.experts is None:
        return "-"
    shared = f" + {e.shared_experts} shared" if e.shared_experts else ""
    return f"{e.experts_active} of {e.experts}{shared}"


def _pattern(e: ZooEntry) -> str:
    parts = []
    if e.linear_softmax is not None:
        parts.append(f"{e.linear_softmax[0]} linear : {e.linear_softmax[1]} softmax")
    if e.local_global is not None:
        span = f" ({e.window})" if e.window else ""
        parts.append(f"all local{span}" if e.local_global[1] == 0
                     else f"{e.local_global[0]} local{span} : {e.local_global[1]} global")
    if e.nope_every is not None:
        parts.append(f"NoPE every {e.nope_every}")
    return ", ".join(parts) or "-"



def borrowed_shape(source: str) -> str | None:
    """The model whose depth and width a row borrows, named in its ``source`` ("model not released;
    shape of Code Llama 34B, ..." -> "Code Llama 34B"), or None for a row with its own shape."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a zoo row's source text (str), got {type(source).__name__}")
    if "not released" not in source or "shape of " not in source:
        return None
    return source.split("shape of ")[-1].split(",")[0].strip()


def zoo_table(entries: tuple[ZooEntry, ...] | None = None):
    """The zoo as a ``pandas.DataFrame`` (one row per model, columns = :class:`ZooEntry` fields;
    the tuples ``stability`` and ``extras`` are joined with ", ").

    The ratios ``local_global`` and ``linear_softmax`` become ``"a:b"`` strings. Adds the
    :data:`DERIVED_COLUMNS`: ``aspect`` (d_model / n_layers), ``d_model_per_head`` (d_model /
    n_heads; the real head size differs in a few models, e.g. PaLM 540B uses 256), ``ffn_kind``
    ("dense" or "MoE"), ``kv_kind`` ("MHA", "GQA", "MQA" or "MLA"), ``layer_mix`` ("all global",
    "all local", "local + global" or "linear + softmax"), ``qk_norm`` ("yes" when the stability
    tricks or the extras name QK-norm), and the readable summaries ``moe`` ("8 of 256 + 1 shared")
    and ``pattern`` ("5 local (1024) : 1 global, NoPE every 4").
    """
    import pandas as pd

    entries = ZOO if entries is None else entries
    rows = [asdict(e) for e in entries]
    for r, e in zip(rows, entries):
        r["stability"] = ", ".join(r["stability"])
        r["extras"] = ", ".join(r["extras"])
        for key in ("local_global", "linear_softmax"):
            r[key] = None if r[key] is None else f"{r[key][0]}:{r[key][1]}"
        r["ffn_kind"] = "dense" if e.experts is None else "MoE"
        r["kv_kind"] = _kv_kind(e)
        r["layer_mix"] = _layer_mix(e)
        r["qk_norm"] = "yes" if any("QK-norm" in t for t in e.stability + e.extras) else "no"
        r["moe"] = _moe(e)
        r["pattern"] = _pattern(e)
    df = pd.DataFrame(rows, columns=[f.name for f in fields(ZooEntry)] + list(DERIVED_COLUMNS[2:]))
    df["aspect"] = df["d_model"] / df["n_layers"]
    df["d_model_per_head"] = df["d_model"] / df["n_heads"]
    return df[[f.name for f in fields(ZooEntry)] + list(DERIVED_COLUMNS)]


from .published import PUBLISHED, PublishedConfig, published_config  # noqa: E402  (re-exported)
