"""Reading chapter 9's runs (live or recorded): perplexities, baselines, checks and claims.

The same functions read the live ``cpu`` run and the ``long`` record, so the chapter can set the
two side by side and say, computed, where their verdicts differ.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..evidence import (Check, Claim, beats_baseline, paired_ratio, positive_control, summarize,
                        summarize_log)
from ..training.evaluation import tail_targets
from ..training.ngram import ByteNgram
from . import ch09
from ._ch09_probes import uniform_far_mass

__all__ = ["ppl", "reference", "ppl_estimates", "ngram_ppl", "race_checks", "race_claims",
           "context_claims", "mechanism_claims", "stretch_claims", "copy_gain",
           "retrieval_claims", "dilution", "dilution_claims"]


def ppl(runs, variant: str, key: str = "8x", field: str = "nll") -> torch.Tensor:
    """Per-seed perplexity of ``variant``: ``exp`` of ``runs[seed][variant][field][key]`` (or of
    ``[field]`` itself when ``key`` is None)."""
    keys = (variant, field) if key is None else (variant, field, key)
    return torch.tensor(runs.values(*keys), dtype=torch.float64).exp()


def ppl_estimates(runs, variants, field: str = "nll") -> dict[str, dict[int, Any]]:
    """``{variant: {factor: Estimate}}``: geometric mean of the seeds, interval on the log scale."""
    return {v: {f: summarize_log(ppl(runs, v, f"{f}x", field)) for f in ch09.FACTORS}
            for v in variants}


def ngram_ppl(order: int, p: dict) -> float:
    """Perplexity of a byte n-gram of ``order`` fitted on the training bytes, on the scored
    targets of size ``p`` (the same targets at every length)."""
    train, val = ch09.data()
    targets = tail_targets(ch09._ends(p), p["seq_len"]).flatten()
    return math.exp(float(ByteNgram(order).fit(train).nll(val, targets).mean()))


def reference(runs, v: str) -> torch.Tensor:
    """Per-seed in-distribution perplexity of ``v``: the scored targets, each read with exactly
    T tokens before it (a sliding window). Every 8T ratio is taken against it: the 1x tail gives
    its targets 0 to T - 1 tokens of context, so a ratio to it understates a loss past T."""
    return ppl(runs, v, None, "sliding")


def race_checks(runs, bigram: float) -> list[Check]:
    """What makes a race able to decide: every model beats the byte bigram at T, and the
    measurement sees a break where one is known (the learned table reads untrained rows past
    T: its perplexity at 8T must exceed its in-distribution perplexity by more than 10 %)."""
    at_t = {v: ppl(runs, v, "1x").tolist() for v in ch09.SCHEMES}
    learned = paired_ratio(ppl(runs, "learned", "8x"), reference(runs, "learned"))
    return [beats_baseline(at_t, bigram, name="every model beats the byte bigram at T"),
            positive_control("the measurement sees a known break (learned table, 8T / T > 1.1)",
                             learned.low > 1.1, f"learned 8T / T {learned.format('.2f')}")]


def _growth(runs, v: str) -> torch.Tensor:
    return ppl(runs, v, "8x") / reference(runs, v)


def race_claims(runs, size: Any, bigram: float, suffix: str = "") -> dict[str, Claim]:
    """The race's claims, decided from ``runs`` (labelled with ``size``), each with the checks."""
    checks, kw = race_checks(runs, bigram), dict(size=size)
    others = [v for v in ch09.SCHEMES if v != "ALiBi"]
    runner = min(others, key=lambda v: float(ppl(runs, v, "8x").log().mean()))
    best_other = min(("ALiBi", "RoPE", "T5"), key=lambda v: float(_growth(runs, v).log().mean()))

    def claim(key, text, est, threshold, direction, quantity, extra=()):
        return Claim(text, est, threshold=threshold, direction=direction, quantity=quantity,
                     id=f"ch09_{key}{suffix}", checks=[*checks, *extra], **kw)

    return {
        "rope": claim("rope_extrapolates", "RoPE extrapolates: its perplexity at 8T is within "
                      "10% of its perplexity reading T tokens", paired_ratio(ppl(runs, "RoPE"),
                      reference(runs, "RoPE")), 1.1, "<",
                      "RoPE perplexity at 8T / reading T tokens"),
        "alibi_best": claim("alibi_best", "ALiBi has the lowest perplexity at 8T",
                            paired_ratio(ppl(runs, runner), ppl(runs, "ALiBi")), 1.0, ">",
                            f"perplexity at 8T of the next best ({runner}) / ALiBi's"),
        "alibi_flat": claim("alibi_flat", "ALiBi's perplexity stays flat from T to 8T (within 5%)",
                            paired_ratio(ppl(runs, "ALiBi"), reference(runs, "ALiBi")), 1.05, "<",
                            "ALiBi perplexity at 8T / reading T tokens"),
        "t5": claim("t5_extrapolates", "T5's bias extrapolates: its perplexity at 8T is within "
                    "10% of its perplexity reading T tokens", paired_ratio(ppl(runs, "T5"),
                    reference(runs, "T5")), 1.1, "<", "T5 perplexity at 8T / reading T tokens"),
        "press": claim("press_order", "As in Press et al.'s Figure 1, sinusoidal degrades faster "
                       "with length than rotary", paired_ratio(_growth(runs, "sinusoidal"),
                       _growth(runs, "RoPE")), 1.0, ">",
                       "(sinusoidal 8T / reading T) / (RoPE 8T / reading T)"),
        "nope": claim("nope_best", "NoPE degrades less from T to 8T than RoPE, ALiBi and T5 "
                      "(Kazemnejad et al.)", paired_ratio(_growth(runs, "NoPE"),
                      _growth(runs, best_other)), 1.0, "<",
                      f"(NoPE 8T / reading T) / (the same for the flattest of the three, "
                      f"{best_other})"),
    }


def context_claims(runs, size: Any, bigram: float, suffix: str = "",
                   ngram: float | None = None) -> dict[str, Claim]:
    """Does a flat curve mean the model *uses* the longer input? Each scheme's perplexity at 8T
    against the same targets read with exactly T tokens of context (a sliding window), with a
    positive control: the same comparison sees the context a model uses within T (its tail at
    1x, where a target has T/2 tokens of context on average, against the sliding window). With
    ``ngram`` (the byte n-gram's perplexity on the same targets), the scheme must also beat it at
    T: a model that loses to a few bytes of context cannot show use of more than T."""
    out = {}
    for v in ("ALiBi", "T5", "NoPE"):
        control = paired_ratio(ppl(runs, v, "1x"), ppl(runs, v, None, "sliding"))
        checks = [race_checks(runs, bigram)[0], positive_control(
            "the comparison sees context used within T (1x tail / sliding > 1)",
            control.low > 1.0, f"{v}: {control.format('.3f')}")]
        if ngram is not None:
            checks.append(beats_baseline(ppl(runs, v, "1x").tolist(), ngram,
                                         name=f"{v} beats the byte n-gram at T"))
        out[v] = Claim(f"{v} uses context beyond T: at 8T its perplexity is below reading "
                       "each target with the last T tokens only",
                       paired_ratio(ppl(runs, v), ppl(runs, v, None, "sliding")), threshold=1.0,
                       direction="<", quantity=f"{v} perplexity at 8T / sliding window of T",
                       id=f"ch09_uses_context_{v.lower()}{suffix}", checks=checks, size=size)
    return out


def mechanism_claims(runs, p: dict, size: Any, bigram: float, cx=None,
                     cx_size: Any = None) -> dict[str, Claim]:
    """Attention past T against uniform attention's share, and Chen et al.'s score blow-up: from
    the context record ``cx`` when given (the largest score of the last query past T over the
    largest within T, per window and head), else from the race's mean |score| by distance."""
    T = p["seq_len"]
    uniform = uniform_far_mass(ch09.FACTORS[-1] * T, T)
    checks = race_checks(runs, bigram)[:1]
    out = {v: Claim(f"{v}'s last layer puts more attention past T than uniform attention would",
                    summarize(runs.values(v, "attention", "far_mass")), threshold=uniform,
                    direction=">", quantity=f"{v}: share of last-layer attention at distance >= T "
                    f"at 8T (uniform: {uniform:.3f})", id=f"ch09_far_mass_{v.lower()}",
                    checks=checks, size=size, fmt=".3f") for v in ("RoPE", "ALiBi", "T5", "NoPE")}
    if cx is None:
        worst = [max(r["RoPE"]["score_ratio"]["plain"]) for _, r in runs.items()]
        what = "largest mean |score| past T / within T, worst layer"
    else:
        worst = [max(f / n for f, n in zip(r["RoPE"]["scores"]["plain"]["far"],
                                           r["RoPE"]["scores"]["plain"]["near"]))
                 for _, r in cx.items()]
        what = "largest score of the last query past T / within T, worst layer"
    out["scores"] = Claim("In the trained RoPE model, attention scores past T are far larger "
                          "(over 1.5x) than any within T", summarize(worst), threshold=1.5,
                          direction=">", quantity=what, id="ch09_score_blowup", checks=checks,
                          size=size if cx is None else cx_size)
    return out


def stretch_claims(runs, size: Any, bigram: float, ft_last: int) -> dict[str, Claim]:
    """Zero-shot and fine-tuned claims on the stretched RoPE model."""
    checks = [beats_baseline(ppl(runs, "RoPE", "1x").tolist(), bigram,
                             name="the RoPE model beats the byte bigram at T")]

    def ft(v):  # perplexity at 8T after the last fine-tune step
        return torch.tensor([r[v]["ft_nll"][-1] for _, r in runs.items()]).exp()

    def claim(key, text, est, threshold, direction, quantity):
        return Claim(text, est, threshold=threshold, direction=direction, quantity=quantity,
                     id=f"ch09_{key}", checks=checks, size=size)

    return {
        "pi_zero": claim("pi_zero_shot", "Position interpolation without fine-tuning costs "
                         "perplexity at the training length", paired_ratio(
                             ppl(runs, "PI", "1x"), ppl(runs, "RoPE", "1x")), 1.0, ">",
                         "PI / plain RoPE perplexity at T, no fine-tune"),
        "pi_8x": claim("pi_zero_8x", "Zero-shot at 8T, PI beats plain RoPE", paired_ratio(
            ppl(runs, "PI"), ppl(runs, "RoPE")), 1.0, "<", "PI / plain RoPE at 8T, no fine-tune"),
        "yarn_pi": claim("yarn_beats_pi", "Zero-shot at 8T, YaRN beats PI", paired_ratio(
            ppl(runs, "YaRN"), ppl(runs, "PI")), 1.0, "<", "YaRN / PI at 8T, no fine-tune"),
        "yarn_temp": claim("yarn_temperature", "YaRN's attention temperature helps without "
                           "fine-tuning at 8T", paired_ratio(ppl(runs, "YaRN"), ppl(
                               runs, "YaRN, no temperature")), 1.0, "<",
                           "YaRN / YaRN without temperature at 8T, no fine-tune"),
        "pi_ft": claim("pi_finetune", "After the fine-tune, PI beats plain RoPE fine-tuned the "
                       "same way at 8T", paired_ratio(ft("PI"), ft("RoPE")), 1.0, "<",
                       f"PI / plain RoPE at 8T after {ft_last} steps"),
        "yarn_ft": claim("yarn_finetune", "After the fine-tune, YaRN beats PI at 8T",
                         paired_ratio(ft("YaRN"), ft("PI")), 1.0, "<",
                         f"YaRN / PI at 8T after {ft_last} steps"),
    }


def _context_checks(cx, v: str, bigram: float) -> list[Check]:
    """``v`` beats the byte bigram at T (its last held-out point), and the planted-copy test sees
    retrieval where the model has trained: a copy T/2 back inside a window of T lowers the loss
    of the repeat by more than 0.02 nats per byte (whole interval)."""
    control = summarize(copy_gain(cx, v, "control"))
    at_t = [math.exp(r[v]["curve"][-1]) for _, r in cx.items()]
    return [beats_baseline(at_t, bigram, name=f"{v} beats the byte bigram at T"),
            positive_control("the copy test sees retrieval within T (gain at T/2 > 0.02 nats)",
                             control.low > 0.02, f"{v}: {control.format('.3f')} nats per byte")]


def copy_gain(cx, v: str, key: str) -> list[float]:
    """Per seed: loss of the repeated segment without the planted copy minus with it (nats per
    byte), for the copy ``key`` bytes back (``"2T"``, ..., or ``"control"``)."""
    node = (lambda r: r[v]["control"]) if key == "control" else (lambda r: r[v]["copy"][key])
    return [node(r)["none"] - node(r)["plant"] for _, r in cx.items()]


def retrieval_claims(cx, size: Any, bigram: float, key: str) -> dict[str, Claim]:
    """For each scheme of the context record ``cx``: a copy planted ``key`` back (in units of T)
    in a window of 8T helps at least half as much as one T/2 back inside a window of T (the
    ratio of the two gains, per seed)."""
    out = {}
    for v in cx[cx.seeds[0]]:
        # a control gain at or below 0 fails the check (the verdict is then "cannot decide")
        far, near = copy_gain(cx, v, key), copy_gain(cx, v, "control")
        ratio = [a / max(b, 1e-6) for a, b in zip(far, near)]
        out[v] = Claim(f"{v} retrieves a string planted {key} back at least half as well as "
                       "one within T", summarize(ratio), threshold=0.5, direction=">",
                       quantity=f"{v}: gain from a copy {key} back in a window of 8T / gain from "
                       "a copy T/2 back in a window of T",
                       id=f"ch09_retrieves_{key.replace('.', '_').lower()}_{v.lower()}",
                       checks=_context_checks(cx, v, bigram), size=size, fmt=".2f")
    return out


def dilution(cx, v: str) -> list[float]:
    """Per seed: growth of the last layer's attention entropy from T to 8T, as a share of the
    growth uniform attention's entropy makes over the same lengths (0: attention keeps its
    spread; 1: it spreads like uniform attention)."""
    a, b = f"{ch09.FACTORS[0]}x", f"{ch09.FACTORS[-1]}x"
    return [(r[v]["attention"][b]["entropy"] - r[v]["attention"][a]["entropy"])
            / (r[v]["attention"][b]["uniform_entropy"] - r[v]["attention"][a]["uniform_entropy"])
            for _, r in cx.items()]


def dilution_claims(cx, size: Any, bigram: float) -> dict[str, Claim]:
    """For each scheme: its last-layer attention dilutes with length, i.e. its entropy grows from
    T to 8T by more than half as much as uniform attention's."""
    return {v: Claim(f"{v}'s attention dilutes with length like uniform attention",
                     summarize(dilution(cx, v)), threshold=0.5, direction=">",
                     quantity=f"{v}: entropy growth T to 8T / uniform attention's",
                     id=f"ch09_dilutes_{v.lower()}", checks=_context_checks(cx, v, bigram)[:1],
                     size=size, fmt=".2f") for v in cx[cx.seeds[0]]}
