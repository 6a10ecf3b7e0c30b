"""Chapter 11's experiments: Xiong et al.'s gradients, the learning-rate sweep, depth."""

from __future__ import annotations

import math

import pytest
import torch

from llmviz.evidence import CANNOT_DECIDE
from llmviz.evidence.seeds import Runs
from llmviz.experiments import ch11, ch11_analysis

TINY = dict(d_model=16, n_layers=2, steps=4, warmup=2, batch=2, curve_every=2, val_windows=8)


def test_grad_profile_is_the_autograd_gradient_of_each_ffn():
    p = dict(d_model=16, batch=2, seq_len=16)
    out = ch11.grad_profile("post L=3 xavier", 0, **p)
    assert len(out["ffn_grad"]) == 3 and out["first"] == out["ffn_grad"][0] and out["last"] == out["ffn_grad"][-1]
    # independently: rebuild the same model and batch, take the up_proj gradient alone
    torch.manual_seed(0)
    model = ch11.model_for("post", 3, 16, "xavier")
    x, y = ch11.random_batches(ch11.data()[0], batch_size=2, seq_len=16,
                               generator=torch.Generator().manual_seed(0))
    torch.nn.functional.cross_entropy(model(x).logits.flatten(0, 1), y.flatten()).backward()
    up = model.layers[2].mlp.up_proj.weight.grad.norm().item()
    down = model.layers[2].mlp.down_proj.weight.grad.norm().item()
    assert out["last"] == pytest.approx(math.hypot(up, down), rel=1e-5)
    assert ch11.grad_profile("post L=3 xavier", 0, prefix=1, **p) == out  # nothing is trained


def test_xavier_init_drops_the_residual_scaling():
    torch.manual_seed(0)
    book = ch11.model_for("pre", 8, 64, "book")
    torch.manual_seed(0)
    xav = ch11.model_for("pre", 8, 64, "xavier")
    down_b, down_x = book.layers[0].mlp.down_proj.weight, xav.layers[0].mlp.down_proj.weight
    assert down_b.std().item() == pytest.approx(64 ** -0.5 / 4, rel=0.1)  # 1/sqrt(C)/sqrt(2L)
    assert down_x.std().item() == pytest.approx(math.sqrt(2 / sum(down_x.shape)), rel=0.1)


def test_training_run_prefix_and_divergence():
    full = ch11.train_placement("pre", 2, 1e-2, 2, 0, TINY)
    assert len(full["curve"]) == 3 and full["loss"] == full["curve"][-1] and full["diverged"] == 0.0
    part = ch11.train_placement("pre", 2, 1e-2, 2, 0, TINY, prefix=2)
    assert part["curve"] == pytest.approx(full["curve"][:2], rel=1e-5)
    blown = ch11.train_placement("post", 2, 1e4, 0, 0, dict(TINY, steps=20, curve_every=10))
    assert blown["diverged"] == 1.0 and blown["loss"] == ch11.UNIFORM and len(blown["curve"]) == 3


def test_variant_names_parse_and_bad_input_names_the_fix():
    assert ch11.parse_variant("post lr=1e-2 warmup=0") == {"placement": "post", "lr": "1e-2", "warmup": "0"}
    assert ch11.parse_variant("pre L=6 xavier") == {"placement": "pre", "L": "6", "init": "xavier"}
    assert len(ch11.lr_variants()) == 2 * 2 * len(ch11.LRS)
    with pytest.raises(ValueError, match="must start with one of"):
        ch11.parse_variant("sandwich L=6")
    with pytest.raises(ValueError, match="init must be 'book' or 'xavier'"):
        ch11.model_for("pre", 2, 16, "kaiming")
    with pytest.raises(ValueError, match=r"prefix must be an int .* \[1, 4\]"):
        ch11.train_placement("pre", 2, 1e-2, 2, 0, TINY, prefix=0)


def _sweep(cells):
    """cells: {(placement, warmup, lr): [loss per seed]} -> Runs."""
    return Runs({s: {f"{p} lr={lr} warmup={w}": {"loss": v[s], "diverged": float(v[s] >= ch11.UNIFORM)}
                     for (p, w, lr), v in cells.items()} for s in range(3)})


def _cells(post_low, post_mid, warm) -> dict:
    """Pre-norm trains at 1e-2 and 1e-1 and diverges at 1; post-norm's losses at 1e-2 and 1e-1
    (no warmup) are given, it diverges at 1, and ``warm`` is ``(rate, losses)`` with warmup."""
    big = ch11.UNIFORM
    return {("pre", "0", "1e-2"): [2.0, 2.1, 2.0], ("pre", "0", "1e-1"): [2.1, 2.2, 2.15],
            ("pre", "0", "1"): [big, big, big], ("post", "0", "1e-2"): post_low,
            ("post", "0", "1e-1"): post_mid, ("post", "0", "1"): [big, big, big],
            ("post", "1", warm[0]): warm[1]}


def test_lr_claims_on_known_data():
    cells = _cells([2.2, 2.3, 2.2], [3.4, 3.5, 3.3], ("1e-1", [2.3, 2.2, 2.4]))
    table = ch11_analysis.lr_table(_sweep(cells))
    assert ch11_analysis.lr_star(table, bigram=2.4) == "1e-1"
    claims = ch11_analysis.lr_claims(table, "test", bigram=2.4, plateau=3.4)
    assert claims["post_behind"].verdict == "holds"
    assert claims["warmup_rescues"].verdict == "holds"
    # if pre-norm at the top rate does not fail, the control fails and nothing is decided
    cells[("pre", "0", "1")] = [2.3, 2.3, 2.35]
    table = ch11_analysis.lr_table(_sweep(cells))
    assert ch11_analysis.lr_claims(table, "test", bigram=2.4, plateau=3.4)["post_behind"].verdict == CANNOT_DECIDE


def test_lr_claims_need_post_norm_to_train_somewhere():
    cells = _cells([3.3, 3.35, 3.3], [3.4, 3.5, 3.3], ("1e-2", [2.3, 2.2, 2.3]))
    table = ch11_analysis.lr_table(_sweep(cells))
    assert ch11_analysis.top_rate(table, "post", bigram=2.4) is None
    claims = ch11_analysis.lr_claims(table, "test", bigram=2.4, plateau=3.4)
    failed = [c for c in claims["post_behind"].checks if not c.passed]
    assert [c.name for c in failed] == ["post-norm trains somewhere: beats the byte bigram at some rate"]
    assert claims["post_behind"].verdict == CANNOT_DECIDE
    # with post-norm training at the lowest rate, warmup is judged at the next rate up
    cells[("post", "0", "3e-3")] = [2.2, 2.25, 2.2]
    cells[("post", "1", "3e-3")] = [2.2, 2.2, 2.2]
    table = ch11_analysis.lr_table(_sweep(cells))
    assert ch11_analysis.top_rate(table, "post", bigram=2.4) == "3e-3"
    assert ch11_analysis.rate_above(table, "3e-3") == "1e-2" and ch11_analysis.rate_above(table, "1") is None
    claims = ch11_analysis.lr_claims(table, "test", bigram=2.4, plateau=3.4)
    assert "lr 1e-2" in claims["warmup_rescues"].text and claims["warmup_rescues"].verdict == "holds"
    assert ch11_analysis.n_left(table["post", "1", "1e-2"], plateau=3.4) == 3


def test_without_lr_star_no_rate_stands_in():
    big = ch11.UNIFORM
    cells = {(p, "0", lr): [big, big, big] for p in ("pre", "post") for lr in ("1e-2", "1e-1", "1")}
    cells[("pre", "0", "1e-2")] = [3.0, 3.1, 3.05]  # off the plateau, but above the bigram
    table = ch11_analysis.lr_table(_sweep(cells), lrs=("1e-2", "1e-1", "1"), warmups=("0",))
    assert ch11_analysis.lr_star(table, bigram=2.4) is None
    claims = ch11_analysis.lr_claims(table, "test", bigram=2.4, plateau=3.4)
    assert "post_behind" not in claims
    quote = ch11_analysis.post_behind_quote(claims)
    assert quote.startswith(CANNOT_DECIDE) and "no rate" in quote and "+0" not in quote
    cells = _cells([2.2, 2.3, 2.2], [3.4, 3.5, 3.3], ("1e-1", [2.3, 2.2, 2.4]))
    claims = ch11_analysis.lr_claims(ch11_analysis.lr_table(_sweep(cells)), "test", bigram=2.4, plateau=3.4)
    assert ch11_analysis.post_behind_quote(claims).startswith("holds (")


def test_merge_runs():
    from llmviz.experiments.sweep import merge_runs
    a = Runs({s: {"x": {"loss": 1.0 + s}} for s in range(3)})
    b = Runs({s: {"y": {"loss": 2.0 + s}} for s in range(3)})
    m = merge_runs(a, b)
    assert m.values("x", "loss") == [1.0, 2.0, 3.0] and m.values("y", "loss") == [2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="more than one"):
        merge_runs(a, a)
    with pytest.raises(ValueError, match="seeds"):
        merge_runs(a, Runs({s: {"y": {"loss": 1.0}} for s in range(4)}))


def test_depth_and_xiong_claims_on_known_data():
    loss = {"post L=6": [2.0, 2.1, 2.0, 2.05], "pre L=6": [1.9, 1.95, 1.92, 1.9],
            "post L=24": [3.4, 3.3, 3.45, 3.4], "pre L=24": [1.9, 1.92, 1.91, 1.88]}
    runs = Runs({s: {v: {"loss": x[s]} for v, x in loss.items()} for s in range(4)})
    c = ch11_analysis.depth_claims(runs, "test", bigram=2.4)
    assert c["deep"].verdict == "holds" and c["depth"].verdict == "holds"
    assert ch11_analysis.depth_claims(runs, "test", bigram=1.5)["deep"].verdict == CANNOT_DECIDE
    assert "threshold" not in c  # no middle depth below 20
    # a middle depth at which post-norm fails too: not a threshold beyond 20 layers
    loss.update({"post L=12": [3.3, 3.35, 3.4, 3.3], "pre L=12": [1.9, 1.9, 1.92, 1.9]})
    runs = Runs({s: {v: {"loss": x[s]} for v, x in loss.items()} for s in range(4)})
    c = ch11_analysis.depth_claims(runs, "test", bigram=2.4, depths=(6, 12, 24))
    assert c["threshold"].verdict == "does not hold" and "12 layers" in c["threshold"].text
    # the threshold's positive control: post-norm at 6 layers leaves the plateau (3.45) in every seed
    c = ch11_analysis.depth_claims(runs, "test", bigram=2.4, depths=(6, 12, 24), plateau=3.45)
    assert c["threshold"].verdict == "does not hold" and c["threshold"].checks[-1].passed
    loss["post L=6"] = [2.0, 3.4, 2.0, 3.42]  # the recipe's rate stops post-norm at 6 layers in 2 seeds
    runs = Runs({s: {v: {"loss": x[s]} for v, x in loss.items()} for s in range(4)})
    c = ch11_analysis.depth_claims(runs, "test", bigram=2.4, depths=(6, 12, 24), plateau=3.45)
    assert c["threshold"].verdict == CANNOT_DECIDE
    assert "2 of 4 seeds" in c["threshold"].checks[-1].detail
    # the control gates every depth claim: a rate that stops post-norm at 6 layers says nothing
    # about depth at 24, however far behind post-norm ends there
    assert c["deep"].verdict == CANNOT_DECIDE and c["depth"].verdict == CANNOT_DECIDE
    assert not c["deep"].checks[-1].passed
    assert ch11_analysis.depth_claims(runs, "test", bigram=2.4, depths=(6, 12, 24))["deep"].verdict == "holds"
    g = {}
    for s in range(3):
        g[s] = {}
        for L in (6, 12, 48):
            e = 1 + 0.01 * s
            g[s][f"post L={L} xavier"] = {"first": 0.5 * e, "last": 0.9 * e}
            g[s][f"pre L={L} xavier"] = {"first": 0.6 * e, "last": 0.3 * e * (6 / L) ** 0.5 * (1 + 0.02 * s)}
    x = ch11_analysis.xiong_claims(Runs(g), "test", layers=(6, 12, 48))
    assert {k: v.verdict for k, v in x.items()} == {"post_grows_6": "holds", "post_grows_12": "holds",
                                                     "post_grows_48": "holds", "pre_shrinks": "holds",
                                                     "post_flat": "holds"}
    assert ch11_analysis.grows_summary(x) == "holds at 6, 12 and 48 layers"
    g[1]["post L=48 xavier"]["last"] = 0.2  # one seed against: 48 layers no longer resolved
    x = ch11_analysis.xiong_claims(Runs(g), "test", layers=(6, 12, 48))
    assert ch11_analysis.grows_summary(x) == "holds at 6 and 12 layers; not resolved at 48 layers"


def test_map_warm_repeats_the_maps_post_and_pre_cells_on_ten_seeds():
    from llmviz.experiments import ch11_warm

    exp = ch11_warm.MAP_WARM
    assert exp.variants == ["post warmup=0", "post warmup=18", "pre warmup=0", "pre warmup=18"]
    assert len(exp.seeds) == 10 and len(set(exp.seeds)) == 10
    long = exp.sizes["long"]
    # the chapter's stability map: 6 layers, C = 32, lr 1e-2, 56 steps, batches of 8
    assert (long["n_layers"], long["d_model"], long["lr"], long["steps"], long["batch"]) == (6, 32, 1e-2, 56, 8)
    # one job: the warmup in the variant's name is the one trained (a prefix inside it agrees)
    p = dict(exp.sizes["cpu"])
    a = exp.fn("post warmup=18", 0, prefix=14, **p)
    b = ch11.train_spread("post", p["n_layers"], p["lr"], 18, 0, p, prefix=14)
    assert a == b and len(a["curve"]) == 2
    # the same training as the first-windows runs; only the held-out targets differ
    c = ch11.train_placement("post", p["n_layers"], p["lr"], 18, 0, p, prefix=14)
    assert len(c["curve"]) == 2 and a["curve"] != c["curve"]
    assert exp.fn is ch11.spread_warm_run


def test_spread_windows_cover_the_whole_tail_without_overlap():
    val = ch11.data()[1]
    starts = ch11.spread_starts(256)
    assert starts[0] == 0 and starts[-1] == len(val) - ch11.SEQ
    assert bool((starts.diff() >= ch11.SEQ).all())  # no two windows overlap
    assert len(ch11.spread_targets(256)) == 256 * (ch11.SEQ - 1)
    # the first-windows rule covers one stretch at the start; the spread one reaches the end
    assert ch11.val_targets(256).max() < len(val) // 5 < ch11.spread_targets(256).max()
    for bad in (1, 0, True, 2.0, len(val)):
        with pytest.raises(ValueError, match="n must be an int number of windows"):
            ch11.spread_starts(bad)


def test_spread_loss_is_the_mean_cross_entropy_on_the_spread_targets(monkeypatch):
    monkeypatch.setattr(ch11, "UNIFORM", 100.0)  # an untrained model is above ln 256: no clipping here
    torch.manual_seed(0)
    model = ch11.model_for("pre", 1, 16)
    val = ch11.data()[1]
    targets = ch11.spread_targets(8)
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(val[s:s + ch11.SEQ - 1][None]).logits[0]
                            for s in ch11.spread_starts(8).tolist()])
    by_hand = torch.nn.functional.cross_entropy(logits, val[targets]).item()
    assert ch11.spread_loss(model, 8) == pytest.approx(by_hand, rel=1e-5)
    monkeypatch.undo()
    assert ch11.spread_loss(model, 8) == pytest.approx(min(by_hand, math.log(256)))
    # the plateau: the byte unigram fitted on the head, scored on the same targets
    counts = torch.bincount(ch11.data()[0], minlength=256).double()
    probs = counts / counts.sum()
    nll = -probs[val[targets]].log()
    assert ch11.spread_baselines(8)["unigram"] == pytest.approx(nll.mean().item(), rel=1e-3)
