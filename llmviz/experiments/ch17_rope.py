"""Chapter 17's position check: one-head GQA rotating only as many key features as MLA does.

:mod:`.ch17`'s GQA and MHA rotate every feature of each key; its MLA rotates only the decoupled
RoPE key (``qk_rope_head_dim`` features), and the features each head reads from the latent carry
no position. :func:`rope_run` trains ``"GQA, 1 kv head"`` exactly as :func:`.ch17.mla_run` does
(same sizes, data, seeds and batches) with ``rotary_dim`` set to MLA's ``qk_rope_head_dim``:
the same parameters and cache, fewer rotated features. Its record pairs seed by seed with
``ch17_mla``'s. Kept in its own module so that ``ch17_mla``'s record, whose fingerprint covers
:mod:`.ch17`'s module-level code, is not touched.
"""

from __future__ import annotations

from ..evidence import Experiment
from . import ch17

__all__ = ["ROPE_VARIANTS", "ROPE", "rope_run"]

#: One-head GQA with RoPE on MLA's number of key features only.
ROPE_VARIANTS = ("GQA, 1 kv head, MLA's rotated features",)


def rope_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """:func:`.ch17.mla_run` of ``"GQA, 1 kv head"`` with ``rotary_dim`` = MLA's
    ``qk_rope_head_dim``; returns what that function returns."""
    from dataclasses import replace

    if variant not in ROPE_VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {ROPE_VARIANTS}")
    plain = ch17.variants

    def matched(**kw):
        out = plain(**kw)
        out[variant] = replace(out["GQA, 1 kv head"], rotary_dim=out["MLA"].qk_rope_head_dim)
        return out

    ch17.variants = matched  # mla_run builds its configs through this module-level name
    try:
        return ch17.mla_run(variant, seed, prefix=prefix, **params)
    finally:
        ch17.variants = plain


ROPE = Experiment(
    "ch17_rope", rope_run, variants=ROPE_VARIANTS, seeds=ch17.SEEDS, sizes=ch17.SIZES,
    prefix={"cpu": 100, "long": 200},
    description="ch17's one-head GQA rotating only MLA's number of key features (position "
                "matched to MLA); pairs with ch17_mla's seeds")
