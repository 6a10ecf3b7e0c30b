"""A chapter's stand-in for a recorded run that is not in the checkout yet.

A chapter reads its verdicts from a ``long`` record (:meth:`Experiment.record`). Until that
record has been made, :func:`record_or_live` runs the same experiment live at its ``cpu`` size
and returns it in the record's shape (``runs``, ``params``, ``label``, ``meta``), so the page
still builds, every claim box says which run decided it, and the label names the command that
makes the record. A live stand-in is small: its checks usually fail and its verdicts read
"cannot decide at this size".
"""

from __future__ import annotations

from typing import Any

from .. import runtime

__all__ = ["LiveStandIn", "record_or_live"]


class LiveStandIn:
    """An experiment run live at ``size``, shaped like a :class:`~llmviz.evidence.Record`."""

    recorded = False
    stale = None

    def __init__(self, experiment: Any, size: str = "cpu") -> None:
        if not all(hasattr(experiment, a) for a in ("run", "params", "refresh_command")):
            raise TypeError(f"experiment must be an llmviz Experiment, got {type(experiment).__name__}")
        self.experiment, self.size = experiment, size
        self.params = experiment.params(size)
        self.runs = experiment.run(size)
        dev = runtime.device()
        self.meta = {"size": size, "device": dev.type, "device_label": dev.type}
        self.label = (f"no long record yet: live {size} run instead "
                      f"(make the record with `{experiment.refresh_command('long')}`)")

    def __repr__(self) -> str:
        return f"LiveStandIn({self.experiment.name!r}, size={self.size!r})"


def record_or_live(experiment: Any, size: str = "long"):
    """``experiment.record(size)`` if that record exists, else a :class:`LiveStandIn` run at
    the ``cpu`` size. A record that exists but is stale is returned as is (its label says so)."""
    try:
        return experiment.record(size)
    except FileNotFoundError:
        return LiveStandIn(experiment, "cpu")
