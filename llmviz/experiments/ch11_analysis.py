"""Reading chapter 11's runs (live or recorded): Xiong et al.'s gradients, the learning-rate
sweep, depth and the stabilisers at a rate above pre-norm's range, as checks and claims decided
from the data.

The same functions read a live ``cpu`` run and the ``long`` record, so the chapter sets the two
side by side.
"""

from __future__ import annotations

from typing import Any

from ..evidence import (CANNOT_DECIDE, Check, Claim, beats_baseline, paired, paired_ratio,
                        positive_control, summarize)
from . import ch11
from .ch11_tricks import CONTROL

__all__ = ["CHAPTER", "LEFT", "ALL_LRS", "xiong_claims", "grows_summary", "lr_table", "top_rate", "lr_star",
           "rate_above", "n_left", "lr_checks", "lr_claims", "post_behind_quote", "depth_gap", "depth_checks", "depth_claims",
           "rescue_checks", "rescue_claims", "n_off"]

CHAPTER = "11_residual_and_norm_placement"
#: a run "trains" if it ends below the byte bigram; a run "fails" if it ends within this many
#: nats of the unigram plateau, above it, or diverged
LEFT = 0.25


def _v(runs, variant: str, key: str) -> list[float]:
    return runs.values(variant, key)


# --- Xiong et al. -----------------------------------------------------------------------------

def xiong_claims(runs, size: Any, depths=(6, 48), layers=ch11.XIONG_DEPTHS, init: str = "xavier",
                 suffix: str = "") -> dict[str, Claim]:
    """Claims on the feed-forward gradient at initialisation (paired over seeds):

    * ``post_grows_<L>`` for every depth ``L`` in ``layers``: in an ``L``-deep post-norm stack
      the last layer's gradient is larger than the first's (Xiong et al.: post-norm's gradient
      grows towards the output), decided at each recorded depth, not at one;
    * ``pre_shrinks``: pre-norm's last-layer gradient is smaller at ``depths[1]`` layers than at
      ``depths[0]`` (their bound falls as 1/sqrt(L));
    * ``post_flat``: post-norm's last-layer gradient falls less with depth than pre-norm's (a
      ratio of the two placements' ``depths[1] / depths[0]`` ratios: it does not test whether
      post-norm's own falls at all, which both falling would also satisfy).
    """
    lo, hi = depths
    layers = tuple(layers)
    g = {(p, L, k): _v(runs, f"{p} L={L} {init}", k) for p in ch11.PLACEMENTS
         for L in sorted({lo, hi, *layers}) for k in ("first", "last")}
    kw = dict(size=size, chapter=CHAPTER, fmt=".2f")
    post_ratio = [a / b for a, b in zip(g["post", hi, "last"], g["post", lo, "last"])]
    pre_ratio = [a / b for a, b in zip(g["pre", hi, "last"], g["pre", lo, "last"])]
    out = {f"post_grows_{L}": Claim(
        f"At initialisation ({init}) the last layer of a {L}-layer post-norm stack gets a "
        "larger feed-forward gradient than its first layer", paired_ratio(
            g["post", L, "last"], g["post", L, "first"]), threshold=1.0,
        direction=">", quantity=f"gradient norm, last / first layer, post-norm, {L} layers",
        id=f"ch11_xiong_post_grows_{L}{suffix}", **kw) for L in layers}
    out["pre_shrinks"] = Claim(
        f"Pre-norm's last-layer feed-forward gradient at initialisation is smaller at {hi} layers "
        f"than at {lo}", paired_ratio(g["pre", hi, "last"], g["pre", lo, "last"]), threshold=1.0,
        direction="<", quantity=f"last-layer gradient norm, pre-norm, {hi} / {lo} layers",
        id=f"ch11_xiong_pre_shrinks{suffix}", **kw)
    out["post_flat"] = Claim(
        f"From {lo} to {hi} layers, post-norm's last-layer feed-forward gradient at initialisation "
        "falls less than pre-norm's (their ratios compared; whether post-norm's falls at all is "
        "not tested)",
        paired_ratio(post_ratio, pre_ratio), threshold=1.0, direction=">",
        quantity=f"(post {hi}/{lo}) / (pre {hi}/{lo}), last-layer gradient",
        id=f"ch11_xiong_post_flat{suffix}", **kw)
    return out


def grows_summary(claims: dict[str, Claim]) -> str:
    """One phrase for the ``post_grows_<L>`` claims of :func:`xiong_claims`, grouped by verdict,
    e.g. "holds at 12 layers; not resolved at 6, 24 and 48 layers"."""
    by: dict[str, list[str]] = {}
    for key, c in claims.items():
        if key.startswith("post_grows_"):
            by.setdefault(c.verdict.removesuffix(" at this size"), []).append(key.removeprefix("post_grows_"))
    if not by:
        raise ValueError("no post_grows_<L> claims among " + ", ".join(claims))

    def depths(ls):
        return ls[0] if len(ls) == 1 else ", ".join(ls[:-1]) + " and " + ls[-1]
    return "; ".join(f"{v} at {depths(ls)} layers" for v, ls in by.items())


# --- the learning-rate sweep ------------------------------------------------------------------

#: every rate of the sweep: ``ch11_lr_low``'s two below ``ch11_lr``'s grid, then that grid
ALL_LRS = ("1e-3", "3e-3", *ch11.LRS)


def lr_table(runs, lrs=ALL_LRS, warmups=("0", "1")) -> dict[tuple[str, str, str], dict]:
    """``{(placement, warmup, lr): {"loss": [...], "diverged": k}}`` from a sweep's runs (the
    variants that are there)."""
    out = {}
    for w in warmups:
        for p in ch11.PLACEMENTS:
            for lr in lrs:
                name = f"{p} lr={lr} warmup={w}"
                try:
                    loss = _v(runs, name, "loss")
                except KeyError:
                    continue
                out[p, w, lr] = {"loss": loss, "diverged": int(sum(_v(runs, name, "diverged")))}
    return out


def _trains(cell: dict, bigram: float) -> bool:
    return max(cell["loss"]) < bigram


def _fails(cell: dict, plateau: float) -> bool:
    return min(cell["loss"]) > plateau - LEFT or cell["diverged"] == len(cell["loss"])


def top_rate(table: dict, placement: str, bigram: float, warmup: str = "0") -> str | None:
    """The largest learning rate at which ``placement`` trains in every seed (ends below the
    bigram) with (``warmup="1"``) or without warmup; None if there is none."""
    ok = [lr for (p, w, lr), cell in table.items() if p == placement and w == warmup
          and _trains(cell, bigram)]
    return max(ok, key=float) if ok else None


def lr_star(table: dict, bigram: float, warmup: str = "0") -> str | None:
    """The largest learning rate at which pre-norm trains in every seed (ends below the bigram),
    chosen from pre-norm's runs alone; None if there is none."""
    return top_rate(table, "pre", bigram, warmup)


def rate_above(table: dict, lr: str | None) -> str | None:
    """The next rate of the table's grid above ``lr`` (the smallest rate if ``lr`` is None);
    None above the largest."""
    grid = sorted({r for (_, _, r) in table}, key=float)
    if lr is None:
        return grid[0] if grid else None
    higher = [r for r in grid if float(r) > float(lr)]
    return higher[0] if higher else None


def n_left(cell: dict, plateau: float) -> int:
    """How many seeds of a cell ended at least :data:`LEFT` nats below the plateau."""
    return n_off(cell["loss"], plateau)


def lr_checks(table: dict, bigram: float, plateau: float, warmup: str = "0") -> list[Check]:
    """Each placement trains somewhere on the grid (so the sweep asks where each one stops,
    not whether this recipe can train it at all: a positive control for post-norm), and the
    failure measure fires where failure is certain: at the grid's largest rate pre-norm fails
    too."""
    checks = []
    for p in ch11.PLACEMENTS:
        top = top_rate(table, p, bigram, warmup)
        checks.append(beats_baseline(table[p, warmup, top]["loss"], bigram,
                                     name=f"{p}-norm trains somewhere: beats the byte bigram at lr {top}")
                      if top is not None else
                      Check(f"{p}-norm trains somewhere: beats the byte bigram at some rate", False,
                            "at no rate of the grid"))
    top = max((lr for (p, w, lr) in table if p == "pre" and w == warmup), key=float)
    cell = table["pre", warmup, top]
    checks.append(positive_control(
        f"the failure measure fires where failure is certain (pre-norm at lr {top})",
        _fails(cell, plateau),
        f"losses {' / '.join(f'{x:.2f}' for x in cell['loss'])}, diverged {cell['diverged']}, "
        f"plateau {plateau:.2f}"))
    return checks


def lr_claims(table: dict, size: Any, bigram: float, plateau: float,
              suffix: str = "") -> dict[str, Claim]:
    """At lr*, the largest rate at which pre-norm trains without warmup: post-norm ends at least
    ``LEFT`` nats behind it (``post_behind``; absent when no rate of the grid trains pre-norm:
    :func:`post_behind_quote` then says so, and no other rate stands in). At the first rate above post-norm's own range
    (the largest rate at which it trains without warmup), where it fails without warmup,
    warmup lowers its loss by more than 0.05 nats (``warmup_rescues``); a test at lr* itself
    would compare two runs on the plateau when that rate is far above post-norm's range."""
    checks = lr_checks(table, bigram, plateau)
    star = lr_star(table, bigram)
    kw = dict(size=size, chapter=CHAPTER, fmt=".2f", checks=checks)
    out = {}
    if star is not None:  # no stand-in rate: without lr* the claim has nothing to compare
        post, pre = table["post", "0", star]["loss"], table["pre", "0", star]["loss"]
        out["post_behind"] = Claim(
            f"At the largest rate at which pre-norm trains without warmup (lr {star}), post-norm "
            f"ends at least {LEFT:g} nats behind it", paired(post, pre), threshold=LEFT,
            direction=">", quantity=f"loss(post) - loss(pre) at lr {star}, no warmup",
            id=f"ch11_lr_post_behind{suffix}", **kw)
    edge = rate_above(table, top_rate(table, "post", bigram))
    if edge is not None and ("post", "1", edge) in table:
        out["warmup_rescues"] = Claim(
            f"At lr {edge}, the first rate of the grid above post-norm's range without warmup, "
            "warmup lowers post-norm's final loss by more than 0.05 nats",
            paired(table["post", "0", edge]["loss"], table["post", "1", edge]["loss"]),
            threshold=0.05, direction=">",
            quantity=f"loss(no warmup) - loss(warmup), post-norm, lr {edge}",
            id=f"ch11_lr_warmup_rescues{suffix}", **kw)
    return out


def post_behind_quote(claims: dict[str, Claim]) -> str:
    """What the page quotes for ``post_behind``: its verdict and effect, or, without lr*, that
    no rate of the grid trains pre-norm, so there is no rate to compare at."""
    c = claims.get("post_behind")
    if c is None:
        return (f"{CANNOT_DECIDE}: no rate of its grid trains pre-norm without warmup (every "
                "pre-norm run ends above the byte bigram), so there is no rate at which to compare")
    return f"{c.verdict} ({c.effect} nats)"


# --- depth ------------------------------------------------------------------------------------

def depth_gap(runs, L: int) -> list[float]:
    """Per seed: loss(post-norm) - loss(pre-norm) at ``L`` layers."""
    return [a - b for a, b in zip(_v(runs, f"post L={L}", "loss"), _v(runs, f"pre L={L}", "loss"))]


def depth_checks(runs, bigram: float, depths) -> list[Check]:
    """Pre-norm beats the byte bigram at every depth: the yardstick has learned more than
    one byte of context."""
    return [beats_baseline({f"pre L={L}": _v(runs, f"pre L={L}", "loss") for L in depths}, bigram,
                           name="pre-norm beats the byte bigram at every depth")]


def shallow_post_trains(runs, lo: int, plateau: float) -> Check:
    """The threshold claim's positive control: with the depth runs' recipe, post-norm at the
    shallowest depth leaves the unigram plateau in every seed. If it does not, the recipe's rate
    (not depth) already stops post-norm, and "it still trains at 12 layers" cannot be tested."""
    losses = _v(runs, f"post L={lo}", "loss")
    off = sum(v < plateau - LEFT for v in losses)
    return Check(f"the requirement that the recipe let post-norm train at {lo} layers: every seed leaves the unigram plateau",
                 off == len(losses), f"{off} of {len(losses)} seeds end {LEFT:g}+ nats below {plateau:.2f}")


def depth_claims(runs, size: Any, bigram: float, depths=(6, 24), suffix: str = "",
                 plateau: float | None = None, warmup: int | None = None) -> dict[str, Claim]:
    """``deep``: post-norm ends at least 0.1 nats behind pre-norm at the deepest depth;
    ``depth``: the post-minus-pre gap is larger at the deepest than at the shallowest depth;
    with a middle depth below 20 (12 in the record), ``threshold``: Wang et al.'s claim read as
    a threshold, post-norm *trains* there (ends less than 0.1 nats behind pre-norm), as it must
    if it only fails beyond 20-30 layers. Given the unigram ``plateau``, the threshold claim is
    decided only if post-norm trains at the shallowest depth (:func:`shallow_post_trains`), and
    so are ``deep`` and ``depth``: a failure at the deepest depth under a rate that already stops
    post-norm at the shallowest is evidence about the rate, not about depth. ``deep`` tests
    trailing, not failing to train: its text names the recipe's ``warmup`` when given."""
    lo, hi = min(depths), max(depths)
    control = [] if plateau is None else [shallow_post_trains(runs, lo, plateau)]
    kw = dict(size=size, chapter=CHAPTER, fmt=".2f", checks=[*depth_checks(runs, bigram, depths), *control])
    mids = [L for L in depths if lo < L < 20]
    extra = {}
    if mids:
        mid = max(mids)
        extra["threshold"] = Claim(
            f"Post-norm's failure is a threshold beyond 20 layers: at {mid} layers it still trains, "
            "ending less than 0.1 nats behind pre-norm of the same depth", summarize(depth_gap(runs, mid)),
            threshold=0.1, direction="<", quantity=f"loss(post) - loss(pre), {mid} layers",
            id=f"ch11_depth_threshold{suffix}", **kw)
    return {**extra,
        "deep": Claim(f"Post-norm trails pre-norm of the same depth by at least 0.1 nats at {hi} layers"
                      + (f" with the {warmup}-step warmup" if warmup is not None else ""), summarize(depth_gap(runs, hi)), threshold=0.1, direction=">",
                      quantity=f"loss(post) - loss(pre), {hi} layers", id=f"ch11_depth_deep{suffix}", **kw),
        "depth": Claim(f"Depth hurts post-norm more than pre-norm: the post-minus-pre gap is larger at "
                       f"{hi} layers than at {lo}", paired(depth_gap(runs, hi), depth_gap(runs, lo)),
                       threshold=0.0, direction=">", quantity=f"gap({hi} layers) - gap({lo} layers)",
                       id=f"ch11_depth_grows{suffix}", **kw),
    }


# --- stabilisers above pre-norm's range ------------------------------------------------------

def n_off(losses, plateau: float) -> int:
    """How many of ``losses`` (one per seed) end at least :data:`LEFT` nats below the plateau."""
    return sum(x < plateau - LEFT for x in losses)


def rescue_checks(runs, plateau: float, *, lr: float, control_lr: float, base: str = "baseline",
                  control: str = CONTROL) -> list[Check]:
    """What makes "the trick lets the run train where the baseline does not" testable:

    * the rate is above the baseline's range: at ``lr`` no seed of ``base`` ends :data:`LEFT`
      nats below the unigram plateau (if it trains there, there is nothing to rescue);
    * the positive control: the same recipe at ``control_lr`` leaves the plateau in every seed,
      so that a baseline stuck at ``lr`` is about the rate and not a set-up that cannot train.
    """
    b, c = _v(runs, base, "loss"), _v(runs, control, "loss")
    k_b, k_c = n_off(b, plateau), n_off(c, plateau)

    def losses(xs):
        return ", ".join(f"{x:.2f}" for x in xs)
    return [
        Check(f"the rate is above the baseline's range: at lr {lr:g} no baseline seed ends {LEFT:g} nats below "
              "the unigram plateau", k_b == 0,
              f"{k_b} of {len(b)} seeds off the plateau ({losses(b)}; plateau {plateau:.2f})"),
        positive_control(
            f"the same recipe trains at lr {control_lr:g}: every baseline seed ends {LEFT:g} nats below the "
            "unigram plateau", k_c == len(c),
            f"{k_c} of {len(c)} seeds off the plateau ({losses(c)}; plateau {plateau:.2f})"),
    ]


def rescue_claims(runs, size: Any, plateau: float, *, lr: float, control_lr: float, steps: int,
                  tricks: dict[str, str], base: str = "baseline", control: str = CONTROL,
                  suffix: str = "") -> dict[str, Claim]:
    """For every ``{variant: short name}`` in ``tricks``: at ``lr``, where the baseline stays on the
    unigram plateau, the variant trains: its held-out loss ends at least :data:`LEFT` nats (the
    page's margin for leaving the plateau) below the baseline's, paired over seeds. Gated by
    :func:`rescue_checks`; ids ``ch11_<short>_rescue<suffix>``."""
    checks = rescue_checks(runs, plateau, lr=lr, control_lr=control_lr, base=base, control=control)
    b = _v(runs, base, "loss")
    return {short: Claim(
        f"At lr {lr:g} without warmup, where pre-norm alone stays on the unigram plateau, pre-norm with {name} "
        f"trains: after {steps} steps it ends at least {LEFT:g} nats below the same runs without it",
        paired(_v(runs, name, "loss"), b), threshold=-LEFT, direction="<",
        quantity=f"held-out loss: {name} - baseline (nats/byte)", id=f"ch11_{short}_rescue{suffix}",
        checks=checks, size=size, chapter=CHAPTER, fmt=".3f") for name, short in tricks.items()}
