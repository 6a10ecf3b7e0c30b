"""Position figures: inspect the drawn artists (images, lines, shared colour limits)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmviz.attention.metrics import mass_by_distance  # noqa: E402
from llmviz.plots import position as pp  # noqa: E402
from llmviz.position.alibi import alibi_bias, alibi_slopes  # noqa: E402
from llmviz.position.relative import T5RelativeBias, t5_relative_bucket  # noqa: E402
from llmviz.position.rope import rope_frequencies  # noqa: E402
from llmviz.position.sinusoidal import sinusoidal_encoding, sinusoidal_wavelengths  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_sinusoidal_heatmap_and_waves():
    pe = sinusoidal_encoding(40, 16)
    ax = pp.plot_sinusoidal_heatmap(pe)
    (im,) = ax.get_images()
    assert im.get_array().shape == (40, 16) and im.get_clim() == (-1.0, 1.0)
    ax = pp.plot_sinusoidal_waves(pe.numpy(), dims=[0, 1, 10])
    assert len(ax.get_lines()) == 3
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), pe[:, 10].numpy())
    with pytest.raises(ValueError, match=r"dimension 16 is out of range for C=16"):
        pp.plot_sinusoidal_waves(pe, dims=[16])


def test_score_vs_offset_accepts_stacks_and_lists():
    x = torch.arange(10)
    ax = pp.plot_score_vs_offset(x, torch.randn(3, 10), labels=["a", "b", "c"])
    assert len(ax.get_lines()) == 3 + 1  # curves + zero line
    ax = pp.plot_score_vs_offset(x, [torch.randn(10), np.zeros(10)])
    assert len(ax.get_lines()) == 2 + 1


def test_clock_hands_one_panel_per_pair_one_arrow_per_position():
    inv, _ = rope_frequencies(64)
    fig = pp.plot_rope_clock_hands(inv, positions=[0, 1, 2, 5], pairs=[0, 31])
    assert len(fig.axes) == 2
    for ax in fig.axes:
        arrows = [c for c in ax.texts if getattr(c, "arrow_patch", None) is not None]
        assert len(arrows) == 4
    # the fast pair's hand at position 1 is turned by exactly 1 radian
    arrow = [c for c in fig.axes[0].texts if getattr(c, "arrow_patch", None) is not None][1]
    assert arrow.xy == pytest.approx((np.cos(1.0), np.sin(1.0)))
    with pytest.raises(ValueError, match=r"pair 40 is out of range: there are 32 pairs"):
        pp.plot_rope_clock_hands(inv, positions=[0], pairs=[40])


def test_spiral_is_one_pair_in_3d():
    inv, _ = rope_frequencies(16)
    pos = torch.arange(50)
    ax = pp.plot_rope_spiral(inv, 2, pos)
    assert ax.name == "3d"
    x, y, z = ax.get_lines()[0].get_data_3d()
    np.testing.assert_allclose(np.hypot(x, y), 1.0, atol=1e-6)  # on the unit circle
    np.testing.assert_allclose(z, np.arange(50))
    fig = pp.plot_rope_spiral_plotly(inv, 2, pos)
    assert isinstance(fig, go.Figure) and fig.data[0].type == "scatter3d"
    np.testing.assert_allclose(np.asarray(fig.data[0].x), np.cos(float(inv[2]) * np.arange(50)),
                               rtol=1e-6)


def test_spectrum_one_line_per_base():
    ax = pp.plot_rope_spectrum({"10k": 2 * np.pi / rope_frequencies(64)[0],
                                "500k": 2 * np.pi / rope_frequencies(64, base=5e5)[0]},
                               context=4096)
    assert len(ax.get_lines()) == 3 and ax.get_yscale() == "log"


def test_decay_plot():
    x = np.arange(100)
    ax = pp.plot_rope_decay(x, np.linspace(10, 1, 100), [np.sin(x), np.cos(x)])
    assert len(ax.get_lines()) == 3 + 1
    assert ax.get_lines()[2].get_label() == "upper bound"
    ax = pp.plot_rope_decay(x, np.linspace(10, 1, 100), [5 * np.sin(x)], normalise=True)
    assert max(np.abs(line.get_ydata()).max() for line in ax.get_lines()[:2]) == pytest.approx(1.0)


def test_shared_heatmaps_share_one_colour_scale():
    maps = [np.arange(9.0).reshape(3, 3), -5 * np.ones((3, 3)), np.full((3, 3), np.nan)]
    fig = pp.plot_shared_heatmaps(maps, ["a", "b", "c"], ncols=2)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 3
    assert len({im.get_clim() for im in images}) == 1
    assert images[0].get_clim() == (-8.0, 8.0)  # symmetric around 0, covering every value
    colourbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(colourbars) == 1
    with pytest.raises(ValueError, match=r"got 3 maps but 2 titles"):
        pp.plot_shared_heatmaps(maps, ["a", "b"])


def test_alibi_bias_maps_share_scale_and_blank_the_future():
    slopes = alibi_slopes(4)
    fig = pp.plot_alibi_bias(alibi_bias(8, slopes=slopes), slopes=slopes)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 4
    clims = {im.get_clim() for im in images}
    assert len(clims) == 1
    lo, hi = clims.pop()
    assert lo == pytest.approx(-7 * float(slopes[0])) and hi == 0.0
    data = images[0].get_array()
    assert np.ma.is_masked(data[0, 1]) or np.isnan(data[0, 1])  # future key blanked
    ax = pp.plot_alibi_slopes({"8 heads": alibi_slopes(8), "12 heads": alibi_slopes(12)})
    assert len(ax.get_lines()) == 2


def test_mass_by_distance_worked_example():
    w = torch.zeros(1, 3, 3)
    w[0] = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    m = mass_by_distance(w)
    np.testing.assert_allclose(m[0], [(1 + 0.5 + 0.5) / 3, (0.5 + 0.3) / 3, 0.2 / 3], rtol=1e-6)
    assert float(m.sum()) == pytest.approx(1.0)


def test_mass_vs_distance_plot_draws_the_library_mass():
    bias = alibi_bias(16, slopes=alibi_slopes(4))
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    weights = bias.masked_fill(~causal, float("-inf")).softmax(-1)
    ax = pp.plot_attention_mass_vs_distance(weights)
    lines = ax.get_lines()
    assert len(lines) == 4
    # cumulative mass ends at 1 for every head; a steeper head (0) fills up faster
    for line in lines:
        assert line.get_ydata()[-1] == pytest.approx(1.0)
    assert lines[0].get_ydata()[2] > lines[3].get_ydata()[2]
    expected = np.cumsum(mass_by_distance(weights).double().numpy(), axis=1)
    for h, line in enumerate(lines):
        np.testing.assert_allclose(line.get_ydata(), expected[h])
    ax = pp.plot_attention_mass_vs_distance(weights, cumulative=False)
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), mass_by_distance(weights)[1].numpy())


def test_t5_plots():
    rel = torch.arange(-50, 51)
    ax = pp.plot_t5_buckets(rel, {"bidirectional": t5_relative_bucket(rel),
                                  "causal": t5_relative_bucket(rel, bidirectional=False)})
    assert len(ax.get_lines()) == 2
    bias = T5RelativeBias(3)(10).detach()
    fig = pp.plot_t5_bias(bias)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 3 and len({im.get_clim() for im in images}) == 1
    with pytest.raises(ValueError, match=r"bias must be \(H, T, S\)"):
        pp.plot_t5_bias(bias[0])


def test_plots_use_the_given_axes():
    fig, ax = plt.subplots()
    assert pp.plot_sinusoidal_heatmap(sinusoidal_encoding(4, 4), ax=ax) is ax
    fig, ax = plt.subplots()
    assert pp.plot_rope_spectrum({"a": sinusoidal_wavelengths(8)}, ax=ax) is ax


def test_binary_counter_waves_match_the_bits_at_run_centres():
    p = np.arange(64)
    bits, waves = pp.binary_counter_waves(p, 5)
    # bit k of p, read from the integer itself
    expected = (p[:, None] >> np.arange(5)) & 1
    np.testing.assert_array_equal(bits, expected)
    # the smooth wave is exactly 0 or 1 at the middle of each run, and always within [0, 1]
    for k in range(5):
        run = 2**k
        centres = np.arange(0, 64, run) + (run - 1) / 2
        b, w = pp.binary_counter_waves(centres, 5)
        np.testing.assert_allclose(w[:, k], b[:, k], atol=1e-12)
    assert waves.min() >= 0.0 and waves.max() <= 1.0
    with pytest.raises(ValueError, match=r"n_bits must be an int >= 1, got 0"):
        pp.binary_counter_waves(p, 0)
    with pytest.raises(ValueError, match=r"positions must be >= 0"):
        pp.binary_counter_waves(np.array([-1.0, 2.0]), 2)


def test_plot_binary_counter_draws_steps_and_waves_per_bit():
    ax = pp.plot_binary_counter(16, 3)
    lines = ax.get_lines()
    assert len(lines) == 2 * 3
    # lane 1's step line carries bit 1 of 0..15, lifted by the lane offset
    np.testing.assert_allclose(lines[2].get_ydata() - 1.4, (np.arange(16) >> 1) & 1)
    with pytest.raises(ValueError, match=r"n_positions must be an int >= 2"):
        pp.plot_binary_counter(1)


def test_plot_heatmap_has_its_own_scale():
    fig, axes = plt.subplots(1, 2)
    idx = torch.arange(-4, 5).float().expand(9, 9)
    score = 0.1 * torch.randn(9, 9)
    pp.plot_heatmap(idx, ax=axes[0], colorbar_label="index")
    pp.plot_heatmap(score, ax=axes[1], symmetric=False)
    (im0,), (im1,) = axes[0].get_images(), axes[1].get_images()
    assert im0.get_clim() == (-4.0, 4.0)
    assert im1.get_clim() == pytest.approx((float(score.min()), float(score.max())))
    assert len(fig.axes) == 4  # two panels, two colour bars
    with pytest.raises(ValueError, match=r"matrix must be \(T, S\), got shape \(3,\)"):
        pp.plot_heatmap(torch.zeros(3))
    with pytest.raises(ValueError, match=r"no finite value"):
        pp.plot_heatmap(torch.full((2, 2), float("nan")))


def test_clock_positions_make_every_pair_turn():
    inv, _ = rope_frequencies(64)
    pos = pp.clock_positions(inv, [0, 16, 31])
    assert pos[0] == list(range(8))  # the fast pair: one position per hand
    for p in (16, 31):
        angles = inv[p].item() * np.asarray(pos[p], dtype=float)
        # the hands spread over most of a turn: consecutive hands at least 30 degrees apart
        assert np.all(np.diff(angles) > np.pi / 6) and angles[-1] < 2 * np.pi
    fig = pp.plot_rope_clock_hands(inv, positions=pos, pairs=[0, 16, 31])
    arrows = [c for c in fig.axes[2].texts if getattr(c, "arrow_patch", None) is not None]
    assert len({(round(a.xy[0], 6), round(a.xy[1], 6)) for a in arrows}) == 8  # no hand hides another
    assert "wavelength 6.28" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match=r"positions has no entry for pair\(s\) \[31\]"):
        pp.plot_rope_clock_hands(inv, positions={0: [0, 1]}, pairs=[0, 31])
    with pytest.raises(ValueError, match=r"n_hands must be an int >= 2, got 1"):
        pp.clock_positions(inv, [0], n_hands=1)


def test_alibi_slopes_plot_keeps_every_series_visible():
    ax = pp.plot_alibi_slopes({"8 heads": alibi_slopes(8), "12 heads": alibi_slopes(12),
                               "16 heads": alibi_slopes(16)})
    eight, twelve, sixteen = ax.get_lines()
    # 12 heads repeat the 8-head slopes: the 8-head line is drawn on top and smaller, so it shows
    assert eight.get_zorder() > twelve.get_zorder() > sixteen.get_zorder()
    assert eight.get_markersize() < twelve.get_markersize() < sixteen.get_markersize()
    np.testing.assert_allclose(twelve.get_ydata()[:8], eight.get_ydata())


def test_alibi_bias_log_scale_separates_every_head():
    from matplotlib.colors import SymLogNorm

    slopes = alibi_slopes(8)
    bias = alibi_bias(256, slopes=slopes)
    fig = pp.plot_alibi_bias(bias, slopes=slopes, log_scale=0.1)
    images = [im for ax in fig.axes for im in ax.get_images()]
    norms = {id(im.norm) for im in images}
    assert len(images) == 8 and all(isinstance(im.norm, SymLogNorm) for im in images)
    assert len({(im.norm.vmin, im.norm.vmax) for im in images}) == 1 and len(norms) >= 1
    # on the shared log scale, the colour value of the farthest key differs between every pair of heads
    far = [float(im.norm(float(bias[h, -1, 0]))) for h, im in enumerate(images)]
    assert min(abs(a - b) for i, a in enumerate(far) for b in far[i + 1:]) > 0.03
    with pytest.raises(ValueError, match=r"log_scale must be a positive number"):
        pp.plot_shared_heatmaps([bias[0]], ["a"], log_scale=0)
