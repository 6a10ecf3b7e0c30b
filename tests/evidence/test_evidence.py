"""llmviz.evidence: intervals that cover, verdicts that follow the data, seeds in parallel.

The statistics are checked where the truth is known: simulated normal samples (coverage of the
t interval), scipy's t quantiles where scipy is installed and textbook values otherwise.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from llmviz.evidence import (
    CHAPTER_ENV,
    CLAIMS_DIR_ENV,
    FAILS,
    HOLDS,
    UNRESOLVED,
    Claim,
    Estimate,
    decide,
    glue_number,
    paired,
    paired_bootstrap,
    paired_ratio,
    run_seeds,
    summarize,
    t_quantile,
)


# ----------------------------------------------------------------------------- t quantiles
@pytest.mark.parametrize(
    "df, q",  # two-sided 95% multipliers from any t table
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (9, 2.262), (29, 2.045)],
)
def test_t_quantile_table(df, q):
    assert t_quantile(0.975, df) == pytest.approx(q, abs=5e-4)
    assert t_quantile(0.025, df) == pytest.approx(-q, abs=5e-4)  # symmetric


def test_t_quantile_against_scipy_and_normal_limit():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 6, 7, 30, 101, 1000):
        for p in (0.6, 0.9, 0.975, 0.995, 0.01):
            assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-8, abs=1e-9)
    assert t_quantile(0.975, 100_000) == pytest.approx(1.95996, abs=1e-4)  # the normal's


# ----------------------------------------------------------------------------- intervals
def test_t_interval_covers_the_true_mean_95_percent_of_the_time():
    gen = torch.Generator().manual_seed(7)
    true_mean, trials = 3.0, 2000
    samples = true_mean + 2.0 * torch.randn(trials, 5, generator=gen, dtype=torch.float64)
    hits = sum(
        (e := summarize(row)).low <= true_mean <= e.high for row in samples
    )
    assert 0.93 <= hits / trials <= 0.97
    # a z interval (1.96 instead of t(4) = 2.776) would under-cover at n=5: the t matters
    z_hits = sum(
        abs(row.mean().item() - true_mean) <= 1.96 * row.std().item() / math.sqrt(5)
        for row in samples
    )
    assert z_hits / trials < 0.91


def test_summarize_closed_form():
    e = summarize([1.0, 2.0, 3.0])
    assert (e.mean, e.std, e.n, e.kind) == (2.0, 1.0, 3, "mean")
    half = t_quantile(0.975, 2) / math.sqrt(3)
    assert (e.low, e.high) == pytest.approx((2.0 - half, 2.0 + half))
    one = summarize([4.0])
    assert not one.resolved and "no interval" in str(one)


def test_summarize_cuts_the_interval_at_a_floor():
    lengths = [15.0, 35.0, 21.0]  # three seeds of a length: the t interval reaches below 0
    free, cut = summarize(lengths), summarize(lengths, floor=0)
    assert free.low < 0 < cut.low + 1e-12 and cut.low == 0.0
    assert (cut.mean, cut.high, cut.std, cut.n) == (free.mean, free.high, free.std, free.n)
    assert "[0, " in cut.format(".0f")
    # a floor the interval does not reach changes nothing; one value gives no interval to cut
    assert summarize(lengths, floor=-100) == free
    assert not summarize([4.0], floor=0).resolved
    with pytest.raises(ValueError, match="lies below floor=20"):
        summarize(lengths, floor=20)
    for bad, err in ((float("nan"), ValueError), ("0", TypeError), (True, TypeError)):
        with pytest.raises(err, match="floor"):
            summarize(lengths, floor=bad)


def test_paired_is_tighter_than_unpaired_on_correlated_runs():
    gen = torch.Generator().manual_seed(0)
    seed_luck = torch.randn(6, generator=gen, dtype=torch.float64)  # shared by both variants
    a = 1.0 + seed_luck + 0.05 * torch.randn(6, generator=gen, dtype=torch.float64)
    b = 0.8 + seed_luck + 0.05 * torch.randn(6, generator=gen, dtype=torch.float64)
    d = paired(a, b)
    assert d.kind == "difference" and d.n == 6
    assert d.mean == pytest.approx((a - b).mean().item())
    ea, eb = summarize(a), summarize(b)
    unpaired_half = t_quantile(0.975, 10) * math.sqrt(ea.std**2 / 6 + eb.std**2 / 6)
    assert (d.high - d.low) / 2 < unpaired_half / 5
    assert d.low > 0  # the 0.2 gap is resolved paired; unpaired it is buried in seed luck
    assert ea.low < eb.high


def test_paired_ratio_is_a_geometric_mean():
    r = paired_ratio([2.0, 8.0], [1.0, 2.0])  # ratios 2 and 4
    assert r.kind == "ratio" and r.mean == pytest.approx(math.sqrt(8.0))
    assert r.low < r.mean < r.high
    assert r.mean / r.low == pytest.approx(r.high / r.mean)  # symmetric in log space
    assert str(r).startswith("2.83x [")


def test_paired_bootstrap_per_target():
    gen = torch.Generator().manual_seed(1)
    base = torch.rand(4000, generator=gen) * 3  # per-token losses of one variant
    better = base - 0.05 + 0.1 * torch.randn(4000, generator=gen)
    e = paired_bootstrap(base, better, n_boot=500)
    assert e.kind == "difference" and e.n == 4000
    assert e.low < e.mean < e.high
    assert e.low < 0.05 < e.high and e.low > 0
    same = paired_bootstrap(base, base.clone(), n_boot=200)
    assert same.low == same.high == 0.0


# ----------------------------------------------------------------------------- verdicts
def _est(low: float, high: float) -> Estimate:
    return Estimate(mean=(low + high) / 2, std=1.0, n=5, low=low, high=high, kind="difference")


def test_verdict_flips_with_the_data():
    gen = torch.Generator().manual_seed(3)
    noise = 0.1 * torch.randn(5, generator=gen, dtype=torch.float64)
    up = Claim("the effect is positive", summarize(0.5 + noise), device="cpu")
    down = Claim("the effect is positive", summarize(-0.5 + noise), device="cpu")
    flat = Claim("the effect is positive", summarize(noise - noise.mean()), device="cpu")
    assert (up.verdict, down.verdict, flat.verdict) == (HOLDS, FAILS, UNRESOLVED)
    below = Claim("ours is faster", paired_ratio([1.0, 1.1, 0.9], [2.0, 2.1, 1.9]),
                  threshold=1.0, direction="<", device="cpu")
    assert below.verdict == HOLDS


@pytest.mark.parametrize(
    "low, high, direction, verdict",
    [
        (0.1, 0.3, ">", HOLDS), (-0.3, -0.1, ">", FAILS), (-0.1, 0.1, ">", UNRESOLVED),
        (-0.2, 0.0, ">", FAILS),  # touching the threshold is not "above" it
        (-0.3, -0.1, "<", HOLDS), (0.1, 0.3, "<", FAILS), (0.0, 0.2, "<", FAILS),
    ],
)
def test_decide_table(low, high, direction, verdict):
    assert decide(_est(low, high), threshold=0.0, direction=direction) == verdict


def test_exact_values_and_single_runs():
    assert decide(Estimate.exact(32.0), threshold=1.0) == HOLDS
    assert decide(summarize([5.0]), threshold=1.0) == UNRESOLVED
    c = Claim("KV bytes shrink", Estimate.exact(32.0), threshold=1.0, device="cpu")
    assert "computed" in str(c) and c.interval.startswith("exact")


# ----------------------------------------------------------------------------- display
def test_claim_renders_claim_effect_interval_and_verdict():
    c = Claim("GQA costs under 0.1 nats", paired([2.31, 2.35, 2.30], [2.30, 2.30, 2.28]),
              threshold=0.1, direction="<", quantity="loss(GQA) - loss(MHA)", id="ch03_gqa",
              device="cpu", size="cpu")
    for text in (str(c), c._repr_markdown_(), c._repr_html_()):
        for part in ("GQA costs under 0.1 nats", c.verdict, c.effect, "n = 3", "size cpu"):
            assert part in text
    page = c._repr_html_()
    assert page.startswith('<div class="llmviz-claim" id="claim-ch03_gqa"')
    assert "color:inherit" in page and "background:rgba(" in page  # reads on dark themes
    assert c.effect == "+0.0267" and c.interval.startswith("[") and c.test.endswith("< 0.1")
    assert c.record()["n"] == 3 and c.record()["id"] == "ch03_gqa"


def test_glue_outside_a_kernel_returns_the_texts():
    c = Claim("x is positive", summarize([1.0, 1.2, 0.9]), device="cpu")
    glued = c.glue("ch00_x")
    assert glued["ch00_x_verdict"] == HOLDS
    assert glued["ch00_x_interval"] == c.interval and glued["ch00_x_n"] == "3"
    assert glue_number("ch00_lr", 3e-4, ".0e") == "3e-04"


# ----------------------------------------------------------------------------- registry
def test_registry_writes_one_line_per_claim(tmp_path, monkeypatch):
    monkeypatch.setenv(CLAIMS_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(CHAPTER_ENV, "02_multi_head_attention")
    a = Claim("a holds", summarize([1.0, 1.1, 1.2]), id="a", device="cpu")
    b = Claim("b straddles", summarize([-1.0, 1.1, 0.2]), id="b", device="cpu")
    a._repr_html_()
    a._repr_markdown_()  # the same claim shown twice is one record
    b.glue("ch02_b")
    path = tmp_path / "02_multi_head_attention.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[0]["chapter"] == "02_multi_head_attention"
    assert rows[0]["verdict"] == HOLDS and rows[1]["verdict"] == UNRESOLVED
    assert rows[0]["n"] == 3 and rows[0]["size"] in ("live run, cpu size", "live run, full size")
    assert rows[0]["torch"] == torch.__version__ and rows[0]["device"] == "cpu"
    explicit = Claim("c", summarize([1.0, 2.0]), id="c", chapter="gallery", device="cpu")
    assert explicit.register() == tmp_path / "gallery.jsonl"


def test_no_registry_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(CLAIMS_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert Claim("a", summarize([1.0, 2.0]), device="cpu").register() is None
    assert not os.listdir(tmp_path)


# ----------------------------------------------------------------------------- seeds
def _experiment(seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 256, generator=gen)  # large enough for a matmul to use threads
    return {"mha": {"loss": (x @ x).abs().mean()}, "gqa": {"loss": float(x.abs().mean())},
            "seed": seed}


def test_run_seeds_parallel_equals_serial_and_keeps_seed_order(cpu_only):
    seeds = [5, 1, 3, 2]
    par = run_seeds(_experiment, seeds, processes=2)
    ser = run_seeds(_experiment, seeds, processes=1)
    assert par.parallel and not ser.parallel
    assert par.seeds == seeds == ser.seeds
    assert par.values("seed") == [5.0, 1.0, 3.0, 2.0]
    assert par.values("mha", "loss") == ser.values("mha", "loss")  # bit for bit
    assert dict(par.items()) == dict(ser.items())
    assert par.summary("gqa", "loss").n == 4
    assert isinstance(paired(par.values("mha", "loss"), par.values("gqa", "loss")), Estimate)
    before = torch.get_num_threads()
    with_threads = run_seeds(lambda s: {"t": torch.get_num_threads()}, [0, 1], processes=1)
    assert with_threads.values("t") == [1.0, 1.0] and torch.get_num_threads() == before


def test_run_seeds_with_a_closure_and_a_failing_seed(cpu_only):
    offset = 10.0
    runs = run_seeds(lambda s: {"v": s + offset}, range(3), processes=2)  # not picklable
    assert runs.values("v") == [10.0, 11.0, 12.0]

    def boom(seed: int) -> dict:
        if seed == 2:
            raise ArithmeticError("bad seed")
        return {"v": 1.0}

    with pytest.raises(RuntimeError, match=r"fn\(2\) failed in a worker process"):
        run_seeds(boom, range(3), processes=2)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: summarize([]), ValueError, r"values is empty; pass one value per run"),
        (lambda: summarize([1.0, float("nan")]), ValueError, r"values\[1\] must be finite"),
        (lambda: summarize("123"), TypeError, r"values must be a sequence of numbers"),
        (lambda: summarize(torch.ones(2, 2)), ValueError, r"must be 1-D .* shape \(2, 2\)"),
        (lambda: summarize([1.0, 2.0], level=95), ValueError, r"level must lie .* got 95"),
        (lambda: paired([1.0, 2.0], [1.0]), ValueError, r"got 2 a and 1 b"),
        (lambda: paired_ratio([1.0, -2.0], [1.0, 1.0]), ValueError, r"a holds -2.0"),
        (lambda: paired_bootstrap(torch.ones(3), torch.ones(4)), ValueError,
         r"same targets; got shapes \(3,\) and \(4,\)"),
        (lambda: t_quantile(0.975, 0), ValueError, r"df \(number of values - 1\) must be a positive int, got 0"),
        (lambda: t_quantile(1.5, 3), ValueError, r"p must lie strictly between 0 and 1, got 1.5"),
        (lambda: decide(0.3), TypeError, r"estimate must be an llmviz Estimate .* got float"),
        (lambda: decide(_est(0, 1), direction=">="), ValueError, r"direction='>=' is not"),
        (lambda: Claim("", _est(0, 1)), ValueError, r"text must be the claim in words"),
        (lambda: Claim("a", _est(0, 1), id="ch 2"), ValueError, r"id='ch 2' must be letters"),
        (lambda: Claim("a", _est(0, 1), fmt="%d"), ValueError, r"fmt='%d' is not a float"),
        (lambda: Claim("a", [0.1, 0.2]), TypeError, r"got list"),
        (lambda: Claim("a", _est(0, 1), device="cpu").glue("ch-2"), ValueError,
         r"prefix must be an identifier like 'ch02_induction', got 'ch-2'"),
        (lambda: run_seeds(3, [0]), TypeError, r"fn must be callable as fn\(seed\), got int"),
        (lambda: run_seeds(_experiment, []), ValueError, r"seeds is empty; pass e.g."),
        (lambda: run_seeds(_experiment, [1, 1]), ValueError, r"seed 1 appears twice"),
        (lambda: run_seeds(_experiment, [0.5]), TypeError, r"every seed must be an int, got 0.5"),
        (lambda: run_seeds(_experiment, [0], processes=0), ValueError,
         r"processes must be a positive int, got 0"),
        (lambda: run_seeds(lambda s: [s], [0]), TypeError,
         r"fn\(0\) must return a dict of name -> number"),
        (lambda: run_seeds(lambda s: {"a": "x"}, [0]), TypeError,
         r"fn\(0\)\['a'\] must be a number"),
        (lambda: run_seeds(_experiment, [0]).values("mha", "nope"), KeyError,
         r"seed 0 has no \('mha', 'nope'\)"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU present")
def test_run_seeds_runs_serially_once_cuda_is_initialised():
    torch.zeros(1, device="cuda")  # a forked child could not use CUDA from here on
    runs = run_seeds(lambda s: {"v": torch.full((1,), float(s), device="cuda").sum()}, range(3))
    assert not runs.parallel and runs.strategy == "serial"
    assert runs.values("v") == [0.0, 1.0, 2.0]


def test_proportion_is_the_wilson_interval():
    from llmviz.evidence import proportion

    est = proportion(3, 10)
    assert est.mean == pytest.approx(0.3)
    # Wilson 95% for 3 of 10, from the closed form evaluated by hand: [0.1078, 0.6032]
    assert (est.low, est.high) == (pytest.approx(0.1078, abs=1e-4), pytest.approx(0.6032, abs=1e-4))
    none, every = proportion(0, 5), proportion(5, 5)
    assert none.low == 0.0 and 0 < none.high < 0.5  # never collapses to [0, 0]
    assert every.high == 1.0 and 0.5 < every.low < 1
    wide, narrow = proportion(5, 10), proportion(500, 1000)
    assert (wide.high - wide.low) > 5 * (narrow.high - narrow.low)
    assert proportion(3, 10, level=0.5).high < est.high


@pytest.mark.parametrize(("k", "n", "err", "match"), [
    (3, 0, ValueError, "n"), (11, 10, ValueError, r"\[0, 10\]"), (-1, 10, ValueError, "k must"),
    (2.0, 10, TypeError, "int count"), (True, 10, TypeError, "int count"),
])
def test_proportion_bad_input(k, n, err, match):
    from llmviz.evidence import proportion

    with pytest.raises(err, match=match):
        proportion(k, n)


def test_glue_text_returns_text_and_checks_input():
    from llmviz.evidence import glue_text

    assert glue_text("ch00_phrase", "more than") == "more than"
    with pytest.raises(TypeError, match="glue_number"):
        glue_text("ch00_phrase", 0.5)
    with pytest.raises(ValueError, match="identifier-like"):
        glue_text("not a name", "x")


# ----------------------------------------------------------------------------- grid of jobs
def _variant_run(variant: str, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(128, 128, generator=gen)
    scale = {"mha": 1.0, "gqa": 2.0, "mqa": 3.0}[variant]
    return {"loss": float((scale * x @ x).abs().mean()), "seed": seed}


def test_run_grid_equals_run_seeds_over_variants(cpu_only):
    from llmviz.evidence import run_grid

    variants, seeds = ["mha", "gqa", "mqa"], [2, 0, 1]
    grid = run_grid(_variant_run, variants, seeds, processes=2)
    whole = run_seeds(lambda s: {v: _variant_run(v, s) for v in variants}, seeds, processes=1)
    assert grid.parallel and grid.seeds == seeds
    assert dict(grid.items()) == dict(whole.items())  # number for number, in seed order
    assert list(grid[0]) == variants
    assert grid.values("gqa", "seed") == [2.0, 0.0, 1.0]
    serial = run_grid(_variant_run, variants, seeds, processes=1)
    assert not serial.parallel and dict(serial.items()) == dict(grid.items())


@pytest.mark.parametrize(("variants", "seeds", "err", "match"), [
    ([], [0], ValueError, "variants is empty"),
    (["a", "a"], [0], ValueError, "distinct"),
    ("ab", [0], TypeError, "sequence of str"),
    ([1], [0], TypeError, "str name"),
    (["a"], [], ValueError, "seeds is empty"),
    (["a"], [0, 0], ValueError, "distinct"),
    (["a"], [0.5], TypeError, "int"),
])
def test_run_grid_bad_input(variants, seeds, err, match):
    from llmviz.evidence import run_grid

    with pytest.raises(err, match=match):
        run_grid(lambda v, s: {"x": 1.0}, variants, seeds)


def test_run_grid_names_the_failing_pair():
    from llmviz.evidence import run_grid

    def boom(variant, seed):
        if (variant, seed) == ("b", 1):
            raise ArithmeticError("no good")
        return {"x": 1.0}

    with pytest.raises(RuntimeError, match=r"fn\('b', 1\) failed: ArithmeticError: no good"):
        run_grid(boom, ["a", "b"], range(2), processes=2)
    with pytest.raises(TypeError, match="callable"):
        run_grid(3, ["a"], [0])
