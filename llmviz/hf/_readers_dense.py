"""Family readers for :func:`llmviz.hf.config_from_hf`: dense decoders that are Llama's block
with a family's own choices (biases, interleaved or partial rotary, a sandwich of norms, a
plain MLP, LayerNorm). Each states what differs from Llama and checks the fields that would
change the computation. The shared field readers are in :mod:`._readers`.
"""

from __future__ import annotations

from typing import Any

from ._layout import FUSED_GATE_UP, stores
from ._readers import activation, attr, check_glu_silu, decoder, every_layer_window, gemma2, llama, require
from .rope import rope_parameters_of, rope_spec

__all__ = ["READERS_DENSE", "arcee", "cwm", "ernie4_5", "exaone4", "bloom", "falcon", "glm", "glm4", "gpt_bigcode", "gpt_neo", "gpt_neox", "helium", "jais2", "persimmon",
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


@stores(prefix="gpt_neox.", qkv_grouped="attention.query_key_value",
        top={"embed_tokens.weight": "embed_in.weight", "norm.weight": "final_layer_norm.weight",
             "norm.bias": "final_layer_norm.bias"},
        renames={"self_attn.o_proj": "attention.dense", "mlp.up_proj": "mlp.dense_h_to_4h",
                 "mlp.down_proj": "mlp.dense_4h_to_h"})
def gpt_neox(c: Any) -> dict[str, Any]:
    """GPT-NeoX (Pythia): LayerNorm, partial rotary (rotate-half on the first
    ``partial_rotary_factor`` of each head), q/k/v fused per head in ``query_key_value``,
    biases on attention (``attention_bias``) and on the plain MLP (always). Serial blocks only:
    ``use_parallel_residual=True`` (the released models) feeds attention and MLP through two
    different LayerNorms of the same input, and llmviz's parallel block has one norm."""
    require(c, "use_parallel_residual", False, "attention and MLP read two different LayerNorms "
            "of the same input (input_layernorm, post_attention_layernorm); llmviz's parallel "
            "block shares one norm")
    f = decoder(c, allow_partial=True)
    if f["activation"] is None:
        raise NotImplementedError(f"gpt_neox: hidden_act={c.hidden_act!r} is not supported")
    f.update(norm="layer", ffn="mlp", bias=True, attn_bias=bool(attr(c, "attention_bias", True)))
    return f


@stores(prefix="transformer.", stored_layers="h", qkv_grouped="self_attention.query_key_value",
        top={"embed_tokens.weight": "word_embeddings.weight", "embed_norm.weight": "word_embeddings_layernorm.weight",
             "embed_norm.bias": "word_embeddings_layernorm.bias", "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias"},
        renames={"self_attn.o_proj": "self_attention.dense", "mlp.up_proj": "mlp.dense_h_to_4h",
                 "mlp.down_proj": "mlp.dense_4h_to_h"})
def bloom(c: Any) -> dict[str, Any]:
    """BLOOM: ALiBi (no position table), a LayerNorm right after the token embedding, pre-norm
    LayerNorm blocks, q/k/v fused per head, a 4C plain MLP with GELU's tanh form, biases on
    every projection, the output head tied to the embedding."""
    require(c, "apply_residual_connection_post_layernorm", (False, None), "the residual branches "
            "start from the normed stream; llmviz's residual stream is never normed")
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.n_layer, n_heads=c.n_head,
        d_ff=4 * c.hidden_size, max_seq_len=int(attr(c, "seq_length", 2048)), position="alibi",
        norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre", embed_norm=True,
        ffn="mlp", activation="gelu_tanh", bias=True,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
    )


@stores(prefix="transformer.", stored_layers="h", qkv_grouped="self_attention.query_key_value",
        top={"embed_tokens.weight": "word_embeddings.weight", "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias"},
        renames={"self_attn.o_proj": "self_attention.dense", "mlp.up_proj": "mlp.dense_h_to_4h",
                 "mlp.down_proj": "mlp.dense_4h_to_h"})
def falcon(c: Any) -> dict[str, Any]:
    """Falcon: LayerNorm, RoPE, a plain MLP (``activation``), biases from ``bias``; attention and
    MLP side by side from one norm (``parallel_attn``) or one after the other; q/k/v fused by
    key/value head: one shared key/value head (``multi_query``, Falcon-7B), one per head, or
    ``num_kv_heads`` groups (``new_decoder_architecture`` with one norm)."""
    require(c, "alibi", (False, None), "Falcon's ALiBi variant; llmviz reads Falcon with RoPE")
    new = bool(attr(c, "new_decoder_architecture", False))
    if new:
        require(c, "num_ln_in_parallel_attn", 1, "two LayerNorms (ln_attn, ln_mlp) feed attention and "
                "MLP side by side; llmviz's parallel block shares one norm")
        require(c, "parallel_attn", True, "the new decoder architecture is read with parallel blocks")
    act = activation(c, "activation")
    head_dim = c.hidden_size // c.num_attention_heads
    kv = (attr(c, "num_kv_heads", c.num_attention_heads) if new
          else 1 if attr(c, "multi_query", True) else c.num_attention_heads)
    rope = rope_spec(rope_parameters_of(c), head_dim=head_dim, max_position_embeddings=c.max_position_embeddings,
                     where="falcon rope_parameters")
    bias = bool(attr(c, "bias", False))
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_hidden_layers,
        n_heads=c.num_attention_heads, n_kv_heads=kv, head_dim=head_dim,
        d_ff=attr(c, "ffn_hidden_size", 4 * c.hidden_size), max_seq_len=c.max_position_embeddings,
        position="rope", rope_base=rope.base, rope_scaling=rope.scaling, rope_layout="half",
        norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre",
        parallel=bool(attr(c, "parallel_attn", True)), ffn="mlp", activation=act, bias=bias,
        attn_bias=bias, tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
    )


@stores(qkv_grouped="self_attn.query_key_value", top={"norm.weight": "final_layernorm.weight",
                                                       "norm.bias": "final_layernorm.bias"},
        renames={"self_attn.o_proj": "self_attn.dense", "self_attn.q_norm": "self_attn.q_layernorm",
                 "self_attn.k_norm": "self_attn.k_layernorm", "mlp.up_proj": "mlp.dense_h_to_4h",
                 "mlp.down_proj": "mlp.dense_4h_to_h"})
def persimmon(c: Any) -> dict[str, Any]:
    """Persimmon: LayerNorm blocks, q/k/v fused per head (biased), per-head LayerNorm QK-norm
    (``qk_layernorm``, one weight and bias shared by the heads) before partial rotary, and a
    biased plain MLP with squared ReLU."""
    f = relu2_mlp(c, decoder(c, allow_partial=True))
    f.update(norm="layer", bias=True, attn_bias=True)
    if attr(c, "qk_layernorm", False):
        f.update(qk_norm="layer", qk_norm_eps=float(c.layer_norm_eps), qk_norm_scope="head")
    return f


@stores(prefix="transformer.", stored_layers="h", qkv_grouped="attn.c_attn",
        norms={"ln_1": "attn_norm", "ln_2": "ffn_norm"},
        top={"embed_tokens.weight": "wte.weight", "embed_positions.weight": "wpe.weight",
             "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias"},
        renames={"self_attn.o_proj": "attn.c_proj", "mlp.up_proj": "mlp.c_fc", "mlp.down_proj": "mlp.c_proj"})
def gpt_bigcode(c: Any) -> dict[str, Any]:
    """GPTBigCode (SantaCoder, StarCoder 1): GPT-2's block in ``nn.Linear`` layers, with one
    shared key/value head (``multi_query``: ``c_attn`` holds q | k | v) or one per head."""
    require(c, "add_cross_attention", (False, None), "llmviz models are decoder-only")
    f = dict(
        vocab_size=c.vocab_size, d_model=c.n_embd, n_layers=c.n_layer, n_heads=c.n_head,
        n_kv_heads=1 if attr(c, "multi_query", True) else c.n_head,
        d_ff=attr(c, "n_inner", 4 * c.n_embd), max_seq_len=c.n_positions, position="learned",
        norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre", ffn="mlp",
        activation=activation(c, "activation_function"), bias=True,
        tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
        query_pre_attn_scalar=None if attr(c, "scale_attn_weights", True) else 1.0,
    )
    return f


_GPT_NEO = {"self_attn.q_proj": "attn.attention.q_proj", "self_attn.k_proj": "attn.attention.k_proj",
            "self_attn.v_proj": "attn.attention.v_proj", "self_attn.o_proj": "attn.attention.out_proj",
            "mlp.up_proj": "mlp.c_fc", "mlp.down_proj": "mlp.c_proj"}


@stores(prefix="transformer.", stored_layers="h", norms={"ln_1": "attn_norm", "ln_2": "ffn_norm"},
        top={"embed_tokens.weight": "wte.weight", "embed_positions.weight": "wpe.weight",
             "norm.weight": "ln_f.weight", "norm.bias": "ln_f.bias"}, renames=_GPT_NEO)
def gpt_neo(c: Any) -> dict[str, Any]:
    """GPT-Neo: GPT-2's block with separate bias-free q/k/v (out_proj biased), scores not
    divided by sqrt(D), and ``"local"`` layers (``attention_layers``) that see the last
    ``window_size`` keys."""
    types = list(c.attention_layers)
    unknown = sorted(set(types) - {"global", "local"})
    if unknown or len(types) != c.num_layers:
        raise ValueError(f"gpt_neo: attention_layers={types!r}; expected 'global' or 'local' for each "
                         f"of the {c.num_layers} layers")
    windows = tuple(int(c.window_size) if t == "local" else None for t in types)
    return dict(
        vocab_size=c.vocab_size, d_model=c.hidden_size, n_layers=c.num_layers, n_heads=c.num_heads,
        d_ff=attr(c, "intermediate_size", 4 * c.hidden_size), max_seq_len=c.max_position_embeddings,
        position="learned", norm="layer", norm_eps=float(c.layer_norm_epsilon), placement="pre",
        ffn="mlp", activation=activation(c, "activation_function"), bias=True, attn_bias=False,
        o_bias=True, tie_embeddings=bool(getattr(c, "tie_word_embeddings", True)),
        query_pre_attn_scalar=1.0, layer_windows=windows if any(windows) else None,
    )


#: model_type -> reader, for the families above.
READERS_DENSE = {"glm": glm, "glm4": glm4, "ernie4_5": ernie4_5, "seed_oss": seed_oss,
                 "helium": helium, "arcee": arcee, "jais2": jais2, "ministral": ministral,
                 "cwm": cwm, "internlm3": llama, "iquestcoder": llama, "exaone": llama, "vaultgemma": vaultgemma,
                 "starcoder2": starcoder2, "stablelm": stablelm, "exaone4": exaone4,
                 "gpt_neox": gpt_neox, "bloom": bloom,
                 "falcon": falcon, "persimmon": persimmon,
                 "gpt_bigcode": gpt_bigcode, "gpt_neo": gpt_neo}
