"""Chapter 19's recall task: no answer without a lookup; the baseline that measures it."""

from __future__ import annotations

import pytest
import torch

from llmviz.experiments import ch19
from llmviz.training.recall import multi_query_recall, no_recall_baseline, recall_by_position


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_every_key_asked_once_is_solved_by_elimination():
    # the chapter's earlier task: 4 pairs, each asked once; the last answer is forced
    task = multi_query_recall(batch_size=2048, n_pairs=4, generator=_gen())
    base = no_recall_baseline(task, 4)
    assert base[-1] == pytest.approx(1.0)
    assert base.mean() > 0.5  # H_4 / 4 = 0.52, and more with repeated values


def test_queries_with_replacement_leave_no_shortcut():
    p = ch19.SIZES["long"]
    base = torch.tensor(ch19.baseline(**p))
    assert len(base) == p["n_queries"]
    assert base.max() < 0.25 and base.mean() > 1 / p["n_values"]  # the mode of 8 values, not 1/64


def test_with_replacement_draws_repeats_and_more_queries_than_pairs():
    task = multi_query_recall(batch_size=64, n_pairs=4, n_queries=12, replace=True, generator=_gen())
    assert task.inputs.shape[1] == 2 * (4 + 12) - 1 and task.mask.sum(1).eq(12).all()
    with pytest.raises(ValueError, match="or pass replace=True"):
        multi_query_recall(batch_size=2, n_pairs=4, n_queries=5)


def test_targets_are_the_stated_values():
    task = multi_query_recall(batch_size=32, n_pairs=6, n_queries=6, replace=True, generator=_gen(1))
    for b in range(32):
        pairs = dict(zip(task.inputs[b, 0:12:2].tolist(), task.inputs[b, 1:12:2].tolist()))
        for p in task.mask[b].nonzero().flatten().tolist():
            assert pairs[int(task.inputs[b, p])] == int(task.targets[b, p])


def test_baseline_refuses_a_wrong_pair_count():
    task = multi_query_recall(batch_size=4, n_pairs=4, generator=_gen())
    with pytest.raises(ValueError, match="n_pairs=5 does not match"):
        no_recall_baseline(task, 5)


def test_variants_have_matched_parameters_and_a_run_records_its_curve():
    p = dict(ch19.SIZES["cpu"], steps=2, eval_every=1, eval_size=16)
    counts = {}
    for v in ch19.VARIANTS:
        out = ch19.recall_run(v, 0, **p)
        counts[v] = out["params"]
        assert len(out["curve"]) == 3 and len(out["by_position"]) == p["n_queries"]
    spread = (max(counts.values()) - min(counts.values())) / min(counts.values())
    assert spread < 0.05, counts
    again = ch19.recall_run("deltanet", 0, prefix=1, **p)
    assert set(again) == {"curve"}  # a prefix returns only what is measured at fixed steps
    assert again["curve"] == pytest.approx(ch19.recall_run("deltanet", 0, **p)["curve"][:2])


def test_per_position_accuracy_matches_the_overall_accuracy():
    from llmviz.training.recall import recall_accuracy, recall_model

    task = multi_query_recall(batch_size=16, n_pairs=3, generator=_gen(2))
    torch.manual_seed(0)
    model = recall_model("softmax", vocab_size=32, d_model=16, n_layers=1, n_heads=2)
    assert recall_by_position(model, task).mean() == pytest.approx(float(recall_accuracy(model, task)))


def _hand_task():
    # stated: k0 v10, k1 v10, k2 v11; asked: k1, k1 (a repeat), k2, k0
    full = torch.tensor([[0, 10, 1, 10, 2, 11, 1, 10, 1, 10, 2, 11, 0, 10]])
    mask = torch.zeros(1, 13, dtype=torch.bool)
    mask[:, 6::2] = True
    from llmviz.training.data import Task

    return Task(full[:, :-1], full[:, 1:], mask)


def test_copy_eliminate_on_a_hand_made_sequence():
    task = _hand_task()
    # first query: pool {10, 10, 11}, the most common value 10 is right; a uniform guess 2/3.
    # second: k1 again, copied. Third: k2 is new, pool {10, 11} (one 10 given), a tie: 1/2.
    # Fourth: k0 is new, pool {10}: forced.
    assert ch19.copy_eliminate(task, 3).tolist() == pytest.approx([1.0, 1.0, 0.5, 1.0])
    assert ch19.copy_eliminate(task, 3, guess="uniform").tolist() == pytest.approx(
        [2 / 3, 1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="n_pairs=4 does not match"):
        ch19.copy_eliminate(task, 4)
    with pytest.raises(ValueError, match="guess must be"):
        ch19.copy_eliminate(task, 3, guess="mode")


def test_copy_eliminate_is_elimination_without_repeats_and_beats_it_with_them():
    # distinct values (a vocabulary far larger than the pairs): guessing the most common value is
    # a uniform guess, and the frequency answer of no_recall_baseline is never the better one
    gen = _gen(3)
    for _ in range(3):
        once = multi_query_recall(batch_size=64, n_pairs=5, n_keys=8, n_values=10**6,
                                  generator=gen)
        assert ch19.copy_eliminate(once, 5).tolist() == pytest.approx(
            no_recall_baseline(once, 5).tolist())
        rep = multi_query_recall(batch_size=64, n_pairs=5, n_queries=9, n_keys=8,
                                 n_values=10**6, replace=True, generator=gen)
        assert (ch19.copy_eliminate(rep, 5) >= no_recall_baseline(rep, 5).double() - 1e-6).all()
        assert ch19.copy_eliminate(rep, 5).mean() > no_recall_baseline(rep, 5).mean()


def test_the_shortcut_on_the_evaluation_set_climbs_and_stays_below_the_control():
    p = ch19.SIZES["long"]
    line = torch.tensor(ch19.shortcut(**p))
    base = torch.tensor(ch19.baseline(**p))
    assert len(line) == p["n_queries"]
    assert line[0] == pytest.approx(float(base[0]))  # nothing asked yet: the most common value
    assert (line[1:] > base[1:]).all() and line[-1] > line[0] + 0.3  # repeats pile up
    assert line.mean() < 0.9  # the positive control's bar is above it
