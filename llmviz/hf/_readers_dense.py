"""Family readers for :func:`llmviz.hf.config_from_hf`: dense decoders that are Llama's block
with a family's own choices (biases, interleaved or partial rotary, a sandwich of norms, a
plain MLP, LayerNorm). Each states what differs from Llama and checks the fields that would
change the computation. The shared field readers are in :mod:`._readers`.
"""

from __future__ import annotations

from typing import Any

from ._layout import FUSED_GATE_UP, stores
from ._readers import activation, attr, check_glu_silu, decoder, every_layer_window, gemma2, llama, require

__all__ = ["READERS_DENSE", "arcee", "cwm", "ernie4_5", "exaone4", "glm", "glm4", "helium", "jais2",
           "ministral", "relu2_mlp", "seed_oss", "stablelm", "starcoder2", "vaultgemma"]


@stores(fused=FUSED_GATE_UP)
def glm(c: Any) -> dict[str, Any]:
    """GLM-4 (``glm``): q/k/v biased, o_proj not; GPT-J-pair (interleaved) RoPE on the first
    ``partial_rotary_factor`` of each head; Phi-3's fused ``gate_up_proj``."""
    f = check_glu_silu(c, decoder(c, allow_partial=True))
    f.update(rope_layout="interleaved", o_bias=False)
    return f


_GLM4_NORMS = {"input_layernorm": "attn_norm", "post_self_attn_layernorm": "post_attn_norm",
               "post_attention_layernorm": "ffn_norm", "post_mlp_layernorm": "post_ffn_norm"}


@stores(fused=FUSED_GATE_UP, norms=_GLM4_NORMS)
def glm4(c: Any) -> dict[str, Any]:
    """GLM-4-0414 (``glm4``): GLM's attention and MLP with a norm after each sublayer too (a
    sandwich: ``post_self_attn_layernorm``, ``post_mlp_layernorm``)."""
    f = glm(c)
    f["placement"] = "sandwich"
    return f


def ernie4_5(c: Any) -> dict[str, Any]:
    """ERNIE 4.5 dense: interleaved RoPE; ``use_bias`` puts biases on every projection."""
    f = check_glu_silu(c, decoder(c))
    bias = bool(attr(c, "use_bias", False))
    f.update(rope_layout="interleaved", bias=bias, attn_bias=bias)
    return f


def seed_oss(c: Any) -> dict[str, Any]:
    """Seed-OSS: q/k/v biases (``attention_bias``) apart from the o_proj bias
    (``attention_out_bias``); feed-forward biases from ``mlp_bias``."""
    f = llama(c)
    f["o_bias"] = bool(attr(c, "attention_out_bias", False))
    return f


def helium(c: Any) -> dict[str, Any]:
    """Helium: interleaved RoPE, q/k/v biases from ``attention_bias``, o_proj never biased.
    Its RMSNorm multiplies by the weight in float32: llmviz's equals it in float32."""
    f = llama(c)
    f.update(rope_layout="interleaved", o_bias=False)
    return f


def relu2_mlp(c: Any, f: dict) -> dict:
    """Nemotron's feed-forward (Arcee, Jais 2): ``down(act(up(x)))``, no gate, ``mlp_bias``."""
    f.update(ffn="mlp", bias=bool(attr(c, "mlp_bias", False)))
    if f["activation"] is None:
        raise NotImplementedError(f"{c.model_type}: hidden_act={c.hidden_act!r} is not supported")
    return f


def arcee(c: Any) -> dict[str, Any]:
    """Arcee (AFM): Llama's attention, a plain MLP with squared ReLU (``hidden_act``)."""
    f = relu2_mlp(c, decoder(c))
    f["attn_bias"] = bool(attr(c, "attention_bias", False))
    return f


def jais2(c: Any) -> dict[str, Any]:
    """Jais 2: LayerNorm (with biases), biased attention, Nemotron's ungated MLP."""
    f = relu2_mlp(c, decoder(c))
    f.update(norm="layer", attn_bias=bool(attr(c, "attention_bias", False)))
    return f


def ministral(c: Any) -> dict[str, Any]:
    """Ministral: Mistral's block, sliding or full attention per layer (``layer_types``)."""
    return check_glu_silu(c, decoder(c))


def cwm(c: Any) -> dict[str, Any]:
    """CWM: Llama's block, sliding and full layers from ``layer_types``, Llama 3 RoPE."""
    return check_glu_silu(c, decoder(c))


_VAULT_NORMS = {"input_layernorm": "attn_norm", "pre_feedforward_layernorm": "ffn_norm"}


@stores(norms=_VAULT_NORMS)
def vaultgemma(c: Any) -> dict[str, Any]:
    """VaultGemma: Gemma 2 without the two post-sublayer norms (plain pre-norm)."""
    require(c, "use_bidirectional_attention", (False, None), "llmviz is causal")
    f = gemma2(c)
    f["placement"] = "pre"
    return f


@stores(renames={"mlp.up_proj": "mlp.c_fc", "mlp.down_proj": "mlp.c_proj"})
def starcoder2(c: Any) -> dict[str, Any]:
    """StarCoder 2: LayerNorm, a plain MLP (``c_fc``, ``c_proj``, GELU-tanh), ``use_bias`` on
    every projection, ``sliding_window`` on every layer when set."""
    f = decoder(c)
    bias = bool(attr(c, "use_bias", True))
    f.update(norm="layer", ffn="mlp", bias=bias, attn_bias=bias, activation=activation(c, "hidden_act"),
             layer_windows=every_layer_window(c))
    return f


def stablelm(c: Any) -> dict[str, Any]:
    """StableLM: LayerNorm, partial rotary, q/k/v biases from ``use_qkv_bias`` (o_proj never),
    and with ``use_parallel_residual`` one norm feeding attention and MLP side by side."""
    require(c, "qk_layernorm", (False, None), "a separate LayerNorm per head on q and k; llmviz's "
            "QK-norm shares one weight across heads")
    f = check_glu_silu(c, decoder(c, allow_partial=True))
    f.update(norm="layer", attn_bias=bool(attr(c, "use_qkv_bias", False)), o_bias=False,
             parallel=bool(attr(c, "use_parallel_residual", False)))
    return f


def exaone4(c: Any) -> dict[str, Any]:
    """EXAONE 4: OLMo 2's block (norms on the sublayer outputs) with per-head QK-norm; with a
    ``sliding_window``, only the sliding layers rotate and the full layers are NoPE."""
    f = check_glu_silu(c, decoder(c))
    f.update(placement="post_sublayer", qk_norm="rms", qk_norm_eps=float(c.rms_norm_eps),
             qk_norm_scope="head")
    if getattr(c, "sliding_window", None) is not None:
        types = list(getattr(c, "layer_types", None) or ["full_attention"] * c.num_hidden_layers)
        f["nope_layers"] = tuple(i for i, t in enumerate(types) if t != "sliding_attention") or None
    return f


#: model_type -> reader, for the families above.
READERS_DENSE = {"glm": glm, "glm4": glm4, "ernie4_5": ernie4_5, "seed_oss": seed_oss,
                 "helium": helium, "arcee": arcee, "jais2": jais2, "ministral": ministral,
                 "cwm": cwm, "internlm3": llama, "iquestcoder": llama, "exaone": llama, "vaultgemma": vaultgemma,
                 "starcoder2": starcoder2, "stablelm": stablelm, "exaone4": exaone4}
