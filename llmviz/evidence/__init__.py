"""Evidence the reader can trust: runs over seeds, intervals, paired differences, verdicts.

* :mod:`~llmviz.evidence.stats`: :class:`Estimate`, :func:`summarize`, :func:`paired`,
  :func:`paired_ratio`, :func:`paired_bootstrap`, :func:`t_quantile`.
* :mod:`~llmviz.evidence.seeds`: :func:`run_seeds` (parallel over cores on a CPU, in turn on
  a GPU; :mod:`~llmviz.evidence.strategy` decides) and :class:`Runs`.
* :mod:`~llmviz.evidence.verdict`: the verdicts and :func:`decide`.
* :mod:`~llmviz.evidence.validity`: what lets an experiment decide its claim, computed:
  :class:`Check`, :func:`beats_baseline`, :func:`positive_control`, :func:`can_detect`,
  :func:`min_detectable`; a failed check makes the verdict :data:`CANNOT_DECIDE`.
* :mod:`~llmviz.evidence.claims`: :class:`Claim` (box, glue, claims registry) and
  :func:`glue_number`.
* :mod:`~llmviz.evidence.records`: :class:`Experiment` (one function over variants x seeds, at
  the sizes ``cpu``/``long``/``full``) and its stored :class:`Record` (fresh or stale,
  reproducible, labelled); ``python -m llmviz.evidence.records list | check | run NAME``.
* :mod:`~llmviz.evidence.compare`: :func:`compare_verdicts` and :func:`side_by_side`, the live
  run beside the record.

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
from .compare import SideBySide, compare_verdicts, side_by_side
from .records import (
    EXPERIMENTS_ENV,
    RECORDING_ENV,
    RECORDS_DIR_ENV,
    SIZES,
    Experiment,
    Record,
    experiments,
    records_dir,
)
from .mystglue import glue
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
from .validity import (
    Check,
    beats_baseline,
    can_detect,
    format_min_detectable,
    min_detectable,
    positive_control,
)
from .verdict import CANNOT_DECIDE, FAILS, HOLDS, UNRESOLVED, VERDICTS, decide

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
    "glue",
    "proportion",
    "decide",
    "HOLDS",
    "FAILS",
    "UNRESOLVED",
    "CANNOT_DECIDE",
    "VERDICTS",
    "Check",
    "beats_baseline",
    "positive_control",
    "can_detect",
    "min_detectable",
    "format_min_detectable",
    "Experiment",
    "Record",
    "experiments",
    "records_dir",
    "SIZES",
    "RECORDS_DIR_ENV",
    "EXPERIMENTS_ENV",
    "RECORDING_ENV",
    "compare_verdicts",
    "side_by_side",
    "SideBySide",
    "CLAIMS_DIR_ENV",
    "CHAPTER_ENV",
    "claims_file",
]
