"""Normalisation: model norms (:mod:`.layer`) and sequence norms (:mod:`.sequence`), one registry.

Layers for sequences: LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm.

Every norm here takes activations of shape ``(B, T, C)`` (LayerNorm and RMSNorm accept any
leading dimensions, ``(..., C)``, so they also serve as per-head QK-norm on ``(B, H, T, D)``).
They differ only in *which axes the statistics are taken over*:

============  =========================  ==========================================
norm          statistics over            one mean/variance per
============  =========================  ==========================================
LayerNorm     C                          token ``(b, t)``
RMSNorm       C (no mean subtracted)     token ``(b, t)``
BatchNorm     B and T                    channel ``c`` (running averages for eval)
GroupNorm     T and a group of C/G chans sequence and group ``(b, g)``
InstanceNorm  T                          sequence and channel ``(b, c)``
============  =========================  ==========================================

GroupNorm with one group normalises a whole sequence at once; with ``G = C`` groups it is
InstanceNorm: it sits between the two.

Conventions:
    * ``eps`` is added to the variance (or mean square) *inside* the square root:
      ``(x - mean) / sqrt(var + eps)``, as in torch and Hugging Face models.
    * Variances used for normalising are biased (divide by n); BatchNorm's running variance
      uses the unbiased estimate, as torch does.
    * Padding masks are ``(B, T)`` with True (or 1) = a real token, the Hugging Face
      ``attention_mask`` convention. Padded positions never enter the statistics; their
      outputs are normalised with the same statistics and carry no meaning.
    * The pure functions compute in at least float32 and cast back, like Hugging Face Llama.

References:
    Ba et al. 2016, "Layer Normalization"; Zhang & Sennrich 2019, "Root Mean Square Layer
    Normalization"; Ioffe & Szegedy 2015, "Batch Normalization"; Wu & He 2018, "Group
    Normalization"; Ulyanov et al. 2016, "Instance Normalization".
"""

from __future__ import annotations

from .layer import LayerNorm, RMSNorm, layer_norm, rms_norm
from .reduction import REDUCTION_KINDS, reduction_mask
from .registry import MODEL_NORMS, NORM_KINDS, NORMS, NormSpec, make_norm, norm_params
from .sequence import (
    BatchNormSeq,
    GroupNormSeq,
    InstanceNormSeq,
    batch_norm,
    group_norm,
    instance_norm,
)

__all__ = [
    "layer_norm",
    "rms_norm",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "LayerNorm",
    "RMSNorm",
    "BatchNormSeq",
    "GroupNormSeq",
    "InstanceNormSeq",
    "make_norm",
    "norm_params",
    "NormSpec",
    "NORMS",
    "NORM_KINDS",
    "MODEL_NORMS",
    "REDUCTION_KINDS",
    "reduction_mask",
]
