"""Page weight of the book's matplotlib figures as 1x PNG, 2x PNG ("retina") and SVG.

Draws a representative set of the library's figures (per-head grids, the layers x heads
thumbnails, norm histograms, the 3D norm cubes, head-metric bars, a mask gallery, a line
plot) at the inline size (``llmviz.runtime.FIGURE_DPI``) and prints the bytes of each in each
format, and the total. With ``--site DIR`` it also sums the PNGs of an executed build
(``_build/jupyter_execute``, written at 1x) and scales them by the measured 2x/1x ratio: the
expected growth of the site's images.

    OMP_NUM_THREADS=1 python benchmarks/bench_figures.py [--site _build/jupyter_execute]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmviz.runtime import FIGURE_DPI  # noqa: E402


def _figures() -> dict:
    from llmviz.attention.masks import causal_mask
    from llmviz.plots.attention import (
        plot_attention_heads,
        plot_head_metrics,
        plot_mask_gallery,
        plot_model_view,
    )
    from llmviz.plots.norms import plot_norm_axes, plot_norm_distributions

    g = torch.Generator().manual_seed(0)
    w = torch.softmax(torch.randn(1, 8, 12, 12, generator=g), -1)
    tokens = [f"t{i}" for i in range(12)]
    h = torch.randn(512, 256, generator=g)
    h[::16, 7] = 60.0
    fig_line, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
    ax.plot(torch.randn(200, generator=g).cumsum(0))
    ax.set(xlabel="step", ylabel="value", title="a line plot")
    return {
        "attention heads (8 x 12x12)": plot_attention_heads(w, tokens=tokens),
        "model view (4 layers x 8 heads)": plot_model_view([w] * 4),
        "norm distributions (3 panels)": plot_norm_distributions(h, {"a": h * 0.5, "b": h * 2}),
        "norm axes (4 3D cubes)": plot_norm_axes(),
        "head metrics (3 panels)": plot_head_metrics(
            {k: torch.rand(2, 8, generator=g) for k in ("entropy", "local", "first")}),
        "mask gallery (4 masks)": plot_mask_gallery(
            {f"m{i}": causal_mask(16, 16) for i in range(4)}),
        "line plot": fig_line,
    }


def _bytes(fig, fmt: str, dpi: float) -> int:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight")
    return buf.getbuffer().nbytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=None,
                        help="folder of an executed build's 1x PNGs to scale")
    args = parser.parse_args(argv)
    print(f"# figure bytes at {FIGURE_DPI} dpi (1x), {2 * FIGURE_DPI} dpi (2x) and as SVG")
    print(f"{'figure':34} {'png 1x KB':>10} {'png 2x KB':>10} {'svg KB':>10}")
    totals = [0, 0, 0]
    for name, fig in _figures().items():
        sizes = [_bytes(fig, "png", FIGURE_DPI), _bytes(fig, "png", 2 * FIGURE_DPI),
                 _bytes(fig, "svg", FIGURE_DPI)]
        totals = [t + s for t, s in zip(totals, sizes)]
        print(f"{name:34} " + " ".join(f"{s / 1024:10.1f}" for s in sizes))
        plt.close(fig)
    print(f"{'total':34} " + " ".join(f"{s / 1024:10.1f}" for s in totals))
    ratio = totals[1] / totals[0]
    print(f"# 2x / 1x = {ratio:.2f}; svg / 2x = {totals[2] / totals[1]:.2f}")
    if args.site is not None:
        pngs = list(args.site.rglob("*.png"))
        old = sum(p.stat().st_size for p in pngs)
        print(f"# {len(pngs)} PNGs in {args.site}: {old / 2**20:.2f} MiB at 1x, "
              f"about {old * ratio / 2**20:.2f} MiB at 2x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
