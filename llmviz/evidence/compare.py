"""The live run beside the record: two claim boxes and a computed sentence on whether they agree.

A chapter runs its experiment small on every build (``exp.run("cpu")``) and reads the larger
run from its record (``exp.record("long")``). Both are decided by the same code, each as a
:class:`~llmviz.evidence.Claim` whose ``size`` says where it comes from::

    live = Claim("ALiBi extrapolates best", live_effect, id="ch09_alibi_live", checks=...)
    rec = Claim("ALiBi extrapolates best", record_effect, id="ch09_alibi", size=record, ...)
    side_by_side(live, rec)            # both boxes, then compare_verdicts(live, rec)
    glue_text("ch09_alibi_agree", compare_verdicts(live, rec))

Where the verdicts differ the page says so; nothing in the sentence is typed by hand.
"""

from __future__ import annotations

import html

from .claims import Claim
from .verdict import CANNOT_DECIDE

__all__ = ["compare_verdicts", "side_by_side", "SideBySide"]


def _check_pair(live: Claim, record: Claim) -> None:
    for name, claim in (("live", live), ("record", record)):
        if not isinstance(claim, Claim):
            raise TypeError(f"{name} must be an llmviz Claim, got {type(claim).__name__}")
    if live.id == record.id:
        raise ValueError(f"the live and the recorded claim share the id {live.id!r}; give each "
                         "its own (e.g. 'ch09_alibi_live' and 'ch09_alibi')")


def _failed(claim: Claim) -> str:
    return "; ".join(c.name for c in claim.checks if not c.passed)


def compare_verdicts(live: Claim, record: Claim) -> str:
    """One sentence, computed: do the live run's verdict and the record's agree, and if not,
    which of them can decide the claim."""
    _check_pair(live, record)
    lv, rv = live.verdict, record.verdict
    head = f"The live run ({live.size}) and the record ({record.size})"
    if lv == rv:
        if rv == CANNOT_DECIDE:
            return (f"{head} both cannot decide this claim: the live run fails "
                    f"{_failed(live)}; the record fails {_failed(record)}.")
        return f"{head} agree: the claim {rv}." if rv != "not resolved at this size" else (
            f"{head} agree: the claim is not resolved at either size.")
    says = f"the live run says '{lv}', the record says '{rv}'"
    if rv == CANNOT_DECIDE:
        return (f"{head} differ: {says}. The record fails {_failed(record)}, so neither run "
                "decides the claim; the live verdict alone is not evidence either.")
    if lv == CANNOT_DECIDE:
        return (f"{head} differ: {says}. The live run is too small to decide it (it fails "
                f"{_failed(live)}); the record can, and its verdict is the chapter's.")
    return (f"{head} differ: {says}. Both pass their validity checks; the record, the larger "
            "run, is the one the chapter's verdict rests on.")


class SideBySide:
    """Two claim boxes side by side with :func:`compare_verdicts` under them (renders in
    notebooks and on the site; both boxes reach the claims page)."""

    def __init__(self, live: Claim, record: Claim) -> None:
        _check_pair(live, record)
        self.live, self.record = live, record

    @property
    def sentence(self) -> str:
        return compare_verdicts(self.live, self.record)

    def __str__(self) -> str:
        return f"LIVE\n{self.live}\n\nRECORD\n{self.record}\n\n{self.sentence}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> str:
        return (f"**Live run**\n\n{self.live._repr_markdown_()}\n\n**Record**\n\n"
                f"{self.record._repr_markdown_()}\n\n{self.sentence}")

    def _repr_html_(self) -> str:
        cell = 'style="flex:1 1 20em;min-width:0"'
        return (
            '<div class="llmviz-side-by-side"><div style="display:flex;flex-wrap:wrap;'
            f'gap:0.8em"><div {cell}><div style="font-size:0.8em;opacity:0.75">LIVE RUN</div>'
            f"{self.live._repr_html_()}</div><div {cell}><div style=\"font-size:0.8em;"
            f'opacity:0.75">RECORD</div>{self.record._repr_html_()}</div></div>'
            f'<p class="llmviz-agreement">{html.escape(self.sentence)}</p></div>'
        )


def side_by_side(live: Claim, record: Claim) -> SideBySide:
    """Show the live claim and the recorded one together, with whether their verdicts agree."""
    return SideBySide(live, record)
