"""Reading chapter 9's stretch run: which scaling of the RoPE model is lowest at 8T, zero-shot and
after the fine-tune, decided by paired intervals, and whether any of them beats doing nothing
(the same model reading each target with only the T tokens before it)."""

from __future__ import annotations

from typing import Any

import torch

from ..evidence import Claim, beats_baseline, paired_ratio, positive_control
from .ch09_analysis import ppl, reach, reference

__all__ = ["lowest", "stretch_claims", "sliding_baseline_claims", "gains_near_t"]


def lowest(per_seed: dict[str, torch.Tensor]) -> tuple[str, str, Any]:
    """Which variant is lowest, decided by paired intervals, not by ranking point estimates.

    ``per_seed``: ``{variant: per-seed perplexities}``, paired by seed. Returns ``(best,
    closest, ratio)``: ``best`` has the lowest geometric mean; ``closest`` is the competitor
    nearest to it among those whose paired ratio ``closest / best`` does not lie above 1 (or,
    when every ratio does, the nearest of all), and ``ratio`` is that :func:`paired_ratio`.
    ``best`` is the lowest only where that interval lies above 1; otherwise no variant is
    resolved lowest."""
    if len(per_seed) < 2:
        raise ValueError(f"lowest needs at least two variants to compare, got {list(per_seed)}")
    best = min(per_seed, key=lambda v: float(per_seed[v].log().mean()))
    ratios = {v: paired_ratio(x, per_seed[best]) for v, x in per_seed.items() if v != best}
    closest = min(ratios, key=lambda v: (ratios[v].low > 1.0, ratios[v].mean))
    return best, closest, ratios[closest]


def stretch_claims(runs, size: Any, bigram: float, ft_last: int) -> dict[str, Claim]:
    """Zero-shot and fine-tuned claims on the stretched RoPE model, and which scaling is lowest
    at 8T zero-shot and after the fine-tune (:func:`lowest`).

    Every claim here compares perplexities of the same RoPE model at 8T (or at T) under two
    scalings, or under a scaling and none: how much each one costs the model on the same
    targets. That is decided by the paired intervals and the bigram check alone, the same for
    "PI beats plain RoPE" as for "YaRN is lower than PI". Whether a lower perplexity at 8T comes
    from *reading* keys past T is a different question, the one the comparison with the model's
    own T-token window asks (:func:`sliding_baseline_claims`, with its positive control), and
    the texts here do not claim it."""
    checks = [beats_baseline(ppl(runs, "RoPE", "1x").tolist(), bigram,
                             name="the RoPE model beats the byte bigram at T (1x tail)")]

    def ft(v):  # perplexity at 8T after the last fine-tune step
        return torch.tensor([r[v]["ft_nll"][-1] for _, r in runs.items()]).exp()

    first = runs[runs.seeds[0]]
    zero = lowest({v: ppl(runs, v) for v in first})
    tuned = lowest({v: ft(v) for v in first if "ft_nll" in first[v]})

    def claim(key, text, est, threshold, direction, quantity, fmt=".3g"):
        return Claim(text, est, threshold=threshold, direction=direction, quantity=quantity,
                     id=f"ch09_{key}", checks=checks, size=size, fmt=fmt)

    return {
        "pi_zero": claim("pi_zero_shot", "Position interpolation without fine-tuning costs "
                         "perplexity at the training length", paired_ratio(
                             ppl(runs, "PI", "1x"), ppl(runs, "RoPE", "1x")), 1.0, ">",
                         "PI / plain RoPE perplexity at T, no fine-tune"),
        "pi_8x": claim("pi_zero_8x", "Zero-shot at 8T, PI beats plain RoPE", paired_ratio(
            ppl(runs, "PI"), ppl(runs, "RoPE")), 1.0, "<", "PI / plain RoPE at 8T, no fine-tune"),
        "yarn_pi": claim("yarn_beats_pi", "Zero-shot at 8T, YaRN beats PI (a lower perplexity "
                         "on the same targets)", paired_ratio(ppl(runs, "YaRN"), ppl(runs, "PI")),
                         1.0, "<", "YaRN / PI at 8T, no fine-tune"),
        "yarn_temp": claim("yarn_temperature", "YaRN's attention temperature lowers its "
                           "perplexity at 8T without fine-tuning", paired_ratio(ppl(runs, "YaRN"), ppl(
                               runs, "YaRN, no temperature")), 1.0, "<",
                           "YaRN / YaRN without temperature at 8T, no fine-tune"),
        "pi_ft": claim("pi_finetune", "After the fine-tune, PI beats plain RoPE fine-tuned the "
                       "same way at 8T", paired_ratio(ft("PI"), ft("RoPE")), 1.0, "<",
                       f"PI / plain RoPE at 8T after {ft_last} steps"),
        "yarn_ft": claim("yarn_finetune", "After the fine-tune, YaRN beats PI at 8T (a lower "
                         "perplexity on the same targets)", paired_ratio(ft("YaRN"), ft("PI")),
                         1.0, "<", f"YaRN / PI at 8T after {ft_last} steps"),
        "best_zero": claim("lowest_zero_shot", f"Zero-shot, {zero[0]} has the lowest perplexity "
                           "at 8T of the scalings", zero[2], 1.0, ">",
                           f"{zero[1]} / {zero[0]} at 8T, no fine-tune (the closest competitor)",
                           ".3f"),
        "best_ft": claim("lowest_finetuned", f"After the fine-tune, {tuned[0]} has the lowest "
                         "perplexity at 8T of the scalings", tuned[2], 1.0, ">",
                         f"{tuned[1]} / {tuned[0]} at 8T after {ft_last} steps (the closest "
                         "competitor)", ".3f"),
    }


def gains_near_t(paired, seq_len: int, v: str = "RoPE"):
    """Positive control for "beats reading the last T tokens": a model can gain from context
    past T only if it still gains from context close to T. Within T (``seq_len``), on the paired
    context curve of ``v`` in ``paired`` (the context record: the same targets read with p
    tokens against T tokens, mean of the seeds, :func:`~.ch09_analysis.context_excess`),
    :func:`reach`, the first bin within 0.03 nats of the lowest, must lie beyond T/2. Where
    more context stops helping earlier, no scaling or fine-tune can be expected to beat the
    model's own T-token window, and a loss to that window says nothing about the scaling."""
    if seq_len < 2:
        raise ValueError(f"seq_len must be the training length T (>= 2), got {seq_len!r}")
    used = reach(paired, v, seq_len)
    return positive_control(f"the {v} model still gains from context in the second half of T "
                            "(same targets: reading more than T/2 tokens still lowers the loss)",
                            used > seq_len // 2, f"more context stops lowering its loss after "
                            f"{used} of {seq_len} tokens")


def sliding_baseline_claims(runs, race, size: Any, bigram: float,
                            ft_last: int, *, control=None) -> dict[str, Claim]:
    """Against doing nothing: for each variant of the stretch run ``runs``, its perplexity at 8T
    (after the last fine-tune step where it was fine-tuned, zero-shot otherwise) against the
    same plain RoPE model reading each target with exactly the T tokens before it (the race
    run ``race``'s ``sliding``, same seeds, same weights, same targets). Extension is worth
    something only where it beats reading the last T tokens. ``control``: an extra
    :class:`~llmviz.evidence.Check` every box carries (e.g. :func:`gains_near_t`), so that a box
    whose set-up cannot show a gain past T says "cannot decide" instead of "does not hold"."""
    checks = [beats_baseline(ppl(runs, "RoPE", "1x").tolist(), bigram,
                             name="the RoPE model beats the byte bigram at T (1x tail)")]
    if control is not None:
        checks.append(control)
    if list(runs.seeds) != list(race.seeds):
        raise ValueError(f"the stretch and race runs must have the same seeds to be paired, got "
                         f"{list(runs.seeds)} and {list(race.seeds)}")
    sliding = reference(race, "RoPE")
    out = {}
    for v in runs[runs.seeds[0]]:
        tuned = "ft_nll" in runs[runs.seeds[0]][v]
        x = (torch.tensor([r[v]["ft_nll"][-1] for _, r in runs.items()], dtype=torch.float64).exp()
             if tuned else ppl(runs, v))
        name = "plain RoPE (no scaling)" if v == "RoPE" else v
        when = f"after {ft_last} fine-tune steps" if tuned else "zero-shot, not fine-tuned"
        slug = "".join(c if c.isalnum() else "_" for c in v.lower()).replace("__", "_")
        out[v] = Claim(f"{name} at 8T ({when}) beats plain RoPE reading T tokens",
                       paired_ratio(x, sliding), threshold=1.0, direction="<",
                       quantity=f"{name} at 8T {when} / plain RoPE reading each target with "
                       "the T tokens before it", id=f"ch09_beats_sliding_{slug}", checks=checks,
                       size=size, fmt=".3g")
    return out
