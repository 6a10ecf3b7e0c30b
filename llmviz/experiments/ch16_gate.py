"""Chapter 16's gate check: the MoE started at the dense model's strength.

Switch's top-1 gate scales the chosen expert's output by its router probability, about
``1 / N_EXPERTS`` at initialisation, so :mod:`.ch16`'s MoE starts with a quieter feed-forward
branch than the dense model. :func:`gate_run` trains ``"MoE + balancing loss"`` exactly as
:func:`.ch16.moe_run` does (same sizes, data, seeds and batches) with ``moe_scaling`` set to the
expert count, which starts the routed output near the dense model's. Its record pairs seed by
seed with ``ch16_moe``'s dense and MoE runs. Kept in its own module so that ``ch16_moe``'s
record, whose fingerprint covers :mod:`.ch16`'s module-level code, is not touched.
"""

from __future__ import annotations

from ..evidence import Experiment
from . import ch16

__all__ = ["GATE_VARIANTS", "GATE", "gate_run"]

#: ``"MoE + balancing loss"`` with its routed output multiplied by the expert count.
GATE_VARIANTS = ("MoE + balancing loss, gate scaled",)


def gate_run(variant: str, seed: int, *, prefix: int | None = None, **params) -> dict:
    """:func:`.ch16.moe_run` of ``"MoE + balancing loss"`` with ``moe_scaling`` =
    :data:`.ch16.N_EXPERTS`; returns what that function returns."""
    from dataclasses import replace

    if variant not in GATE_VARIANTS:
        raise ValueError(f"variant={variant!r} is not one of {GATE_VARIANTS}")
    plain = ch16.variants

    def scaled(**kw):
        out = plain(**kw)
        out[variant] = replace(out["MoE + balancing loss"], moe_scaling=float(ch16.N_EXPERTS))
        return out

    ch16.variants = scaled  # moe_run builds its configs through this module-level name
    try:
        return ch16.moe_run(variant, seed, prefix=prefix, **params)
    finally:
        ch16.variants = plain


GATE = Experiment(
    "ch16_gate", gate_run, variants=GATE_VARIANTS, seeds=ch16.SEEDS, sizes=ch16.SIZES,
    prefix={"cpu": 60, "long": 200},
    description="ch16's MoE (balancing loss) with its routed output scaled by the expert count, "
                "so its gate starts near dense strength; pairs with ch16_moe's seeds")
