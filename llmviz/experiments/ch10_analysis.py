"""Reading chapter 10's LayerNorm-vs-RMSNorm runs (live or recorded): checks and claims.

"RMSNorm trains as well as LayerNorm" is an equivalence, so it is tested as two one-sided
claims on the paired difference loss(RMSNorm) - loss(LayerNorm): below +``MARGIN`` and above
-``MARGIN``. Both holding means the difference lies inside the margin. The one check: both models
beat the strongest byte n-gram on the same targets (:func:`llmviz.experiments.ch10.strongest_ngram`;
a comparison of models that have learned less than counting is not informative). Power is not a
check: a one-sided claim whose interval clears its threshold has been decided whatever the power,
and a claim whose interval does not reads "not resolved"; :func:`norm_power` gives the smallest
difference the seeds detect, for the page to print beside such a reading.
"""

from __future__ import annotations

from typing import Any

from ..evidence import Check, Claim, beats_baseline, can_detect, paired
from . import ch10

__all__ = ["MARGIN", "norm_diff", "norm_checks", "norm_power", "norm_claims", "gate_duplication", "last_step_split", "longer_training_floor",
           "regularisation_note"]

#: nats/byte: the largest held-out difference still read as "trains as well". A choice made
#: before the runs (about 2% of the record's loss), not derived from data; it is not small next
#: to other architecture effects (chapter 12's gated-vs-plain feed-forward gap), so "no worse"
#: means "within this margin", and the page says so
MARGIN = 0.03


def norm_diff(runs):
    """Paired estimate of loss(RMSNorm) - loss(LayerNorm) over the seeds (nats/byte)."""
    return paired(runs.values("RMSNorm", "val_loss"), runs.values("LayerNorm", "val_loss"))


def norm_checks(runs, baseline: float, baseline_name: str = "the byte n-gram") -> list[Check]:
    """Both norms beat ``baseline`` (the n-gram's loss), the gate of both one-sided claims.

    The seeds' power is not among the checks: it cannot overturn a one-sided rejection, and a
    non-rejection already reads "not resolved" (see :func:`norm_power`).
    """
    losses = {v: runs.values(v, "val_loss") for v in ch10.VARIANTS}
    return [beats_baseline(losses, baseline, name=f"the requirement that both models beat {baseline_name}")]


def norm_power(runs) -> Check:
    """Whether the seeds detect a difference of ``MARGIN`` with 80% power: a description for
    reading a "not resolved" verdict (too few seeds, or a difference near the margin), never a
    gate on a decided one. Its ``detail`` holds the smallest detectable difference."""
    return can_detect(norm_diff(runs), MARGIN,
                      name=f"the seeds can detect a difference of {MARGIN:g} nats")


def norm_claims(runs, size: Any, baseline: float, suffix: str = "",
                baseline_name: str = "the byte n-gram") -> dict[str, Claim]:
    """The two one-sided claims, decided from ``runs`` (labelled with ``size``) behind the gate
    ``baseline`` (the loss of the n-gram named ``baseline_name``)."""
    est, checks = norm_diff(runs), norm_checks(runs, baseline, baseline_name)
    q = "loss(RMSNorm) - loss(LayerNorm), nats/byte"
    kw = dict(quantity=q, size=size, checks=checks, fmt=".3f",
              chapter="10_normalisation")
    return {
        "not_worse": Claim(f"RMSNorm trains no worse than LayerNorm: its held-out loss ends less "
                           f"than {MARGIN:g} nats above", est, threshold=MARGIN, direction="<",
                           id=f"ch10_rms_not_worse{suffix}", **kw),
        "not_better": Claim(f"RMSNorm trains no better than LayerNorm: its held-out loss ends less "
                            f"than {MARGIN:g} nats below", est, threshold=-MARGIN, direction=">",
                            id=f"ch10_rms_not_better{suffix}", **kw),
    }


def gate_duplication(seq_len: int = 64, gate: Any = None) -> dict[str, Any]:
    """The gate n-gram's loss on the scored held-out windows that occur verbatim in the training
    text and on the rest.

    The held-out tail is scored in whole windows of ``seq_len`` bytes (:func:`ch10.val_targets`);
    the help texts repeat passages, so some of those windows are copies of training text, where a
    count table that stored the passage scores far lower. Returns ``is_dup`` (a bool tensor, one
    per window), ``n_dup``, ``n`` (windows), ``all`` (the gate's loss on every window, as the pages
    score it), ``dup`` and ``clean`` (its loss on each part) and ``per_window`` (its mean loss
    per window, for pairing with a model's). ``gate``: :func:`ch10.strongest_ngram` at ``seq_len``
    when already computed (it is fitted otherwise).
    """
    import torch

    train_tokens, val = ch10.data()
    gate = ch10.strongest_ngram(seq_len) if gate is None else gate
    scored = val[: len(val) // seq_len * seq_len].view(-1, seq_len)
    train_bytes = bytes(train_tokens.tolist())
    is_dup = torch.tensor([bytes(w.tolist()) in train_bytes for w in scored])
    per_target = torch.as_tensor(gate.per_target, dtype=torch.float64)
    if per_target.numel() != len(scored) * (seq_len - 1):
        raise ValueError(f"the gate scores {per_target.numel()} targets, not the {len(scored)} windows' "
                         f"{seq_len - 1} each; pass the seq_len the gate was scored at")
    per_window = per_target.view(len(scored), -1).mean(1)
    return {"is_dup": is_dup, "n_dup": int(is_dup.sum()), "n": len(scored), "all": gate.loss,
            "dup": per_window[is_dup].mean().item(), "clean": per_window[~is_dup].mean().item(),
            "per_window": per_window, "name": gate.name}


def regularisation_note(p: dict) -> str:
    """What ``ch15_llama``'s recipe at size ``p`` does against overfitting, read from its config
    (dropout) and training config (weight decay), and what that leaves open: a clause."""
    from . import ch15

    dropout, wd = ch15.config_for(p).dropout, ch15.train_config(p, seed=0).weight_decay
    kit = (f"with dropout {dropout:g}" if dropout else "with no dropout") + f", weight decay {wd:g} and no early stop"
    return (f"that recipe trains {kit}; a held-out loss that turns up after its low point is what "
            "dropout and early stopping are for, and whether a regularised run of the same model passes the "
            "gate is not measured here, so whether this floor is the recipe's or the model size's is open")


def last_step_split(rec: Any, is_dup: Any) -> dict[str, list[float]] | None:
    """Per seed, the last model's mean loss on the copied windows (``dup``) and on the rest
    (``clean``), from a ``ch15_llama`` record that keeps ``window_loss``; None for one that does not,
    and on a Python whose corpus text is not the record's (its windows are other text: see
    :meth:`~llmviz.evidence.records.Record.corpus_note`)."""
    import torch

    if rec.corpus_note():
        return None

    try:
        windows = rec.runs.curves("llama", "window_loss")
    except KeyError:
        return None
    per = [torch.as_tensor(w, dtype=torch.float64) for w in windows]
    if any(len(w) != len(is_dup) for w in per):
        raise ValueError(f"the record scores {len(per[0])} windows, the gate {len(is_dup)}; they must be the same")
    return {"dup": [w[is_dup].mean().item() for w in per], "clean": [w[~is_dup].mean().item() for w in per]}


def longer_training_floor(copies_gap: float | None = None) -> dict[str, Any]:
    """What the book's longest-trained record says about passing the n-gram gate by training longer.

    Reads ``ch15_llama`` (a larger model than chapters 10, 12 and 13 train, trained for more steps)
    and compares the lowest point of each seed's held-out curve with the strongest byte n-gram on
    the same targets, all held-out windows. Those windows include copies of training text
    (:func:`gate_duplication`), which flatter the n-gram more than a small network; the record keeps
    its last model's loss per window (a record made before it did keeps one loss per run), so it
    can say where its models end on the windows with no copy, not where their lowest points fall:
    the sentence says both. ``copies_gap`` (nats/byte), when given, is how much the copied windows
    add to chapter 15's live model's gap to the n-gram (that chapter measures it per window);
    without it the sentence points there.

    Returns ``lows`` (per seed), ``gate``, ``margins`` (lows minus gate), ``steps``, ``passes``
    (over the training text), ``d_model``, ``n_layers``, ``rises`` (the loss ends above its lowest
    point in every seed), ``break_even`` (per seed: the loss on the copied windows above which its
    loss on the clean windows is below the n-gram's there), ``passed`` (some seed's lowest point is below the gate on all windows),
    ``dup`` (:func:`gate_duplication` without its tensors), ``last`` (per seed, the last model's loss
    on the copied windows, ``dup``, and on the rest, ``clean``; None when the record keeps no
    per-window losses), ``text``, a clause for the pages, and
    ``sentence``, the same as a question and its answer ("Would training longer pass the gate? ...");
    raises FileNotFoundError when the record is absent.
    """
    from . import ch15

    rec = ch15.LLAMA.record("long")
    p = rec.params
    curves = rec.runs.curves("llama", "curve")
    lows = [min(c) for c in curves]
    gate = ch10.strongest_ngram(p["seq_len"])
    split = gate_duplication(p["seq_len"], gate)
    dup = {k: v for k, v in split.items() if k not in ("is_dup", "per_window")}
    margins = [x - gate.loss for x in lows]
    passes = p["steps"] * p["batch_size"] * p["seq_len"] / len(ch10.data()[0])
    rises = all(c[-1] - min(c) > 0.01 for c in curves)
    passed = min(lows) < gate.loss
    # windows are equal-sized, so all = (n_dup * dup + (n - n_dup) * clean) / n per model: the loss on
    # the copied windows above which a seed's loss on the clean ones is below the n-gram's clean loss
    n, k = dup["n"], dup["n_dup"]
    break_even = [(n * x - (n - k) * dup["clean"]) / k for x in lows]
    last = last_step_split(rec, split["is_dup"])
    last_gaps = "" if last is None else ", ".join(f"{x - dup['clean']:+.3f}" for x in last["clean"])
    head = (f"the book's longest-trained record, ch15_llama (width {p['d_model']}, {p['n_layers']} layers, "
            f"{p['steps']} steps, {passes:.1f} passes over the training text), bottoms out at "
            f"{', '.join(f'{x:.3f}' for x in lows)} nats/byte per seed against the {gate.name}'s {gate.loss:.3f} "
            f"on all held-out windows")
    if passed:
        text = head + ": training longer does pass the gate at that size"
    else:
        share = ("for chapter 15's live model the copied windows add "
                 f"{copies_gap:+.3f} nats/byte to its gap to the n-gram" if copies_gap is not None else
                 "chapter 15 measures how much of a model's gap to the n-gram they make")
        text = (head + f", {min(margins):+.3f} to {max(margins):+.3f} short of it"
                + (f", and its loss rises after that low point ({regularisation_note(p)})" if rises else "")
                + f". Part of that margin is the held-out windows that occur verbatim in the training text "
                  f"({dup['n_dup']} of {dup['n']}): the n-gram scores {dup['dup']:.3f} on them against "
                  f"{dup['clean']:.3f} on the rest, and {share}. "
                + ("This Python's corpus text is not the text the record was trained on (the chapter's "
                   "first cell says so), so none of this pairs like with like here; " if last is None and rec.corpus_note() else
                   f"The record keeps one loss per run, so whether training longer passes the gate on the "
                   "windows with no copy is not measured here; " if last is None else
                   "The record keeps its last model's loss per window, not its lowest point's, so whether "
                   "training longer passes the gate on the windows with no copy is not measured here. At the "
                   f"last step, on the windows with no copy, its seeds score "
                   f"{', '.join(f'{x:.3f}' for x in last['clean'])} against the n-gram's {dup['clean']:.3f} "
                   f"({last_gaps}), and on the copied ones "
                   f"{', '.join(f'{x:.3f}' for x in last['dup'])} against its {dup['dup']:.3f}; ")
                + f"what the numbers bound: a seed's lowest point is below the n-gram's {dup['clean']:.3f} on "
                  f"the windows with no copy exactly when its own loss on the {dup['n_dup']} copied windows "
                  f"is above {', '.join(f'{x:.3f}' for x in break_even)} (per seed), against the n-gram's "
                  f"{dup['dup']:.3f} there, so it passes on clean text unless it predicts the copied passages "
                  "nearly as well as the count table does")
    return {"lows": lows, "gate": gate.loss, "margins": margins, "steps": p["steps"], "passes": passes,
            "d_model": p["d_model"], "n_layers": p["n_layers"], "rises": rises, "passed": passed, "dup": dup,
            "break_even": break_even, "last": last,
            "text": text, "sentence": f"Would training longer pass the gate? {text[0].upper()}{text[1:]}."}
