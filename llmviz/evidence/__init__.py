"""Evidence the reader can trust: runs over seeds, intervals, paired differences, verdicts.

* :mod:`~llmviz.evidence.stats`: :class:`Estimate`, :func:`summarize`, :func:`paired`,
  :func:`paired_ratio`, :func:`paired_bootstrap`, :func:`t_quantile`.
* :mod:`~llmviz.evidence.seeds`: :func:`run_seeds` (parallel over cores) and :class:`Runs`.
* :mod:`~llmviz.evidence.verdict`: the three verdicts and :func:`decide`.
* :mod:`~llmviz.evidence.claims`: :class:`Claim` (box, glue, claims registry) and
  :func:`glue_number`.
"""

from .claims import CHAPTER_ENV, CLAIMS_DIR_ENV, Claim, claims_file, glue_number
from .seeds import Runs, run_seeds
from .stats import (
    Estimate,
    paired,
    paired_bootstrap,
    paired_ratio,
    summarize,
    t_quantile,
)
from .verdict import FAILS, HOLDS, UNRESOLVED, VERDICTS, decide

__all__ = [
    "Estimate",
    "summarize",
    "paired",
    "paired_ratio",
    "paired_bootstrap",
    "t_quantile",
    "run_seeds",
    "Runs",
    "Claim",
    "glue_number",
    "decide",
    "HOLDS",
    "FAILS",
    "UNRESOLVED",
    "VERDICTS",
    "CLAIMS_DIR_ENV",
    "CHAPTER_ENV",
    "claims_file",
]
