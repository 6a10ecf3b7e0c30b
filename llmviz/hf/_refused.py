"""Every causal-LM ``model_type`` transformers ships that llmviz does not load, with the reason.

:data:`REFUSED` maps each one to what llmviz would lose or lacks; :func:`llmviz.hf.config_from_hf`
raises ``NotImplementedError`` with that reason before reading a tensor. A test checks that every
``model_type`` of transformers' causal-LM auto mapping, and of every other ``*ForCausalLM`` class it
ships (Mistral Small 4's sits in the image-text mapping), is either loaded (``SUPPORTED``) or here.
Reasons marked "no reader yet" name families whose modeling code has not been compared with
llmviz's components: a loader refuses what it has not checked.
"""

from __future__ import annotations

__all__ = ["REFUSED"]

_ENCODER = ("an encoder or encoder-decoder architecture (its causal-LM class is a bidirectional "
            "encoder run as a decoder, or the decoder half of a sequence-to-sequence model); "
            "llmviz loads decoder-only language models")
_MULTIMODAL = "a multimodal model (image, audio or video inputs); llmviz loads text decoders"
_SSM = "a recurrent or state-space model with no softmax attention; llmviz has no state-space mixer"
_HYBRID_SSM = "Mamba (state-space) layers beside attention; llmviz has no state-space mixer"
_SHORTCONV = ("LFM2's gated short convolutions with {}; llmviz reads the dense LFM2 (model_type "
              "'lfm2')")
_INDEXER = ("a sparse-attention indexer other than DeepSeek-V3.2's (GLM-MoE-DSA and HY-V4 reuse one "
            "layer's top-k keys in the 'shared' layers after it; the others have indexer or attention "
            "code of their own); llmviz's indexer is DeepSeek-V3.2's (model_type 'deepseek_v32') and "
            "this one has not been compared with it")
_GRANITE = ("embedding_multiplier, residual_multiplier, attention_multiplier and logits_scaling "
            "scale the stream and the logits; llmviz has none of these scalings")
_COHERE = ("the logits are multiplied by logit_scale and attention and MLP run in parallel from one "
           "bias-free LayerNorm; llmviz's output head has no scale")
_UNREAD = "no reader yet: its modeling code has not been compared with llmviz's components ({})"

REFUSED: dict[str, str] = {
    **dict.fromkeys(("bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "blenderbot",
                     "blenderbot-small", "camembert", "data2vec-text", "electra", "ernie", "marian",
                     "mbart", "megatron-bert", "mvp", "pegasus", "plbart", "prophetnet", "rembert",
                     "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "trocr", "whisper",
                     "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod"), _ENCODER),
    **dict.fromkeys(("emu3", "fuyu", "git", "got_ocr2", "mllama", "moshi", "musicgen", "musicgen_melody",
                     "phi4_multimodal", "moss_transcribe_diarize", "gemma3n", "gemma4", "gemma4_unified",
                     "apertus1p5_text", "cohere_compass_text"), _MULTIMODAL),
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"), _SSM),
    **dict.fromkeys(("bamba", "jamba", "zamba", "zamba2", "falcon_h1", "nemotron_h", "granitemoehybrid"),
                    _HYBRID_SSM),
    "lfm2_moe": _SHORTCONV.format("its own mixture of experts (sigmoid router with a choice bias, "
                                  "dense first layers) not compared with llmviz's"),
    "lfm3": _SHORTCONV.format("LFM3's changes, whose modeling code has not been compared with llmviz's"),
    **dict.fromkeys(("glm_moe_dsa", "axk2", "dots3_note", "dots3_note_text",
                     "minimax_m3_vl_text", "hy_v4"), _INDEXER),
    **dict.fromkeys(("granite", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared",
                     "hyperclovax"), _GRANITE),
    **dict.fromkeys(("cohere", "cohere2", "cohere2_moe"), _COHERE),
    "deepseek_v4": "compressed sparse attention (an indexer over compressed keys) and hyper-connections "
                   "in place of the residual stream; llmviz has neither",
    "qwen4_exp": _MULTIMODAL,
    "qwen4_exp_text": "a sparse-attention indexer (QSA) beside Gated DeltaNet layers, and n-gram "
                      "embeddings; llmviz has neither",
    "gemma3": "a vision-language model; load its text part (Gemma3ForCausalLM, model_type "
              "'gemma3_text') instead",
    "qwen3_5": "a vision-language model; load its text part (Qwen3_5ForCausalLM, model_type "
               "'qwen3_5_text') instead",
    "qwen3_5_moe": "a vision-language model; load its text part (Qwen3_5MoeForCausalLM, model_type "
                   "'qwen3_5_moe_text') instead",
    "llama4": "the multimodal Llama 4; its text model is model_type 'llama4_text'",
    "minimax": "lightning (linear) attention layers; llmviz's linear layers are Gated DeltaNet",
    "bailing_hybrid": "linear-attention layers with a forget gate (its delta attention), not llmviz's "
                      "Gated DeltaNet",
    "recurrent_gemma": "Griffin's recurrent blocks (RG-LRU) beside local attention; llmviz has no "
                       "recurrent mixer",
    "reformer": "LSH and chunked attention with reversible layers; llmviz has neither",
    "blt": "a byte latent transformer: a patcher and local encoder and decoder around a global "
           "transformer",
    "olmo": "LayerNorm with neither weight nor bias (and clip_qkv); every llmviz norm has a weight",
    "nemotron": "LayerNorm1P (LayerNorm scaling by 1 + weight); llmviz's LayerNorm scales by weight",
    "ministral3": "queries scaled by Llama 4's position-dependent attention temperature "
                  "(llama_4_scaling_beta) in grouped-query attention; llmviz has that scale only in "
                  "latent attention (mistral4's ScaledQueryLatentAttention)",
    "gptj": "the output head has a bias (lm_head.bias); llmviz's head has none",
    "codegen": "GPT-J's block with a biased output head (lm_head.bias); llmviz's head has none",
    "phi": "the output head has a bias (lm_head.bias); llmviz's head has none",
    "bitnet": "ternary BitLinear weights with sub-norms before the output projections "
              "(attn_sub_norm, ffn_sub_norm); llmviz has neither",
    "diffllama": "differential attention (two softmax maps subtracted, weighted by learned lambdas)",
    "doge": "dynamic mask attention and a cross-domain mixture of experts (CDMoE)",
    "dory": "residual branches mixed in by learned per-channel rates (lambda_1, lambda_2), not added",
    "dbrx": "q, k and v clamped to clip_qkv; llmviz has no clamp",
    "jetmoe": "a mixture of attention heads (MoA) beside its experts; llmviz's attention is dense",
    "minicpm3": "embeddings scaled by scale_emb and residual branches by scale_depth (muP); llmviz "
                "has no residual scaling",
    "zaya": "learned residual scaling per channel (ZayaResidualScaling); llmviz adds residuals",
    # causal-LM classes transformers keeps outside its causal-LM auto mapping (parts of multimodal models)
    "clvp_decoder": "CLVP's speech decoder (speech tokens conditioned on text and voice embeddings), one part "
                    "of a text-to-speech model; llmviz loads text decoders",
    "csm_depth_decoder_model": "the depth decoder of the CSM speech model (audio codebooks from the backbone's "
                               "hidden state); llmviz loads text decoders",
    **dict.fromkeys(("kosmos_2_text_model", "kosmos_2_5_text_model"),
                    "Kosmos-2's text decoder (the language half of a vision-language model): sinusoidal "
                    "positions and a LayerNorm inside the feed-forward (ffn_layernorm); llmviz has neither"),
    **{t: _UNREAD.format(why) for t, why in {
        "afmoe": "sigmoid-gated attention, route_scale and optional muP", "axk1": "MLA with its own "
        "dense/sparse layer rule", "aria_text": "Aria's experts", "beam": "biased attention gates and "
        "residual scaling", "biogpt": "scaled learned positions", "cpmant": "segment position buckets",
        "ctrl": "sinusoidal positions",
"flint": "its experts", "gemma3n_text":
        "per-layer embeddings, AltUp and KV sharing", "gemma4_assistant": "a drafting model", "gemma4_unified_assistant": "a drafting "
        "model", "gemma4_unified_text": "Gemma 4's unified text model", "gpt_neox_japanese":
        "its MLP and attention biases", "hrm_text": "recurrent stacks of layers", "hy_v3": "its "
        "experts and QK-norm", "inkling_text": "relative logits, short convolutions", "inkling2_text":
        "L2-clipped attention, short convolutions", "inkling2_loop_text": "looped layers with message "
        "gates", "kolibri1": "its experts and windows", "laguna": "soft-capped router logits",
        "lara_mini": "gated DeltaNet with its experts", "longcat_flash": "zero-computation experts",
        "mellum": "RoPE per layer type with its experts", "mimo_v2_flash": "sinks with a value scale",
"modernbert-decoder": "ModernBERT's "
        "layers", "mpt": "ALiBi with its LayerNorm", "nanochat": "its norm and soft-cap placement",
        "olmo_hybrid": "Gated DeltaNet layers in OLMo 3's block", "openai-gpt": "post-norm blocks",
        "opt": "positions offset by two rows and project_in/out", "xglm": "scaled sinusoidal positions"}.items()},
}
