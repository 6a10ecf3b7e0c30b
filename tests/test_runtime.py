"""llmviz.runtime and the plot style functions: device choice, the size setting, source display,
notebook set-up (seeds, build output, threads) and the threads context, figure provenance
footnotes and saving; the public API resolves and importing it stays light."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

import llmviz
from llmviz import runtime
from llmviz.plots import _style


def test_device_is_a_usable_torch_device():
    dev = llmviz.device()
    assert isinstance(dev, torch.device)
    assert torch.ones(2, device=dev).sum().item() == 2.0
    if torch.cuda.is_available():
        assert dev.type == "cuda"


def test_run_size_defaults_to_cpu_and_reads_env(monkeypatch):
    monkeypatch.delenv("LLMVIZ_SCALE", raising=False)
    assert llmviz.run_size() == "cpu"
    assert llmviz.pick(cpu=1, full=2) == 1
    monkeypatch.setenv("LLMVIZ_SCALE", "FULL")
    assert llmviz.run_size() == "full"
    assert llmviz.pick(cpu=1, full=2) == 2


def test_run_size_rejects_unknown_value(monkeypatch):
    monkeypatch.setenv("LLMVIZ_SCALE", "huge")
    with pytest.raises(ValueError, match=r"LLMVIZ_SCALE='huge'.*'cpu', 'full'"):
        llmviz.run_size()


def test_show_source_returns_real_source_highlighted():
    src = llmviz.show_source(runtime.pick)
    assert "def pick(" in repr(src)
    assert "llmviz.runtime.pick" in repr(src)
    html = src._repr_html_()
    assert "pick" in html and "<span" in html


def test_setup_notebook_seeds_and_reports(monkeypatch):
    monkeypatch.delenv("LLMVIZ_BUILD", raising=False)
    before = pio.renderers.default
    info = llmviz.setup_notebook(seed=7)
    a = torch.rand(3)
    llmviz.setup_notebook(seed=7)
    assert torch.equal(a, torch.rand(3))
    text = repr(info)
    assert f"llmviz {llmviz.__version__}" in text and "seed 7" in text and "device" in text
    assert pio.renderers.default == before  # outside the build plotly is left alone


def test_book_bundle_is_html_without_a_cdn():
    bundle = runtime._book_bundle(go.Figure(go.Scatter(y=[1, 2])))
    assert set(bundle) == {"text/html"}
    assert "plotly-graph-div" in bundle["text/html"]
    assert "cdn" not in bundle["text/html"].lower()


_BUILD_CELLS = [
    "import sys\nimport llmviz as lv\nlv.setup_notebook()",
    "import plotly.graph_objects as go\nfig = go.Figure(go.Scatter(y=[1, 2]))\nfig",  # a cell's value
    "display(fig)",
    "fig.show()",
    "print(sorted(m for m in ('nbformat', 'jsonschema', 'plotly.io._renderers') if m in sys.modules))",
]


def test_setup_notebook_in_build_shows_every_plotly_figure_as_site_html(monkeypatch):
    # In a real kernel, as the book build runs it: a figure shown as a cell's value, with display()
    # and with fig.show() is HTML that loads plotly.js from the site, and plotly's renderer registry
    # (which imports nbformat and jsonschema, about 1.5 s a chapter) is never imported.
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("LLMVIZ_BUILD", "1")
    monkeypatch.setenv("PYTHONPATH", str(Path(llmviz.__file__).resolve().parents[1]))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in _BUILD_CELLS])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    for cell in nb.cells[1:4]:
        (out,) = [o for o in cell.outputs if o["output_type"] in ("display_data", "execute_result")]
        assert set(out["data"]) == {"text/html"}, cell.source
        assert "plotly-graph-div" in out["data"]["text/html"]
        assert "cdn" not in out["data"]["text/html"].lower()
    assert nb.cells[4].outputs[0]["text"].strip() == "[]"


def test_provenance_names_device_torch_and_sizes():
    text = _style.provenance("cpu", d_model=64, steps=400)
    assert text.startswith("cpu · torch ")
    assert text.endswith("d_model=64, steps=400")


def test_footnote_on_matplotlib_and_plotly():
    fig, ax = plt.subplots()
    _style.footnote(ax, "cpu · test")
    assert any(t.get_text() == "cpu · test" for t in fig.texts)
    plt.close(fig)
    pfig = go.Figure()
    _style.footnote(pfig, "cpu · test")
    assert pfig.layout.annotations[0].text == "cpu · test"


def test_save_matplotlib_and_plotly(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    png = _style.save(ax, tmp_path / "a.png")
    svg = _style.save(fig, tmp_path / "a.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg.read_text().lstrip().startswith("<?xml")
    plt.close(fig)
    html = _style.save(go.Figure(go.Scatter(y=[1, 2])), tmp_path / "a.html")
    text = html.read_text()
    assert "plotly-graph-div" in text and len(text) > 1_000_000  # plotly.js inlined: opens offline
    with pytest.raises(ValueError, match=r"plotly figures save to .html.*'a.png'"):
        _style.save(go.Figure(), tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"matplotlib figures save to .png, .svg or .pdf, got 'a.jpg'"):
        _style.save(plt.figure(), tmp_path / "a.jpg")


def test_get_ax_creates_or_passes_through():
    ax = _style.get_ax()
    assert ax.figure is not None
    fig, other = plt.subplots()
    assert _style.get_ax(other) is other
    plt.close("all")


def test_footnote_leaves_room_under_constrained_layout():
    fig, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x label")
    _style.footnote(fig, "cpu · torch · sizes")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    label_bottom = ax.xaxis.label.get_window_extent(renderer).y0
    note_top = fig.texts[-1].get_window_extent(renderer).y1
    assert label_bottom > note_top  # the axis label sits above the footnote, not on it
    plt.close(fig)


def test_footnote_keeps_a_suptitle_inside_the_figure_and_off_the_panel_titles():
    fig, axes = plt.subplots(1, 2, figsize=(6, 2.5), layout="constrained")
    fig.suptitle("a figure title")
    axes[0].set_title("panel")
    _style.footnote(fig, "cpu · torch · sizes")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    panel = axes[0].title.get_window_extent(renderer)
    assert title.y1 <= fig.bbox.y1 + 0.5  # not pushed off the top
    assert title.y0 >= panel.y1  # above the panel titles, not on them
    plt.close(fig)


def test_setup_notebook_threads(monkeypatch):
    monkeypatch.delenv("LLMVIZ_SCALE", raising=False)
    before = torch.get_num_threads()
    try:
        info = llmviz.setup_notebook(cpu_threads=1)
        assert torch.get_num_threads() == 1 and info.threads == 1
        assert "1 CPU thread(s)" in repr(info)
        monkeypatch.setenv("LLMVIZ_SCALE", "full")
        torch.set_num_threads(2)
        llmviz.setup_notebook(cpu_threads=1)
        assert torch.get_num_threads() == 2  # full size keeps torch's default
        with pytest.raises(ValueError, match="cpu_threads must be a positive int, got 0"):
            llmviz.setup_notebook(cpu_threads=0)
    finally:
        torch.set_num_threads(before)


def test_public_api_resolves_and_import_is_light():
    import subprocess
    import sys

    for name in llmviz.__all__:
        assert getattr(llmviz, name) is not None, name
    code = "import sys, llmviz; print('plotly' in sys.modules, 'matplotlib.pyplot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # the maths needs only torch
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        llmviz.nope  # noqa: B018


def test_threads_context_restores_the_count():
    before = torch.get_num_threads()
    with llmviz.threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with llmviz.threads(None) as n:
        assert n == before
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        with llmviz.threads(0):
            pass
    with pytest.raises(TypeError, match="n must be an int, got bool True"):
        with llmviz.threads(True):
            pass
    assert torch.get_num_threads() == before
