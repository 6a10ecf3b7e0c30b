"""Family readers for :func:`llmviz.hf.config_from_hf`: the GPT-2-era families that store q, k
and v fused by head or by key/value group and name their modules their own way: GPT-NeoX
(serial, or parallel with two norms), BLOOM (ALiBi), Falcon (multi-query, parallel), Persimmon (LayerNorm QK-norm),
GPTBigCode (multi-query GPT-2) and GPT-Neo (local layers). Their :class:`~._layout.Layout`
declarations carry the names (``qkv_grouped``, ``top``, ``stored_layers``, ``renames``).
"""

from __future__ import annotations

from typing import Any

from ..model.parallel_norms import parallel_two_norms
from ._layout import stores
from ._readers import activation, attr, decoder, require
from ._readers_dense import relu2_mlp
from .rope import rope_parameters_of, rope_spec

__all__ = ["READERS_CLASSIC", "bloom", "falcon", "gpt_bigcode", "gpt_neo", "gpt_neox", "persimmon"]


def _neox_norms(model: Any, c: Any) -> Any:
    """GPT-NeoX's parallel blocks read two norms of the same input: one per branch."""
    return parallel_two_norms(model) if attr(c, "use_parallel_residual", True) else model


@stores(prefix="gpt_neox.", qkv_grouped="attention.query_key_value", adapt=_neox_norms,
        top={"embed_tokens.weight": "embed_in.weight", "norm.weight": "final_layer_norm.weight",
             "norm.bias": "final_layer_norm.bias"},
        renames={"self_attn.o_proj": "attention.dense", "mlp.up_proj": "mlp.dense_h_to_4h",
                 "mlp.down_proj": "mlp.dense_4h_to_h"})
def gpt_neox(c: Any) -> dict[str, Any]:
    """GPT-NeoX (Pythia): LayerNorm, partial rotary (rotate-half on the first
    ``partial_rotary_factor`` of each head), q/k/v fused per head in ``query_key_value``,
    biases on attention (``attention_bias``) and on the plain MLP (always). With
    ``use_parallel_residual`` (the released models) attention and MLP run side by side, each from
    its own LayerNorm of the block's input (``input_layernorm``, ``post_attention_layernorm``):
    the config says ``parallel=True`` and the built model's blocks are
    :class:`~llmviz.model.parallel_norms.TwoNormParallelBlock`; otherwise the blocks are serial."""
    f = decoder(c, allow_partial=True)
    if f["activation"] is None:
        raise NotImplementedError(f"gpt_neox: hidden_act={c.hidden_act!r} is not supported")
    f.update(norm="layer", ffn="mlp", bias=True, attn_bias=bool(attr(c, "attention_bias", True)),
             parallel=bool(attr(c, "use_parallel_residual", True)))
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
READERS_CLASSIC = {"gpt_neox": gpt_neox, "bloom": bloom, "falcon": falcon, "persimmon": persimmon,
                   "gpt_bigcode": gpt_bigcode, "gpt_neo": gpt_neo}
