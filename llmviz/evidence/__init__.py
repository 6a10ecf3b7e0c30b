"""Evidence the reader can trust: runs over seeds, intervals, paired differences, verdicts.

* :mod:`~llmviz.evidence.stats`: :class:`Estimate`, :func:`summarize`, :func:`paired`,
  :func:`paired_ratio`, :func:`paired_bootstrap`, :func:`t_quantile`.
* :mod:`~llmviz.evidence.seeds`: :func:`run_seeds` (parallel over cores) and :class:`Runs`.
* :mod:`~llmviz.evidence.verdict`: the three verdicts and :func:`decide`.
* :mod:`~llmviz.evidence.claims`: :class:`Claim` (box, glue, claims registry) and
  :func:`glue_number`.

A chapter's experiment, end to end::

    def run(seed):  # both variants on the same seed, data and evaluation targets
        ...
        return {"mha": {"loss": loss_mha}, "gqa": {"loss": loss_gqa}}

    runs = run_seeds(run, range(3))  # parallel over the cores, in seed order
    effect = paired(runs.values("gqa", "loss"), runs.values("mha", "loss"))
    claim = Claim("GQA costs less than 0.05 nats of loss", effect, threshold=0.05,
                  direction="<", quantity="loss(GQA) - loss(MHA)", id="ch03_gqa")
    claim.glue("ch03_gqa")  # the prose writes {glue:text}`ch03_gqa_verdict`
    claim                   # the box; the book's claims page lists it
"""

from .claims import CHAPTER_ENV, CLAIMS_DIR_ENV, Claim, claims_file, glue_number, glue_text
from .seeds import Runs, run_grid, run_seeds
from .stats import (
    Estimate,
    paired,
    paired_bootstrap,
    paired_ratio,
    proportion,
    summarize,
    summarize_log,
    t_quantile,
)
from .verdict import FAILS, HOLDS, UNRESOLVED, VERDICTS, decide

__all__ = [
    "Estimate",
    "summarize",
    "summarize_log",
    "paired",
    "paired_ratio",
    "paired_bootstrap",
    "t_quantile",
    "run_seeds",
    "run_grid",
    "Runs",
    "Claim",
    "glue_number",
    "glue_text",
    "proportion",
    "decide",
    "HOLDS",
    "FAILS",
    "UNRESOLVED",
    "VERDICTS",
    "CLAIMS_DIR_ENV",
    "CHAPTER_ENV",
    "claims_file",
]
