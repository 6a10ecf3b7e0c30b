"""DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer picks the keys each query's
latent attention reads.

Shape letters: B batch, T new tokens, S cached + new tokens, C model width, r_q query latent
width (``q_lora_rank``), I indexer heads (``index_n_heads``), E indexer head width
(``index_head_dim``), dr rotary features (``qk_rope_head_dim``), k = ``index_topk``.

**The indexer** (:class:`LightningIndexer`) is a second, cheap attention-like scorer with its
own projections: I query heads from the query latent (``wq_b``: r_q -> I E), ONE key per token
(``wk``: C -> E, then a LayerNorm with weight and bias, eps 1e-6), and one weight per head and
query (``weights_proj``: C -> I). The first dr features of the queries and keys are rotated by
RoPE in the *rotate-half* layout (the main attention's rope features are interleaved); the
other E - dr pass. The score of key s for query t is

    index[t, s] = sum_i  w[t, i] / sqrt(I)  *  relu(q[t, i] . k[s] / sqrt(E))

in float32 (a ReLU per head, then a signed weighted sum: heads vote, and may vote against).

**Selection.** Keys the query may not see (later tokens, padding) are set to -inf, and the
query keeps the ``min(k, S)`` best keys (``torch.topk``). While S <= k every key is kept, so
the layer *is* dense latent attention on sequences no longer than k; past k each query reads
at most k keys. A selected key that was not allowed stays blocked (a query with fewer than k
allowed keys reads all of them).

**Attention** (:class:`IndexedLatentAttention`) is
:class:`~llmviz.attention.latent.MultiHeadLatentAttention` with its mask ANDed with the
selection. The indexer's keys are cached with the layer's latents: the cache's rope-key slot
holds ``[k_rope | indexer key]`` per token (dr + E numbers), so decoding scores new queries
against every earlier token's indexer key, as Hugging Face's ``update_indexer`` does.

DeepSeek's reference code rotates the indexer's q and k by a Hadamard transform and scores in
FP8; Hugging Face skips both (the transform is orthogonal, so it leaves the dot products
unchanged, and FP8 is a precision choice), and so does this module: it computes what
transformers' ``DeepseekV32Indexer`` computes. Parameter names are that module's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .._checks import check_flags, check_hidden, check_int_in, check_positive, check_positive_int, check_tensor
from ..position.rope_scaling import RopeScaling
from ..position.rotary import RotaryEmbedding
from .latent import LatentCache, MultiHeadLatentAttention

__all__ = ["IndexedLatentAttention", "LightningIndexer", "allowed_keys"]


def allowed_keys(mask: torch.Tensor | None, B: int, T: int, S: int, *, causal: bool = True,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """``(B, T, S)`` bool, True where query t (the last T of S positions) may see key s: the
    causal rule (if ``causal``) and ``mask``, bool broadcastable to ``(B, 1, T, S)`` (one mask
    for every head: the indexer picks keys per query, not per head)."""
    for v, name in ((B, "B"), (T, "T"), (S, "S")):
        check_positive_int(v, name)
    if S < T:
        raise ValueError(f"S={S} keys cannot be fewer than T={T} queries (the queries are the last T keys)")
    check_flags(causal=causal)
    allowed = torch.ones(T, S, dtype=torch.bool, device=device)
    if causal:
        allowed = allowed.tril(S - T)
    allowed = allowed.expand(B, T, S)
    if mask is None:
        return allowed
    check_tensor(mask, "mask", ndim=(2, 3, 4))
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = may attend), got {mask.dtype}; use mask.bool()")
    if mask.ndim == 4:
        if mask.shape[1] != 1:
            raise ValueError(f"mask {tuple(mask.shape)} differs per head; the indexer selects keys per "
                             "query for all heads: give a (B, 1, T, S) or (B, 1, 1, S) mask")
        mask = mask[:, 0]
    try:
        return allowed & mask.to(allowed.device).expand(B, T, S)
    except RuntimeError:
        raise ValueError(f"mask {tuple(mask.shape)} does not broadcast to (B, T, S) = {(B, T, S)}") from None


class LightningIndexer(nn.Module):
    """DeepSeek-V3.2's indexer (module docstring): scores every allowed key for every query and
    keeps the best ``topk``.

    Args:
        d_model: C.
        q_lora_rank: r_q, width of the query latent the indexer's queries are read from.
        n_heads: I, indexer heads.
        head_dim: E, indexer head width (>= ``rope_dim``).
        rope_dim: dr, features rotated (rotate-half layout); the rest pass.
        topk: k, keys kept per query.
        rope_base, rope_scaling: the RoPE of the main attention (the same cos and sin).
        norm_eps: the key LayerNorm's epsilon (1e-6 in DeepSeek's code).
    """

    def __init__(self, d_model: int, q_lora_rank: int, *, n_heads: int, head_dim: int, rope_dim: int,
                 topk: int, rope_base: float = 10000.0, rope_scaling: RopeScaling | None = None,
                 norm_eps: float = 1e-6) -> None:
        super().__init__()
        for name, v in (("d_model", d_model), ("q_lora_rank", q_lora_rank), ("n_heads", n_heads),
                        ("head_dim", head_dim), ("rope_dim", rope_dim), ("topk", topk)):
            check_positive_int(v, name)
        if rope_dim % 2 or rope_dim > head_dim:
            raise ValueError(f"rope_dim={rope_dim} must be even and at most head_dim={head_dim} "
                             "(RoPE rotates pairs of the first rope_dim features)")
        check_positive(norm_eps, "norm_eps")
        if rope_scaling is not None and not isinstance(rope_scaling, RopeScaling):
            raise TypeError(f"rope_scaling must be a RopeScaling or None, got {type(rope_scaling).__name__}")
        self.n_heads, self.head_dim, self.rope_dim, self.topk = n_heads, head_dim, rope_dim, topk
        self.wq_b = nn.Linear(q_lora_rank, n_heads * head_dim, bias=False)
        self.wk = nn.Linear(d_model, head_dim, bias=False)
        self.k_norm = nn.LayerNorm(head_dim, eps=norm_eps)
        self.weights_proj = nn.Linear(d_model, n_heads, bias=False)
        self.rope = RotaryEmbedding(rope_dim, base=rope_base, layout="half", scaling=rope_scaling)

    def project(self, x: torch.Tensor, q_latent: torch.Tensor, positions: torch.Tensor, *,
                seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, C)``, ``q_latent (B, T, r_q)`` -> rotated queries ``(B, T, I, E)`` and the
        T new keys ``(B, T, E)`` (normalised, rotated), at ``positions`` ``(T,)`` or ``(B, T)``."""
        check_hidden(x, self.wk.in_features, self.wk.weight, "LightningIndexer", ndim=3)
        check_hidden(q_latent, self.wq_b.in_features, self.wq_b.weight, "LightningIndexer's query latent", ndim=3)
        if q_latent.shape[:2] != x.shape[:2]:
            raise ValueError(f"q_latent {tuple(q_latent.shape)} and x {tuple(x.shape)} must agree in (B, T)")
        B, T, _ = x.shape
        E, dr = self.head_dim, self.rope_dim
        q = self.wq_b(q_latent).view(B, T, self.n_heads, E)
        k = self.k_norm(self.wk(x))[:, :, None]  # (B, T, 1, E)
        q_rot, q_pass = q.split([dr, E - dr], dim=-1)
        k_rot, k_pass = k.split([dr, E - dr], dim=-1)
        q_rot, k_rot = self.rope(q_rot.transpose(1, 2), k_rot.transpose(1, 2), positions, seq_len=seq_len)
        q = torch.cat([q_rot.transpose(1, 2), q_pass], dim=-1)  # (B, T, I, E)
        k = torch.cat([k_rot.transpose(1, 2), k_pass], dim=-1)[:, :, 0]  # (B, T, E)
        return q, k

    def scores(self, x: torch.Tensor, q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``(B, T, S)`` float32 index scores of ``keys (B, S, E)`` for the queries ``q (B, T, I, E)``
        of ``x (B, T, C)`` (module docstring; no mask applied)."""
        check_hidden(x, self.weights_proj.in_features, self.weights_proj.weight, "LightningIndexer", ndim=3)
        check_tensor(q, "q", ndim=4, floating=True)
        check_tensor(keys, "keys", ndim=3, floating=True)
        if q.shape[2:] != (self.n_heads, self.head_dim) or keys.shape[-1] != self.head_dim or \
                keys.shape[0] != q.shape[0] or x.shape[:2] != q.shape[:2]:
            raise ValueError(f"q {tuple(q.shape)} must be (B, T, {self.n_heads}, {self.head_dim}) and keys "
                             f"{tuple(keys.shape)} (B, S, {self.head_dim}), with x {tuple(x.shape)} (B, T, C)")
        s = torch.matmul(q.float(), keys.transpose(-1, -2).float().unsqueeze(1)) * self.head_dim**-0.5
        s = F.relu(s)  # (B, T, I, S)
        w = self.weights_proj(x.to(self.weights_proj.weight.dtype)).float() * self.n_heads**-0.5  # (B, T, I)
        return torch.matmul(w.unsqueeze(-2), s).squeeze(-2)  # (B, T, S)

    def select(self, scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """``(B, T, S)`` bool: the ``min(topk, S)`` best allowed keys of each query (True = read);
        ``allowed`` ``(B, T, S)`` bool, see :func:`allowed_keys`."""
        check_tensor(scores, "scores", ndim=3, floating=True)
        check_tensor(allowed, "allowed", ndim=3)
        if allowed.dtype != torch.bool or allowed.shape != scores.shape:
            raise ValueError(f"allowed must be bool of the scores' shape {tuple(scores.shape)}, got "
                             f"{allowed.dtype} {tuple(allowed.shape)}")
        masked = scores.masked_fill(~allowed, float("-inf"))
        top = masked.topk(min(self.topk, scores.shape[-1]), dim=-1).indices
        return torch.zeros_like(allowed).scatter(-1, top, True) & allowed

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, head_dim={self.head_dim}, rope_dim={self.rope_dim}, topk={self.topk}"


class IndexedLatentAttention(MultiHeadLatentAttention):
    """Latent attention reading only the keys a :class:`LightningIndexer` selects (module
    docstring). The arguments are :class:`~llmviz.attention.latent.MultiHeadLatentAttention`'s
    (``q_lora_rank`` required: the indexer reads the query latent) plus ``index_heads`` (I),
    ``index_head_dim`` (E) and ``index_topk`` (k). ``forward`` as the parent's; ``mask`` must be
    the same for every head; ``return_selection=True`` also returns the ``(B, T, S)`` selection.
    """

    def __init__(self, d_model: int, n_heads: int, *, index_heads: int, index_head_dim: int,
                 index_topk: int, **mla: object) -> None:
        super().__init__(d_model, n_heads, **mla)
        if self.q_lora_rank is None:
            raise ValueError("IndexedLatentAttention needs q_lora_rank: the indexer's queries are read "
                             "from the query latent")
        self.indexer = LightningIndexer(
            d_model, self.q_lora_rank, n_heads=index_heads, head_dim=index_head_dim,
            rope_dim=self.qk_rope_head_dim, topk=index_topk, rope_base=self.rope.base,
            rope_scaling=self.rope.scaling)

    def forward(self, x: torch.Tensor, *, positions: torch.Tensor | None = None,
                cache: LatentCache | None = None, layer_idx: int = 0, mask: torch.Tensor | None = None,
                absorbed: bool = False, return_weights: bool = False, return_selection: bool = False):
        check_hidden(x, self.d_model, self.kv_b_proj.weight, "IndexedLatentAttention", ndim=3)
        check_flags(absorbed=absorbed, return_weights=return_weights, return_selection=return_selection)
        check_int_in(layer_idx, "layer_idx", 0)
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache, got {type(cache).__name__}; inside a model "
                            "wrap its KVCache as LatentSlots(cache)")
        B, T, _ = x.shape
        dr, E = self.qk_rope_head_dim, self.indexer.head_dim
        q_latent = self.q_a_layernorm(self.q_a_proj(x))  # (B, T, r_q), read by both
        q = self.q_b_proj(q_latent).view(B, T, self.n_heads, self.qk_head_dim).transpose(1, 2)
        q_nope, q_rope = q.split([self.qk_nope_head_dim, dr], dim=-1)
        c, k_rope = self.latents(x)
        offset = cache.length(layer_idx) if cache is not None else 0
        if positions is None:
            positions = torch.arange(offset, offset + T, device=x.device)
        q_rope, k_rope = self.rope(q_rope, k_rope, positions, seq_len=offset + T)
        q_index, k_index = self.indexer.project(x, q_latent, positions, seq_len=offset + T)
        keys = torch.cat([k_rope[:, 0], k_index.to(k_rope.dtype)], dim=-1)  # (B, T, dr + E)
        if cache is not None:
            c, keys = cache.update(layer_idx, c, keys)  # (B, S, r), (B, S, dr + E)
        k_rope, k_index = keys.split([dr, E], dim=-1)
        allowed = allowed_keys(mask, B, T, c.shape[1], causal=self.causal, device=x.device)
        selected = self.indexer.select(self.indexer.scores(x, q_index, k_index), allowed)
        attend = self._attend_absorbed if absorbed else self._attend_naive
        out, weights = attend(q_nope, q_rope, c, k_rope, selected[:, None], return_weights)
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, self.n_heads * self.v_head_dim))
        result = (out, weights) if return_weights else (out,)
        result = result + ((selected,) if return_selection else ())
        return result if len(result) > 1 else result[0]
