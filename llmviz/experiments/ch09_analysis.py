"""Reading chapter 9's runs (live or recorded): perplexities, baselines, checks and claims.

The same functions read the live ``cpu`` run and the ``long`` record, so the chapter can set the
two side by side and say, computed, where their verdicts differ. The claims on the stretched
RoPE model are in :mod:`.ch09_stretch_analysis`, those on the context record (planted copies,
dilution) in :mod:`.ch09_context_analysis`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from ..evidence import (Check, Claim, beats_baseline, paired_ratio, positive_control, summarize,
                        summarize_log)
from ..training.evaluation import tail_targets
from ..training.kneser_ney import NgramBaseline, best_ngram
from ..training.ngram import ByteNgram
from . import ch09
from ._ch09_probes import uniform_far_mass
from .ch09_reach import context_excess, reach

__all__ = ["stopwatch", "ppl", "reference", "ppl_estimates", "ngram_ppl", "strongest_ngram",
           "context_excess", "reach", "race_checks", "race_claims", "uses_context_within_t",
           "works_within_t", "not_broken_at_8t",
           "IN_DISTRIBUTION_PAST_T", "locality_control", "context_claims", "mechanism_claims",
           "summarize_share"]

# Schemes whose position signal past T takes only what training showed: NoPE has none. Every
# other scheme reads something new there (learned: untrained rows; sinusoidal: unseen vectors;
# RoPE: unseen angles; T5: a last bucket that held a few distances just below T in training and
# holds every distance past T at 8T; ALiBi: penalties larger than any it trained with).
IN_DISTRIBUTION_PAST_T = ("NoPE",)


def stopwatch() -> Callable[[], float]:
    """Start a clock for the page's own wall time: returns a function giving the seconds since
    this call (the chapter glues what its code took in the build)."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def ppl(runs, variant: str, key: str = "8x", field: str = "nll") -> torch.Tensor:
    """Per-seed perplexity of ``variant``: ``exp`` of ``runs[seed][variant][field][key]`` (or of
    ``[field]`` itself when ``key`` is None)."""
    keys = (variant, field) if key is None else (variant, field, key)
    return torch.tensor(runs.values(*keys), dtype=torch.float64).exp()


def ppl_estimates(runs, variants, field: str = "nll") -> dict[str, dict[int, Any]]:
    """``{variant: {factor: Estimate}}``: geometric mean of the seeds, interval on the log scale."""
    return {v: {f: summarize_log(ppl(runs, v, f"{f}x", field)) for f in ch09.FACTORS}
            for v in variants}


def summarize_share(values) -> Any:
    """Mean share (a value in (0, 1), e.g. of attention) over seeds, with a t interval taken on
    the logit scale and mapped back, so it cannot run past 0 or 1 (a t interval on the shares
    themselves does near a bound). The centre is the logistic of the mean logit; ``std`` is the
    shares' own sample standard deviation. Shares of exactly 0 or 1 are clipped to 1e-6 from
    the bound."""
    from ..evidence.stats import Estimate, t_quantile

    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    if x.numel() < 2:
        raise ValueError(f"summarize_share needs at least two runs, got {x.numel()}")
    if bool(((x < 0) | (x > 1)).any()):
        raise ValueError(f"shares must lie in [0, 1], got {x.tolist()}")
    z = torch.logit(x.clamp(1e-6, 1 - 1e-6))
    n = z.numel()
    half = t_quantile(0.975, n - 1) * float(z.std()) / math.sqrt(n)
    m = float(z.mean())
    return Estimate(mean=float(torch.sigmoid(torch.tensor(m))), std=float(x.std()), n=n,
                    low=float(torch.sigmoid(torch.tensor(m - half))),
                    high=float(torch.sigmoid(torch.tensor(m + half))))


def ngram_ppl(order: int, p: dict) -> float:
    """Perplexity of a byte n-gram of ``order`` fitted on the training bytes, on the scored
    targets of size ``p`` (the same targets at every length)."""
    train, val = ch09.data()
    targets = tail_targets(ch09._ends(p), p["seq_len"]).flatten()
    return math.exp(float(ByteNgram(order).fit(train).nll(val, targets).mean()))


def strongest_ngram(p: dict) -> NgramBaseline:
    """The stronger of the book's two byte n-grams (Kneser-Ney or absolute discounting, each with
    its order chosen on a held-out tenth of the training bytes) on the scored targets of size
    ``p``, the same at every length; ``loss`` in nats per byte. It reads at most ``order - 1``
    bytes before a target, fewer than any model here reads at T."""
    train, val = ch09.data()
    targets = tail_targets(ch09._ends(p), p["seq_len"]).flatten()
    return best_ngram(train, val, targets)


def reference(runs, v: str) -> torch.Tensor:
    """Per-seed in-distribution perplexity of ``v``: the scored targets, each read with exactly
    T tokens before it (a sliding window). Every 8T ratio is taken against it: the 1x tail gives
    its targets 0 to T - 1 tokens of context, so a ratio to it understates a loss past T."""
    return ppl(runs, v, None, "sliding")


def race_checks(runs, bigram: float) -> list[Check]:
    """What makes a race able to decide: every model beats the byte bigram at T (each target
    read with exactly T tokens before it, the reference of every ratio), and the measurement
    sees a break where one is known (the learned table reads untrained rows past T: its
    perplexity at 8T must exceed its in-distribution perplexity by more than 10 %)."""
    at_t = {v: reference(runs, v).tolist() for v in ch09.SCHEMES}
    learned = paired_ratio(ppl(runs, "learned", "8x"), reference(runs, "learned"))
    return [beats_baseline(at_t, bigram, name="every model beats the byte bigram reading T "
                           "tokens"),
            positive_control("the measurement sees a known break (learned table, 8T / T > 1.1)",
                             learned.low > 1.1, f"learned 8T / T {learned.format('.2f')}")]


def _growth(runs, v: str) -> torch.Tensor:
    return ppl(runs, v, "8x") / reference(runs, v)


def uses_context_within_t(runs, v: str) -> Check:
    """Positive control that ``v`` reads its context within T: the same targets read with fewer
    tokens (the 1x tail: 0 to T - 1 tokens before each) must score worse than read with T
    tokens (the sliding window), with the whole interval above 1."""
    control = paired_ratio(ppl(runs, v, "1x"), reference(runs, v))
    return positive_control("the comparison sees context used within T (1x tail / sliding > 1)",
                            control.low > 1.0, f"{v}: {control.format('.3f')}")


def works_within_t(runs, v: str) -> Check:
    """``v`` works as a model within T, the control the race applies to NoPE: the same targets
    read with fewer tokens (the 1x tail) score worse than read with T tokens (whole interval of
    1x tail / sliding above 1). A model that does better with less context is broken within T,
    and nothing it does past T says anything about its scheme."""
    c = uses_context_within_t(runs, v)
    return positive_control(f"{v} works as a model within T (1x tail / reading T tokens > 1)",
                            c.passed, c.detail)


def not_broken_at_8t(runs, v: str, limit: float = 1.1) -> Check:
    """``v`` is not broken at 8T, the race's own criterion for "extrapolates": its perplexity at
    8T over reading T tokens lies below ``limit`` with the whole interval. A gain measured on a
    broken model starts from a loss it has room to lower, so it does not read as retrieval."""
    g = paired_ratio(ppl(runs, v, "8x"), reference(runs, v))
    return positive_control(f"{v} is not broken at 8T (8T / reading T tokens < {limit:g}, whole "
                            "interval)", g.high < limit, f"{v}: {g.format('.2f')}")


def locality_control(runs, seq_len: int, v: str = "ALiBi", flat: float = 1.05, *,
                     paired=None) -> Check:
    """Positive control for "``v`` stays flat": a flat curve is not automatic for a model that
    reads as little context as ``v``. The comparators are the other schemes that stop gaining
    from context within T no later than ``v`` (:func:`reach`, on the paired curves of
    ``paired``, the context record; a scheme it does not measure is no comparator), that work
    as models within T
    (:func:`works_within_t`), and whose position signal past T stays in distribution
    (:data:`IN_DISTRIBUTION_PAST_T`): a scheme fed unseen positions past T breaks for that reason,
    so its growth cannot show that locality alone does not make a curve flat. The flattest
    comparator must grow past T by more than ``flat`` (whole interval). Where no comparator is
    left, the control fails and says so: the race cannot separate locality from
    out-of-distribution positions. Without ``paired`` the control fails: nothing says how far
    within T the models read."""
    name = (f"a model as local as {v} need not be flat: every scheme that is as local, works "
            f"within T and sees no unseen positions past T grows past T (> {flat:g}x)")
    if paired is None:
        return positive_control(name, False, "no paired context curve (the same targets read "
                                "with fewer than T tokens and with T) for this run, so how far "
                                "within T each model reads is not measured")
    measured = paired[paired.seeds[0]]
    reached = {u: reach(paired, u, seq_len) for u in ch09.SCHEMES if u in measured}
    r = reached[v]
    local = [u for u in reached if u != v and reached[u] <= r]
    if not local:
        return positive_control(name, False, f"{v} reads {r} tokens; no other scheme reads as few")
    growth = {u: paired_ratio(ppl(runs, u, "8x"), reference(runs, u)) for u in local}
    works = {u: works_within_t(runs, u) for u in local}
    working = [u for u in local if works[u].passed]
    valid = [u for u in working if u in IN_DISTRIBUTION_PAST_T]
    head = (f"within T reading more context stops lowering the loss (same targets) after {r} "
            f"tokens for {v}, as early or earlier for "
            + ", ".join(f"{u} ({reached[u]})" for u in local))
    broken = [u for u in local if not works[u].passed]
    if broken:
        head += ("; broken within T (1x tail / reading T tokens not above 1): "
                 + ", ".join(f"{u} {works[u].detail.split(': ', 1)[-1].split(' (')[0]}"
                             for u in broken))
    if not valid:
        ood = [u for u in working if u not in IN_DISTRIBUTION_PAST_T]
        return positive_control(name, False, head + (
            "; the working ones (" + ", ".join(f"{u}, growing {growth[u].format('.2f').split(' (')[0]}"
                                               for u in ood)
            + ") all read positions past T they never saw in training" if ood else
            "; none of them works within T")
            + ": no comparator is left, so the race cannot separate locality from "
            "out-of-distribution positions")
    flattest = min(valid, key=lambda u: growth[u].low)
    return positive_control(name, growth[flattest].low > flat,
                            f"{head}; the flattest valid comparator, {flattest}, grows "
                            f"{growth[flattest].format('.2f')}")


def _ngram_check(runs, variants, ngram: float) -> Check:
    """Every model in ``variants`` beats the byte n-gram, each target read with T tokens."""
    vals = {u: reference(runs, u).tolist() for u in variants}
    who = variants[0] if len(variants) == 1 else "every model compared"
    return beats_baseline(vals if len(variants) > 1 else vals[variants[0]], ngram,
                          name=f"{who} beats the byte n-gram reading T tokens")


def race_claims(runs, size: Any, bigram: float, suffix: str = "", *, seq_len: int | None = None,
                ngram: float | None = None, paired=None) -> dict[str, Claim]:
    """The race's claims, decided from ``runs`` (labelled with ``size``), each with the checks.

    With ``seq_len`` (T), "ALiBi stays flat" also carries :func:`locality_control`, which reads
    how far within T each model reads from ``paired`` (the context record of the same models;
    without it the control fails). With ``ngram`` (the byte n-gram's perplexity on the same targets),
    "ALiBi has the lowest perplexity" says where the n-gram stands, and every ranking of schemes
    (lowest, flat because of its scheme, Press et al.'s order, NoPE) checks that the models it
    compares beat the n-gram reading T tokens: a ranking among models that a few bytes of lookup
    beat says little about the schemes. The claims about one model's own 8T against its own
    reading of T tokens (RoPE, T5 extrapolate; this ALiBi model survives) carry the bigram check. "NoPE degrades less" carries
    NoPE's positive control (:func:`uses_context_within_t`): a NoPE model that does better with
    less context is not a working model of the others' class, and its growth compares nothing.
    """
    checks, kw = race_checks(runs, bigram), dict(size=size)
    others = [v for v in ch09.SCHEMES if v != "ALiBi"]
    runner = min(others, key=lambda v: float(ppl(runs, v, "8x").log().mean()))
    best_other = min(("ALiBi", "RoPE", "T5"), key=lambda v: float(_growth(runs, v).log().mean()))
    flat_checks = [] if seq_len is None else [locality_control(runs, seq_len, paired=paired)]
    alibi_8t = float(ppl(runs, "ALiBi").log().mean().exp())
    best_text = "ALiBi has the lowest perplexity at 8T of the six networks"
    if ngram is not None:
        best_text += (f" (a byte n-gram, reading a few bytes, scores {ngram:.2f} there, "
                      f"{'below' if ngram < alibi_8t else 'above'} ALiBi's {alibi_8t:.2f})")
    nope_control = uses_context_within_t(runs, "NoPE")
    nope_control = positive_control(
        f"NoPE works as a model within T: {nope_control.name}", nope_control.passed,
        f"{nope_control.detail}; reading T tokens NoPE "
        f"{float(reference(runs, 'NoPE').log().mean().exp()):.2f}, {best_other} "
        f"{float(reference(runs, best_other).log().mean().exp()):.2f}")

    def bar(*variants):  # the n-gram check, where the n-gram is given
        return [] if ngram is None else [_ngram_check(runs, list(variants), ngram)]

    def claim(key, text, est, threshold, direction, quantity, extra=()):
        return Claim(text, est, threshold=threshold, direction=direction, quantity=quantity,
                     id=f"ch09_{key}{suffix}", checks=[*checks, *extra], **kw)

    return {
        "rope": claim("rope_extrapolates", "These RoPE models extrapolate: their perplexity at "
                      "8T is within 10% of their own reading T tokens", paired_ratio(
                          ppl(runs, "RoPE"), reference(runs, "RoPE")), 1.1, "<",
                      "RoPE perplexity at 8T / reading T tokens"),
        "alibi_best": claim("alibi_best", best_text,
                            paired_ratio(ppl(runs, runner), ppl(runs, "ALiBi")), 1.0, ">",
                            f"perplexity at 8T of the next best ({runner}) / ALiBi's",
                            bar(*ch09.SCHEMES)),
        "alibi_flat": claim("alibi_flat", "ALiBi stays flat from T to 8T (within 5%) because of "
                            "its scheme, as in Press et al. (whether it reads the longer input is "
                            "a separate question)", paired_ratio(ppl(runs, "ALiBi"),
                            reference(runs, "ALiBi")), 1.05, "<",
                            "ALiBi perplexity at 8T / reading T tokens",
                            [*bar("ALiBi"), *flat_checks]),
        "alibi_survives": claim("alibi_survives", "This ALiBi model survives the longer input: "
                                "its perplexity at 8T is within 5% of its own perplexity reading "
                                "T tokens (a claim about these models, not about ALiBi in "
                                "models that use their context)", paired_ratio(
                                    ppl(runs, "ALiBi"), reference(runs, "ALiBi")), 1.05, "<",
                                "ALiBi perplexity at 8T / reading T tokens"),
        "t5": claim("t5_extrapolates", "These T5-bias models extrapolate: their perplexity at "
                    "8T is within 10% of their own reading T tokens", paired_ratio(
                        ppl(runs, "T5"), reference(runs, "T5")), 1.1, "<",
                    "T5 perplexity at 8T / reading T tokens"),
        "press": claim("press_order", "As in Press et al.'s Figure 1, sinusoidal degrades faster "
                       "with length than rotary", paired_ratio(_growth(runs, "sinusoidal"),
                       _growth(runs, "RoPE")), 1.0, ">",
                       "(sinusoidal 8T / reading T) / (RoPE 8T / reading T)",
                       bar("sinusoidal", "RoPE")),
        "nope": claim("nope_best", "NoPE degrades less from T to 8T than RoPE, ALiBi and T5 "
                      "(Kazemnejad et al.)", paired_ratio(_growth(runs, "NoPE"),
                      _growth(runs, best_other)), 1.0, "<",
                      f"(NoPE 8T / reading T) / (the same for the flattest of the three, "
                      f"{best_other})", [*bar("NoPE", best_other), nope_control]),
    }


def context_claims(runs, size: Any, bigram: float, suffix: str = "",
                   ngram: float | None = None) -> dict[str, Claim]:
    """Does a flat curve mean the model *uses* the longer input? Each scheme's perplexity at 8T
    against the same targets read with exactly T tokens of context (a sliding window), with a
    positive control: the same comparison sees the context a model uses within T (its tail at
    1x, where a target has T/2 tokens of context on average, against the sliding window). With
    ``ngram`` (the byte n-gram's perplexity on the same targets), the scheme must also beat it
    reading T tokens (the sliding window, the n-gram's fair match: both read a fixed context):
    a model that loses to a few bytes of context cannot show use of more than T."""
    out = {}
    for v in ("ALiBi", "T5", "NoPE"):
        checks = [race_checks(runs, bigram)[0], uses_context_within_t(runs, v)]
        if ngram is not None:  # on the reference: each target read with exactly T tokens
            checks.append(beats_baseline(reference(runs, v).tolist(), ngram,
                                         name=f"{v} beats the byte n-gram reading T tokens"))
        out[v] = Claim(f"{v} uses context beyond T: at 8T its perplexity is below reading "
                       "each target with the last T tokens only",
                       paired_ratio(ppl(runs, v), ppl(runs, v, None, "sliding")), threshold=1.0,
                       direction="<", quantity=f"{v} perplexity at 8T / sliding window of T",
                       id=f"ch09_uses_context_{v.lower()}{suffix}", checks=checks, size=size)
    return out


def mechanism_claims(runs, p: dict, size: Any, bigram: float, cx=None,
                     cx_size: Any = None, matched: Any = None) -> dict[str, Claim]:
    """Attention past T against uniform attention's share (each scheme must work within T,
    :func:`works_within_t`), and Chen et al.'s score blow-up: from ``matched`` when given (a
    ``ch09_local`` record: both maxima over T keys, see
    :func:`llmviz.experiments.ch09_local.matched_score_ratios`), else from
    the context record ``cx`` when given (the largest score of the last query past T over the
    largest within T, per window and head), else from the race's mean |score| by distance."""
    T = p["seq_len"]
    uniform = uniform_far_mass(ch09.FACTORS[-1] * T, T)
    checks = race_checks(runs, bigram)[:1]
    out = {v: Claim(f"{v}'s last layer puts more attention past T than uniform attention would",
                    summarize_share(runs.values(v, "attention", "far_mass")), threshold=uniform,
                    direction=">", quantity=f"{v}: share of last-layer attention at distance >= T "
                    f"at 8T (uniform: {uniform:.3f}; interval on the logit scale)",
                    id=f"ch09_far_mass_{v.lower()}", checks=[*checks, works_within_t(runs, v)],
                    size=size, fmt=".3f") for v in ("RoPE", "ALiBi", "T5", "NoPE")}
    if cx is None:
        worst = [max(r["RoPE"]["score_ratio"]["plain"]) for _, r in runs.items()]
        what = "largest mean |score| past T / within T, worst layer"
    else:
        worst = [max(f / n for f, n in zip(r["RoPE"]["scores"]["plain"]["far"],
                                           r["RoPE"]["scores"]["plain"]["near"]))
                 for _, r in cx.items()]
        far = ch09.FACTORS[-1] - 1
        what = (f"largest score of the last query over its {far}T keys past T / over its T keys "
                f"within T, worst layer (a maximum over {far} times as many keys)")
    score_size = size if cx is None else cx_size
    if matched is not None:
        worst = [max(r["RoPE"]["score_matched"]) for _, r in matched.runs.items()]
        what = ("largest score of the last query over a random T of its keys past T (mean of "
                f"{matched.params['draws']} draws) / over its T keys within T, worst layer")
        score_size = matched
    out["scores"] = Claim("In the trained RoPE model, attention scores past T are far larger "
                          "(over 1.5x) than any within T", summarize(worst), threshold=1.5,
                          direction=">", quantity=what, id="ch09_score_blowup", checks=checks,
                          size=score_size)
    return out
