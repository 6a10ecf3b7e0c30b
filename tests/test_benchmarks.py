"""The benchmark scripts' shared options: sizes with a tiny ``--quick`` value, explicit flags win."""

from __future__ import annotations

from benchmarks import bench_flash, bench_mla
import torch

from benchmarks._harness import QUICK_REPEATS, bench_parser, cache_snapshot
from llmviz.attention import KVCache, LatentCache


def _parser():
    return bench_parser("doc", sizes=dict(seq=(2048, 40), d_model=(256, 32)), threads=[1, 0])


def test_defaults_and_dashed_size_options():
    args = _parser().parse_args([])
    assert (args.seq, args.d_model, args.threads, args.repeats, args.quick) == (2048, 256, [1, 0], 5, False)
    assert _parser().parse_args(["--d-model", "64", "--threads", "2"]).d_model == 64


def test_quick_takes_the_tiny_sizes_but_not_over_explicit_flags():
    args = _parser().parse_args(["--quick", "--seq", "100"])
    assert (args.seq, args.d_model, args.repeats) == (100, 32, QUICK_REPEATS)
    assert _parser().parse_args(["--quick", "--repeats", "3"]).repeats == 3


def test_quick_also_sets_the_options_a_script_adds_itself():
    parser = bench_parser(None, sizes={}, quick={"presets": ["gpt2"]})
    parser.add_argument("--presets", nargs="*", default=["gpt2", "llama2", "mistral"])
    assert parser.parse_args(["--quick"]).presets == ["gpt2"]
    assert parser.parse_args(["--quick", "--presets", "llama2"]).presets == ["llama2"]
    assert parser.parse_args([]).presets == ["gpt2", "llama2", "mistral"]


def test_a_cache_snapshot_takes_a_step_and_leaves_the_original_as_it_was():
    k = torch.zeros(1, 2, 3, 4)
    kv = KVCache()
    kv.update(0, k, k)
    snap = cache_snapshot(kv)
    assert snap.keys[0] is kv.keys[0]  # the same tensors, no copy
    snap.update(0, k[:, :, :1], k[:, :, :1])
    assert (snap.length(), kv.length()) == (4, 3) and type(snap) is KVCache
    latent = LatentCache()
    latent.update(0, torch.zeros(1, 3, 8), torch.zeros(1, 3, 2))
    snap = cache_snapshot(latent)
    snap.update(0, torch.zeros(1, 1, 8), torch.zeros(1, 1, 2))
    assert (snap.length(), latent.length()) == (4, 3)


def test_device_option_only_where_asked():
    assert not hasattr(_parser().parse_args([]), "device")
    args = bench_parser(None, sizes={}, device=True).parse_args(["--device", "cpu"])
    assert args.device == "cpu" and args.threads == 1


def test_a_benchmark_runs_at_its_quick_size(capsys):
    rows = bench_mla.main(["--quick"])
    assert len(rows) == 2 and all(r.ratio.mean > 0 for r in rows)
    assert "cache 64 tokens" in capsys.readouterr().out


def test_the_vmapped_trainer_in_bench_train_does_what_train_does():
    # bench_train times the stacked models against train() on the same work: the comparison is
    # fair only if both compute the same thing (batches, AdamW, schedule, clipping per model)
    from benchmarks.bench_train import StackedTrainer, make_models, model_config
    from llmviz.training import TrainConfig, train

    cfg = model_config(16, 1, 16)
    config = TrainConfig(steps=6, warmup=2, batch_size=4, seq_len=16, grad_clip=0.05)
    tokens = torch.randint(0, 256, (2000,), generator=torch.Generator().manual_seed(0))
    stacked = StackedTrainer(make_models(cfg, 2, torch.device("cpu")), tokens, config)
    stacked.run()
    for i, model in enumerate(make_models(cfg, 2, torch.device("cpu"))):
        history = train(model, tokens, config=TrainConfig(**{**vars(config), "seed": i}),
                        progress=False)
        assert max(history.grad_norm) > config.grad_clip  # the clip acted
        got = [step[i] for step in stacked.losses]
        torch.testing.assert_close(torch.tensor(got), torch.tensor(history.loss),
                                   rtol=1e-4, atol=1e-5)


def test_bench_train_runs_at_its_quick_size():
    from benchmarks import bench_train

    rows = bench_train.main(["--quick", "--no-compile", "--repeats", "1"])
    assert [r.name.split(":")[0] for r in rows] == ["threads", "processes", "vmap", "batch"]
    assert all(r.ours.median > 0 and r.peer.median > 0 for r in rows)


def test_the_flash_benchmark_checks_equality_and_times_three_ratios(capsys):
    rows = bench_flash.main(["--quick", "--device", "cpu"])
    assert len(rows) == 3 and all(r.ratio.mean > 0 for r in rows)
    out = capsys.readouterr().out
    assert "saved for backward" in out and "max gradient difference" in out
