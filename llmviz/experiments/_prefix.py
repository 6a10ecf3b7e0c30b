"""Scored training runs whose prefix reproduces the start of the full run, for chapters 16-17.

A recorded curve is checked by re-running its first steps (``records check``). That only works
if the short run trains exactly like the start of the long one: same learning-rate schedule
(warmup, then a cosine over the *full* run's steps), same batches. :func:`scored_run` trains on
the full run's :class:`~llmviz.training.TrainConfig` and, given ``prefix``, stops at the first
scoring step at or past it, so every curve point it returns is one the long run also recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["scored_run"]


class _Stop(Exception):
    """Raised by the scoring callback to end a prefix run (the schedule stays the full run's)."""


def scored_run(model, data, config, score: Callable[[int, object], Mapping[str, float]], *,
               prefix: int | None = None) -> dict[str, list[float]]:
    """Train ``model`` on ``data`` with ``config`` and score it at step 0 and every
    ``config.eval_every`` steps.

    ``score(step, model) -> {key: float}`` (the model in eval mode). Returns
    ``{key: [score at step 0, eval_every, 2 eval_every, ...]}`` (a last step off that grid is
    left out, so the curves of a prefix and of the full run line up). With ``prefix`` the run
    stops at the first scoring step at or past it; one at or past ``config.steps`` runs the
    whole schedule.
    """
    from ..training import train

    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int)
                               or prefix < 1):
        raise ValueError(f"prefix must be a positive int number of training steps, got {prefix!r}")
    every = config.eval_every
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"config.eval_every must be a positive int to score a curve, got {every!r}")
    rows = [dict(score(0, model.eval()))]

    def scored(step, m):
        row = dict(score(step, m))
        if step % every == 0:
            rows.append(row)
            if prefix is not None and step >= prefix:
                raise _Stop
        return row

    try:
        train(model.train(), data, config=config, progress=False, callbacks={"m": scored})
    except _Stop:
        pass
    model.eval()
    return {key: [float(r[key]) for r in rows] for key in rows[0]}
