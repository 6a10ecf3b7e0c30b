"""Update latency of every explorer in a live kernel, and the weight of its static face.

An update is what the live face does when a control moves: call the explorer function with the
new parameters (torch compute) and build the plotly figure. Target: under 100 ms at default
sizes (DESIGN.md). For each explorer found in ``llmviz.explore.*`` (public ``*_explorer``
functions; those that need data get a small example), this prints the median and worst update
over the grid points next to the default (one control changed at a time, as a reader slides),
split into the explorer function (compute) and the plotly figure build (figure),
the ratio to the 100 ms target, the time to build the static face (every grid point), and the
size of its HTML (what it adds to a page of the site).

    OMP_NUM_THREADS=1 python benchmarks/bench_explorers.py [--strict] [--repeats 5] [--go-figure]

``--go-figure`` builds each update's figure as a ``go.Figure`` (the earlier live face) instead
of the plotly JSON the live face sends now, for a before/after comparison.

``--strict`` exits 1 when an explorer's median update misses the target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import plotly.graph_objects as go
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llmviz.explore as explore_pkg  # noqa: E402
from llmviz.explore import Explorer  # noqa: E402
from llmviz.explore._render import figure_json, plotly_layout, unflatten  # noqa: E402
from llmviz.training.bench import header  # noqa: E402

TARGET_S = 0.100


def _example_weights():
    g = torch.Generator().manual_seed(0)
    # 2 layers of (B, H, T, S) = (1, 4, 12, 12): a small model's per-layer output
    return [torch.softmax(torch.randn(1, 4, 12, 12, generator=g), dim=-1) for _ in range(2)]


EXAMPLES = {"weights_per_layer": _example_weights, "weights": _example_weights}


def discover() -> list[tuple[str, Explorer]]:
    """``(module.name, explorer)`` for every explorer factory in llmviz.explore.*."""
    found = []
    for qualname, fn, needs in explore_pkg.factories():
        if any(n not in EXAMPLES for n in needs):
            print(f"# skipped {qualname}: needs {list(needs)}")
            continue
        found.append((qualname, fn(**{n: EXAMPLES[n]() for n in needs})))
    return found


def _update(ex: Explorer, params: dict, base: dict | None = None) -> tuple[float, float]:
    """What the live face does on a control change: compute, then build the figure.

    With ``base`` (the layout from :func:`plotly_layout`, made once) the figure is built as the
    live face builds it, plotly JSON with the frame merged in; without, as a ``go.Figure``
    (how the live face built it before: validation of the whole figure on every update).
    A value seen before costs nothing in the live face (it is cached); this measures a miss.

    Returns ``(compute seconds, figure seconds)``.
    """
    t0 = time.perf_counter()
    frame = ex.frame(**params)
    t1 = time.perf_counter()
    if base is not None:
        figure_json(frame, base)
    else:
        fig = go.Figure(data=frame.traces, layout=ex._base_layout())
        if frame.layout:
            fig.update_layout(unflatten(frame.layout))
    return t1 - t0, time.perf_counter() - t1


def _neighbours(ex: Explorer) -> list[dict]:
    """Grid points one control away from the default: the updates a reader triggers."""
    out = []
    for c in ex.controls:
        for v in c.values:
            if v != c.default:
                out.append({**ex.defaults, c.name: v})
    return out


def measure(ex: Explorer, repeats: int, *, go_figure: bool = False) -> dict:
    points = _neighbours(ex)
    base = None if go_figure else plotly_layout(ex._base_layout())
    _update(ex, ex.defaults, base)  # warm-up (imports, caches)
    times, compute, figure = [], [], []
    for _ in range(repeats):
        for p in points:
            c, f = _update(ex, p, base)
            compute.append(c)
            figure.append(f)
            times.append(c + f)
    t0 = time.perf_counter()
    html = ex.static_html()
    static_s = time.perf_counter() - t0
    return {
        "median_s": statistics.median(times),
        "compute_s": statistics.median(compute),
        "figure_s": statistics.median(figure),
        "max_s": max(times),
        "frames": len(ex.grid()),
        "static_s": static_s,
        "html_kb": len(html.encode()) / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--go-figure", action="store_true",
                        help="build each update as a go.Figure (the earlier live face) to compare")
    args = parser.parse_args(argv)

    how = "go.Figure" if args.go_figure else "plotly JSON, as the live face"
    print(header(f"explorer update latency (compute + figure built as {how}), target < 100 ms"))
    print(f"{'explorer':36} {'median ms':>9} {'compute':>8} {'figure':>8} {'max ms':>8} "
          f"{'ratio':>6} {'frames':>6} {'static s':>8} {'html KB':>8}")
    slow = []
    for name, ex in discover():
        r = measure(ex, args.repeats, go_figure=args.go_figure)
        ratio = r["median_s"] / TARGET_S
        flag = "" if ratio < 1 else "  <- over target"
        if ratio >= 1:
            slow.append(name)
        print(f"{name:36} {r['median_s'] * 1e3:9.1f} {r['compute_s'] * 1e3:8.1f} "
              f"{r['figure_s'] * 1e3:8.1f} {r['max_s'] * 1e3:8.1f} {ratio:6.2f} "
              f"{r['frames']:6d} {r['static_s']:8.2f} {r['html_kb']:8.0f}{flag}")
    print(f"# ratio = median update / {TARGET_S * 1e3:.0f} ms target; "
          f"{len(slow)} over target{': ' + ', '.join(slow) if slow else ''}")
    return 1 if (args.strict and slow) else 0


if __name__ == "__main__":
    sys.exit(main())
