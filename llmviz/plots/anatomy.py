"""A model's anatomy as a block diagram: embedding, the decoder layers, final norm and head.

:func:`plot_anatomy` draws what :func:`llmviz.hf.anatomy` read from a config, top to bottom in
the order a token goes through the model. Consecutive identical layers share one row
(``x N``), and when a pattern of rows repeats (Gemma 3: five sliding layers then one global,
four times) the pattern is drawn once with a bracket giving the repeats, so a 61-layer model
fits at book width. :func:`layer_runs` and :func:`repeating_block` compute those rows; the
plot only draws them.

Each layer row has four cells: attention (kind, sliding window, H query heads over G key/value
heads, head dim D), position (RoPE base and scaling, rotated dims, NoPE), norm (kind and
placement, QK-norm) and feed-forward (dense width, or routed / active / shared experts).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from matplotlib.colors import to_rgba
from matplotlib.patches import FancyBboxPatch

from ..hf.anatomy import Anatomy, LayerAnatomy
from ._style import PALETTE, get_ax

__all__ = ["LayerRun", "layer_runs", "plot_anatomy", "repeating_block"]

#: fill colour of the attention cell per attention kind, and of the feed-forward cell per kind
_ATTENTION_COLOR = {"global": PALETTE[0], "sliding": PALETTE[5], "latent": PALETTE[4],
                    "linear": PALETTE[2], "conv": PALETTE[6], "chunked": PALETTE[5]}
_FFN_COLOR = {"dense": PALETTE[1], "moe": PALETTE[3]}
_GREY = "#999999"
#: (left, right) edges of the cells of a layer row, in axes data units (the axes span 0-100)
_COLUMNS = {"run": (0.0, 13.0), "attention": (14.0, 37.5), "position": (38.5, 57.0),
            "norm": (58.0, 76.0), "ffn": (77.0, 100.0)}
_HEADERS = {"attention": "attention", "position": "position", "norm": "norm",
            "ffn": "feed-forward"}


@dataclass(frozen=True)
class LayerRun:
    """Consecutive identical layers: ``count`` of them from layer ``first``, all like ``layer``."""

    first: int
    count: int
    layer: LayerAnatomy

    @property
    def last(self) -> int:
        return self.first + self.count - 1


def _kind(layer: LayerAnatomy) -> LayerAnatomy:
    return dataclasses.replace(layer, index=0)  # everything but the position in the stack


def layer_runs(anatomy: Anatomy) -> tuple[LayerRun, ...]:
    """Maximal runs of consecutive layers that are identical apart from their index."""
    runs: list[LayerRun] = []
    for layer in anatomy.layers:
        if runs and _kind(runs[-1].layer) == _kind(layer):
            runs[-1] = dataclasses.replace(runs[-1], count=runs[-1].count + 1)
        else:
            runs.append(LayerRun(first=layer.index, count=1, layer=layer))
    return tuple(runs)


def repeating_block(runs: tuple[LayerRun, ...]) -> tuple[int, int]:
    """``(p, k)``: the first ``p`` runs repeat ``k`` times from the start of the stack.

    The pattern chosen leaves the fewest rows to draw (``p`` plus the runs after the
    repeats); ``(len(runs), 1)`` when nothing repeats.
    """
    n = len(runs)
    keys = [(_kind(r.layer), r.count) for r in runs]
    best, rows = (n, 1), n
    for p in range(1, n // 2 + 1):
        k = 1
        while keys[k * p:(k + 1) * p] == keys[:p]:
            k += 1
        if k > 1 and p + n - p * k < rows:
            best, rows = (p, k), p + n - p * k
    return best


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,g}"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M" if n >= 1e6 else f"{n:,}"


def _attention_text(a: Anatomy, layer: LayerAnatomy) -> str:
    if layer.attention == "linear":
        return "linear attention\nfixed-size state, no KV cache"
    if layer.attention == "conv":
        return "short convolution\nlast inputs only, no KV cache"
    if layer.attention == "latent":
        return f"latent KV (MLA)\nH {a.n_heads} · D {a.head_dim}"
    kind = ("global" if layer.window is None else f"chunked, chunk {layer.window:,}"
            if layer.attention == "chunked" else f"sliding, window {layer.window:,}")
    return f"{kind}\nH {a.n_heads} / G {a.n_kv_heads} · D {a.head_dim}"


def _position_text(a: Anatomy, layer: LayerAnatomy) -> str:
    if layer.position == "nope":
        return "NoPE\n(no position signal)"
    if layer.position == "none":
        return "none\n(order from recurrence)"
    if layer.position == "learned":
        return "learned\n(added at the input)"
    lines = [f"RoPE θ {_num(layer.rope_base)}"]
    extra = []
    if layer.rope_scaling:
        extra.append(layer.rope_scaling)
    if layer.rotary_dim:
        extra.append(f"{layer.rotary_dim} of {a.head_dim} dims")
    return "\n".join(lines + ([", ".join(extra)] if extra else []))


def _norm_name(a: Anatomy) -> str:
    return {"rms": "RMSNorm", "rms (1 + w)": "RMSNorm (1 + w)", "layer": "LayerNorm"}.get(a.norm, a.norm)


def _norm_text(a: Anatomy) -> str:
    placement = a.placement.split(" (")[0]
    placement = placement if placement == "sandwich" else f"{placement}-norm"
    return f"{_norm_name(a)}\n{placement}" + ("\n+ QK-norm" if a.qk_norm else "")


def _ffn_text(a: Anatomy, layer: LayerAnatomy) -> str:
    act = {"silu": "SwiGLU", "swish": "SwiGLU", "gelu": "GeGLU", "gelu_pytorch_tanh": "GeGLU"}
    if layer.ffn == "moe":
        shared = f" + {a.shared_experts} shared" if a.shared_experts else ""
        return (f"MoE: {a.experts} experts\n{a.experts_active} active{shared}\n"
                f"d_ff {a.expert_d_ff:,} each")
    gated = a.ffn.startswith(("glu", "moe"))  # the experts of these families are GLUs too
    name = act.get(a.activation, a.activation) if gated else f"MLP ({a.activation})"
    return f"dense {name}\nd_ff {a.d_ff:,}"


def _box(ax, left: float, right: float, y: float, h: float, color: str, text: str, *,
         gid: str, size: float = 8.0) -> None:
    patch = FancyBboxPatch((left, y), right - left, h, boxstyle="round,pad=0,rounding_size=0.8",
                           facecolor=to_rgba(color, 0.22), edgecolor=color, linewidth=1.0,
                           mutation_aspect=0.12, gid=gid)
    ax.add_patch(patch)
    ax.text((left + right) / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            linespacing=1.15, gid=gid)


def plot_anatomy(anatomy: Anatomy, *, ax=None):
    """Draw an :class:`~llmviz.hf.Anatomy` as a stack of blocks.

    From the top: token embedding, the layers (one row per run of identical layers, a bracket
    around a repeating pattern), final norm, output head (tied to the embedding or not). The
    title gives total and active parameters and the KV-cache bytes per token. Cells are
    coloured by attention kind and by feed-forward kind (dense or mixture of experts).

    Args:
        anatomy: what :func:`llmviz.hf.anatomy` returns for a config.
        ax: Axes to draw on; a new figure sized to the number of rows when None.

    Returns:
        The matplotlib ``Axes`` (axis lines off). Drawn boxes and texts carry a gid:
        ``"embedding"``, ``"run"`` (the ``× N`` label of a layer row), ``"attention"``,
        ``"position"``, ``"norm"``, ``"ffn"``, ``"repeat"``, ``"final norm"``, ``"head"``.
    """
    if not isinstance(anatomy, Anatomy):
        raise TypeError(
            f"plot_anatomy takes an Anatomy, got {type(anatomy).__name__}; "
            "pass llmviz.hf.anatomy(config)"
        )
    runs = layer_runs(anatomy)
    p, k = repeating_block(runs)
    rows = list(runs[:p]) + list(runs[p * k:])
    n_rows = len(rows) + 3  # embedding, layer rows, final norm, head
    ax = get_ax(ax, figsize=(8.0, 1.4 + 0.6 * n_rows))
    row_h, gap, head_gap = 0.9, 0.2, 0.45
    y = 0.0

    emb = f"token embedding  V {anatomy.vocab_size:,} × C {anatomy.d_model:,}"
    if any(layer.position == "learned" for layer in anatomy.layers):
        emb += "  + learned positions"
    _box(ax, 0, 100, y, row_h * 0.75, _GREY, emb, gid="embedding", size=8.5)
    y += row_h * 0.75 + head_gap
    for name, header in _HEADERS.items():
        left, right = _COLUMNS[name]
        ax.text((left + right) / 2, y - 0.08, header, ha="center", va="bottom",
                fontsize=7.5, color="#555555", style="italic")
    top_of_block = y
    for i, run in enumerate(rows):
        layer = run.layer
        span = f"layer {run.first}" if run.count == 1 else f"layers {run.first}-{run.last}"
        ax.text(sum(_COLUMNS["run"]) / 2 + (2.5 if k > 1 else 0), y + row_h / 2,
                f"× {run.count}\n{span}", ha="center", va="center", fontsize=8, gid="run")
        cells = {
            "attention": (_ATTENTION_COLOR.get(layer.attention, _GREY), _attention_text(anatomy, layer)),
            "position": (_GREY, _position_text(anatomy, layer)),
            "norm": (_GREY, _norm_text(anatomy)),
            "ffn": (_FFN_COLOR.get(layer.ffn, _GREY), _ffn_text(anatomy, layer)),
        }
        for name, (color, text) in cells.items():
            left, right = _COLUMNS[name]
            _box(ax, left, right, y, row_h, color, text, gid=name)
        y += row_h + gap
        if k > 1 and i == p - 1:  # close the repeating pattern with its bracket
            bottom = y - gap
            ax.plot([2.2, 1.2, 1.2, 2.2], [top_of_block, top_of_block, bottom, bottom],
                    color="#333333", linewidth=1.2, gid="repeat")
            ax.text(0.4, (top_of_block + bottom) / 2, f"× {k}", ha="right", va="center",
                    fontsize=9, fontweight="bold", gid="repeat")
            y += gap
    y += head_gap - gap
    final = f"final norm ({_norm_name(anatomy)})"
    _box(ax, 0, 100, y, row_h * 0.6, _GREY, final, gid="final norm", size=8.5)
    y += row_h * 0.6 + gap
    head = (f"output head  C {anatomy.d_model:,} → V {anatomy.vocab_size:,}, "
            + ("tied to the embedding" if anatomy.tie_embeddings else "its own matrix (untied)"))
    _box(ax, 0, 100, y, row_h * 0.6, _GREY, head, gid="head", size=8.5)
    y += row_h * 0.6

    ax.set_xlim(-4 if k > 1 else -0.5, 100.5)
    ax.set_ylim(y + 0.1, -0.1)
    ax.set_axis_off()
    active = ("" if anatomy.active_params == anatomy.total_params
              else f", {_params(anatomy.active_params)} active per token")
    ax.set_title(
        f"{anatomy.model_type}: {anatomy.n_layers} layers, {_params(anatomy.total_params)} "
        f"parameters{active}\nKV cache {anatomy.kv_bytes_per_token / 1024:,.1f} KiB per token "
        f"({anatomy.bytes_per_element} B per element)", fontsize=10)
    return ax
