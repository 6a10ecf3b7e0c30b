"""The book's experiments that run at more than one size, one module per chapter.

Each module here (``ch09.py``, ``ch16.py``, ...) defines its :class:`llmviz.evidence.Experiment`
objects at module level; :func:`llmviz.evidence.experiments` imports every module of this
package and collects them, so defining one is registering it. A module must import without
side effects (no training at import time), and its functions build every model and tensor on
:func:`llmviz.device`.

Records (runs above the live ``cpu`` size) are stored as JSON in ``records/`` beside this file,
one per experiment and size (``records/<name>.<size>.json``), and read by the chapters while
the book builds. ``python -m llmviz.evidence.records list | check | run NAME [--size long|full]``
lists them, checks that each is fresh and reproducible, and (re-)creates one.
"""
