"""A decoder-only language model built from a :class:`~llmviz.model.config.ModelConfig`.

``DecoderLM`` = token embedding (+ learned or sinusoidal positions, added ONCE at the input;
RoPE, ALiBi and T5's bucketed bias act inside attention) -> ``n_layers`` :class:`~llmviz.model.block.TransformerBlock`
-> final norm (pre-norm and sandwich stacks) -> ``lm_head`` (optionally tied to the embedding)
-> optional final-logit soft-cap.

Conventions:
    * ``attention_mask`` follows Hugging Face: ``(B, S)`` with 1 = real token, 0 = padding,
      covering the cached tokens too (S = cached + T). Internally it becomes a boolean mask,
      True = may attend.
    * ``labels`` follow Hugging Face too: same shape as ``input_ids``, shifted inside (position
      t predicts label t + 1), ``-100`` ignored. The loss is cross-entropy plus
      ``z_loss_weight * mean(logsumexp(logits) ** 2)`` (PaLM's z-loss, Chowdhery et al. 2022),
      plus :attr:`LMOutput.aux_loss` for a mixture of experts.
    * Mixture of experts: every sparse layer's routing comes back in :attr:`LMOutput.moe`;
      ``aux_loss = router_aux_loss_coef * L_bal + router_z_loss_coef * L_z``, each the mean over
      the sparse layers of :func:`llmviz.moe.load_balancing_loss` (its ``"assignments"`` form:
      1 at uniform routing) and :func:`llmviz.moe.router_z_loss`, over the real (unpadded)
      tokens. Layers with ``moe_bias_balancing`` learn by :meth:`DecoderLM.update_router_biases`
      after each optimiser step instead (:func:`llmviz.training.train` calls it).
    * ``positions`` default to ``cache length + arange(T)``.

Shape letters: B batch, T query length, S key length, H heads, C model dim, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_flags, check_positive, check_tensor
from ..attention.kv_cache import KVCache
from ..attention.masks import padding_mask
from ..position.registry import POSITION_SCHEMES
from ..training.losses import z_loss
from .block import TransformerBlock
from .config import ModelConfig

__all__ = ["LMOutput", "DecoderLM", "softcap"]


@dataclass
class LMOutput:
    """What :meth:`DecoderLM.forward` returns.

    Attributes:
        logits: ``(B, T, V)``.
        loss: scalar when ``labels`` were given, else None.
        weights: per-layer attention weights ``(B, H, T, S)`` when asked for, else None.
        cache: the :class:`~llmviz.attention.kv_cache.KVCache` passed in (now extended), or None.
        aux_loss: the mixture-of-experts auxiliary loss (balancing + router z-loss, already
            weighted by their coefficients; included in ``loss``), or None for a dense model or
            zero coefficients.
        moe: one :class:`llmviz.moe.MoEInfo` per sparse layer (in layer order), or None.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    weights: list[torch.Tensor] | None = None
    cache: KVCache | None = None
    aux_loss: torch.Tensor | None = None
    moe: list | None = None


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap * tanh(x / cap)``: smooth clipping into ``(-cap, cap)`` (Gemma 2)."""
    check_positive(cap, "cap")
    return cap * torch.tanh(x / cap)


class DecoderLM(nn.Module):
    """A decoder-only transformer language model.

    Args:
        config: every hyper-parameter; see :class:`~llmviz.model.config.ModelConfig`.

    Submodules: ``embed_tokens``, ``embed_positions`` (learned/sinusoidal, else None),
    ``embed_norm`` (BLOOM, else None), ``layers`` (``nn.ModuleList`` of blocks), ``norm``
    (final norm, else None), ``lm_head``, ``position_bias`` (a
    :class:`llmviz.position.t5_bias.T5Bias` for ``position="t5"``, else None).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = c = config
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
        scheme = POSITION_SCHEMES.kind(c.position)  # a table at the input, T5's bias, or nothing
        self.embed_positions = scheme.build(c) if scheme.info["slot"] == "embed_positions" else None
        self.embed_norm = c.norm_spec.build(c.d_model) if c.embed_norm else None
        self.drop = nn.Dropout(c.dropout)
        rope = None
        if c.position == "rope":
            from ..position.rotary import RotaryEmbedding

            rope = RotaryEmbedding(
                c.head_dim, base=c.rope_base, layout=c.rope_layout, rotary_dim=c.rotary_dim,
                scaling=c.rope_scaling,
            )
        local_rope = None  # sliding-window layers with their own base (Gemma 3), unscaled
        if rope is not None and c.local_rope_base is not None:
            local_rope = RotaryEmbedding(
                c.head_dim, base=c.local_rope_base, layout=c.rope_layout, rotary_dim=c.rotary_dim,
            )
        self.layers = nn.ModuleList(
            TransformerBlock.from_config(c, i, rope=self._rope_for(c, i, rope, local_rope))
            for i in range(c.n_layers)
        )
        # T5's bucketed bias (position="t5"), else None
        self.position_bias = scheme.build(c) if scheme.info["slot"] == "position_bias" else None
        self.norm = c.norm_spec.build(c.d_model) if c.has_final_norm else None
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.reset_parameters()
        if c.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    @staticmethod
    def _rope_for(c: ModelConfig, i: int, rope: nn.Module | None, local_rope: nn.Module | None):
        if c.nope_layers is not None and i in c.nope_layers:
            return None  # a NoPE layer: position only through the causal mask
        return local_rope if local_rope is not None and c.window_for(i) is not None else rope

    @staticmethod
    def _position_embedding(c: ModelConfig) -> nn.Module | None:
        """The input position table of ``c`` (kept for callers; the registry builds it)."""
        scheme = POSITION_SCHEMES.kind(c.position)
        return scheme.build(c) if scheme.info["slot"] == "embed_positions" else None

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights (expert and router matrices too), zero biases; residual
        output projections (``o_proj``, ``down_proj``, the experts' ``down_proj``) get ``init_std / sqrt(2 n_layers)`` (GPT-2); DeepNorm stacks then scale
        v/o/feed-forward weights by beta. Norm weights keep their own initialisation."""
        c = self.config
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = c.init_std
                if name.endswith(("o_proj", "down_proj")):
                    std = c.init_std / math.sqrt(2 * c.n_layers)
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=c.init_std)
        for name, p in self.named_parameters():  # experts and routers hold bare parameters
            if name.endswith(("experts.gate_up_proj", "mlp.gate.weight")):
                nn.init.normal_(p, std=c.init_std)
            elif name.endswith("experts.down_proj"):
                nn.init.normal_(p, std=c.init_std / math.sqrt(2 * c.n_layers))
        if c.placement == "deepnorm":
            for block in self.layers:
                block.deepnorm_init_(c.deepnorm_beta)

    def new_cache(self) -> KVCache:
        """An empty KV cache for :meth:`forward` / :func:`generate`."""
        return KVCache()

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        positions: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        return_weights: bool = False,
        labels: torch.Tensor | None = None,
    ) -> LMOutput:
        """Logits for ``input_ids`` ``(B, T)`` (see the module docstring for conventions).

        Args:
            input_ids: ``(B, T)`` long token ids.
            positions: ``(T,)`` or ``(B, T)`` absolute positions (default: after the cache).
            attention_mask: ``(B, S)`` HF convention, 1 = keep, 0 = padding.
            cache: a KV cache to read and extend (decode one token at a time with it).
            return_weights: also return every layer's attention weights ``(B, H, T, S)``.
            labels: ``(B, T)`` targets, shifted inside; ``-100`` = ignore.
        """
        check_flags(return_weights=return_weights)
        c = self.config
        check_tensor(input_ids, "input_ids", ndim=2)
        if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
            raise TypeError(
                f"input_ids must be integer token ids, got dtype {input_ids.dtype}; pass "
                "input_ids.long() (from a tokenizer's integer ids, not floats or a mask)"
            )
        if input_ids.dtype not in (torch.long, torch.int32):
            input_ids = input_ids.long()  # uint8/int8/int16 ids are ids too (byte tokens)
        B, T = input_ids.shape
        offset = cache.length(0) if cache is not None else 0
        if positions is None:
            # checked from shapes (no read of device values); explicit positions are checked
            # by the learned table itself
            if c.position == "learned" and offset + T > c.max_seq_len:
                raise ValueError(
                    f"position {offset + T - 1} is past max_seq_len ({c.max_seq_len}) of the "
                    "learned position table; use a shorter input or a larger max_seq_len"
                )
            positions = torch.arange(offset, offset + T, device=input_ids.device)  # (T,)
        try:
            x = self.embed_tokens(input_ids)  # (B, T, C)
        except IndexError as err:  # raised by the lookup itself: no read of the ids here
            raise ValueError(
                f"input_ids holds a token id outside [0, vocab_size={c.vocab_size}); "
                "tokenize with the model's own tokenizer or build it with a larger vocab_size"
            ) from err
        if c.embed_scale:
            x = x * torch.tensor(math.sqrt(c.d_model), dtype=x.dtype)
        if self.embed_positions is not None:
            x = x + self.embed_positions(positions).to(x.dtype)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = self.drop(x)
        mask = None
        if attention_mask is not None:
            check_tensor(attention_mask, "attention_mask", ndim=2)
            if attention_mask.shape != (B, offset + T):
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)}, expected "
                    f"(B, cached + T) = ({B}, {offset + T}): it covers cached tokens too"
                )
            mask = padding_mask(attention_mask)  # (B, 1, 1, S), True = may attend
        weights = [] if return_weights else None
        # T5: one (H, T, S) score bias per softmax layer, queries the last T of offset + T slots
        biases = {} if self.position_bias is None else self.position_bias(T, offset + T, dtype=x.dtype)
        for i, layer in enumerate(self.layers):
            out = layer(x, mask=mask, score_bias=biases.get(i), positions=positions, cache=cache,
                        layer_idx=i, return_weights=return_weights)
            if return_weights:
                x, w = out
                weights.append(w)
            else:
                x = out
        if self.norm is not None:
            x = self.norm(x)
        logits = self.lm_head(x)  # (B, T, V)
        if c.final_softcap is not None:
            logits = softcap(logits, c.final_softcap)
        moe = [layer.moe_info for layer in self.layers if layer.is_moe] or None
        aux = None
        if moe is not None and (c.router_aux_loss_coef > 0 or c.router_z_loss_coef > 0):
            tokens = None if attention_mask is None else attention_mask[:, -T:].bool().reshape(-1)
            aux = self.moe_aux_loss(moe, tokens)
        loss = None if labels is None else self.loss(logits, labels)
        if loss is not None and aux is not None:
            loss = loss + aux
        return LMOutput(logits=logits, loss=loss, weights=weights, cache=cache, aux_loss=aux, moe=moe)

    def moe_aux_loss(self, infos: list, tokens: torch.Tensor | None = None) -> torch.Tensor:
        """``router_aux_loss_coef * mean_l L_bal + router_z_loss_coef * mean_l L_z`` over the
        sparse layers' :class:`~llmviz.moe.MoEInfo` ``infos``; ``tokens`` ``(N,)`` bool keeps
        the real tokens (None = all)."""
        from ..moe import load_balancing_loss, router_z_loss

        if not infos:
            raise ValueError("moe_aux_loss needs the MoEInfo of at least one sparse layer; this "
                             "model has none (set n_experts in its config)")
        c = self.config
        total = infos[0].routing.logits.new_zeros((), dtype=torch.float32)
        for info in infos:
            r = info.routing
            if c.router_aux_loss_coef > 0:
                total = total + c.router_aux_loss_coef * load_balancing_loss(r.probs, r.indices, mask=tokens)
            if c.router_z_loss_coef > 0:
                total = total + c.router_z_loss_coef * router_z_loss(r.logits, mask=tokens)
        return total / len(infos)

    @torch.no_grad()
    def update_router_biases(self) -> int:
        """One auxiliary-loss-free balancing step (DeepSeek-V3) for every sparse layer built with
        ``moe_bias_balancing``, from the load of its last forward; call it after the optimiser
        step. Returns how many layers were updated (0 for a model without such layers)."""
        n = 0
        for layer in self.layers:
            if layer.is_moe and layer.mlp.gate.e_score_correction_bias is not None:
                if layer.moe_info is None:
                    raise ValueError("update_router_biases needs a forward pass first: it reads "
                                     "the load each expert received in the last one")
                layer.mlp.gate.update_bias(layer.moe_info.load)
                n += 1
        return n

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy (labels shifted by one inside) plus the z-loss term.

        The mean is over the predicted tokens whose label is not ``-100``. With none (every
        label ignored, or ``T = 1`` so nothing follows a token) the loss is 0, not NaN: a sum
        over no tokens, so such a batch adds nothing to training (and has zero gradient).
        """
        check_tensor(labels, "labels", ndim=2)
        if labels.shape != logits.shape[:2]:
            raise ValueError(
                f"labels {tuple(labels.shape)} must match input_ids {tuple(logits.shape[:2])}"
            )
        pred = logits[:, :-1].float()  # (B, T-1, V)
        target = labels[:, 1:]  # (B, T-1)
        kept = (target != -100).sum().clamp_min(1)  # no read back: 0 tokens -> 0 / 1 = 0
        try:
            loss = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1),
                                   ignore_index=-100, reduction="sum") / kept
        except IndexError as err:
            raise ValueError(
                f"labels hold a class outside [0, vocab_size={self.config.vocab_size}) that is "
                "not -100 (the ignore value); mask padding with -100"
            ) from err
        w = self.config.z_loss_weight
        if w > 0:  # the trainer adds the same term (llmviz.training.losses.z_loss)
            loss = loss + w * z_loss(pred, target != -100)  # over kept tokens only
        return loss
