"""``python -m llmviz.evidence.records list | check | run NAME [--size long|full] | refingerprint | stamp-corpus``.

* ``list``: every experiment, its sizes, and the state of each record (fresh, stale, missing).
* ``check [NAME ...]``: every existing record must be fresh (see ``Record.stale``) and its
  prefix must reproduce (``Record.reproduce``); exits 1 naming each record that is not and the
  command that refreshes it, 0 otherwise (also when there is no record at all, saying so). A
  size an experiment defines but has no record of is listed, not failed: a chapter that reads
  it fails its own build with the same command.
* ``run NAME [--size long|full] [--processes N]``: run the experiment and write its record.
* ``refingerprint [NAME ...] [--at REVISION]``: move every record that is fresh under the
  fingerprint rule it was made with to the current rule (only its ``code`` changes; see
  :mod:`llmviz.evidence.records._migrate`); exits 1 naming each record it refused (stale under
  its own rule), 0 otherwise.
* ``stamp-corpus [NAME ...]``: write into records made before meta held them the digests of the
  corpus text they were trained on (Python ships it, so it is the text of the Python version
  that made them); refused on another Python version.
"""

from __future__ import annotations

import argparse
import sys

from . import SIZES, Experiment, experiments, records_dir
from ._migrate import refingerprint, stamp_corpus

__all__ = ["main"]


def _selected(names: list[str]) -> dict[str, Experiment] | None:
    known = experiments()
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"no experiment named {', '.join(unknown)}; known: {', '.join(known) or 'none'}",
              file=sys.stderr)
        return None
    return {n: e for n, e in known.items() if not names or n in names}


def _list(selected: dict[str, Experiment]) -> int:
    print(f"records in {records_dir()}")
    if not selected:
        print("no experiments defined")
    for name, exp in selected.items():
        print(f"{name}: {len(exp.variants)} variants x {len(exp.seeds)} seeds"
              + (f" - {exp.description}" if exp.description else ""))
        for size in SIZES:
            if size not in exp.sizes:
                continue
            if size == "cpu":
                print("  cpu: live (not recorded)")
            elif not exp.path(size).exists():
                print(f"  {size}: not recorded (create: {exp.refresh_command(size)})")
            else:
                rec = exp.record(size)
                state = "stale" if rec.stale else "fresh"
                print(f"  {size}: {state}: {rec.label}")
    return 0


def _check(selected: dict[str, Experiment], reproduce: bool) -> int:
    from ...training.corpus_id import corpus_note  # noqa: PLC0415 - reads the corpora

    for corpus in ("prose", "python"):  # the records stay valid; live numbers beside them do not
        note = corpus_note(corpus)
        if note is not None:
            print(note)
    failures, checked, missing = [], 0, []
    for name, exp in selected.items():
        for size in (s for s in SIZES if s != "cpu" and s in exp.sizes):
            if not exp.path(size).exists():
                missing.append(f"{name}.{size} (create: {exp.refresh_command(size)})")
                continue
            checked += 1
            try:
                rec = exp.record(size)
                stale = rec.stale
                if not stale and reproduce:
                    ok, what = rec.reproduce()
            except Exception as err:  # a broken record or experiment: report it, go on
                failures.append(f"ERROR {name}.{size}: {type(err).__name__}: {err}\n"
                                f"  refresh: {exp.refresh_command(size)}")
                continue
            if stale:
                failures.append(f"STALE {name}.{size}: {stale}\n  refresh: {rec.refresh_command}")
                continue
            if reproduce:
                if not ok:
                    failures.append(f"IRREPRODUCIBLE {name}.{size}: {what}\n"
                                    f"  refresh: {rec.refresh_command}")
                    continue
                print(f"ok {name}.{size}: {rec.label}; {what}")
            else:
                print(f"ok {name}.{size}: {rec.label} (fresh; prefix not re-run)")
    for line in missing:
        print(f"not recorded: {line}")
    if not checked:
        print(f"no records to check in {records_dir()} ({len(selected)} experiments defined)")
        return 0
    for line in failures:
        print(line)
    print(f"{checked} records checked, {len(failures)} failed")
    return 1 if failures else 0


def _refingerprint(selected: dict[str, Experiment], at: str | None, stamp: bool = False) -> int:
    refused, done = [], 0
    for name, exp in selected.items():
        for size in (s for s in SIZES if s != "cpu" and s in exp.sizes):
            if not exp.path(size).exists():
                continue
            try:
                what = stamp_corpus(exp.record(size)) if stamp else refingerprint(exp.record(size), at)
            except (ValueError, TypeError, OSError) as err:
                refused.append(f"REFUSED {name}.{size}: {err}")
                continue
            done += 1
            print(f"ok {name}.{size}: {what}")
    for line in refused:
        print(line)
    print(f"{done + len(refused)} records, {len(refused)} refused")
    return 1 if refused else 0


def _run(exp: Experiment, size: str, processes: int | None) -> int:
    print(f"running {exp.name} at size {size}: {len(exp.variants)} variants x "
          f"{len(exp.seeds)} seeds, params {exp.params(size)}", flush=True)
    rec = exp.produce(size, processes=processes)
    print(f"wrote {rec.path}: {rec.label}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llmviz.evidence.records",
        description="Recorded runs of the book's experiments: list, check, (re)create.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every experiment and the state of its records")
    check = sub.add_parser("check", help="fail on stale or irreproducible records")
    check.add_argument("names", nargs="*", help="experiments to check (default: all)")
    check.add_argument("--no-reproduce", action="store_true",
                       help="only check freshness; do not re-run the prefixes")
    refp = sub.add_parser("refingerprint",
                          help="move fresh records to the current fingerprint rule")
    refp.add_argument("names", nargs="*", help="experiments (default: all)")
    refp.add_argument("--at", default=None, metavar="REVISION",
                      help="read the code at this git revision (the record's commit)")
    stamp = sub.add_parser("stamp-corpus",
                           help="write the corpus digests into records made before meta held them "
                                "(on the Python version that made them)")
    stamp.add_argument("names", nargs="*", help="experiments (default: all)")
    run = sub.add_parser("run", help="run an experiment and write its record")
    run.add_argument("name")
    run.add_argument("--size", choices=[s for s in SIZES if s != "cpu"], default="long")
    run.add_argument("--processes", type=int, default=None,
                     help="worker processes (default: one per core)")
    args = parser.parse_args(argv)
    selected = _selected([args.name] if args.command == "run" else getattr(args, "names", []))
    if selected is None:
        return 2
    if args.command == "list":
        return _list(selected)
    if args.command == "check":
        return _check(selected, reproduce=not args.no_reproduce)
    if args.command == "refingerprint":
        return _refingerprint(selected, args.at)
    if args.command == "stamp-corpus":
        return _refingerprint(selected, None, stamp=True)
    exp = selected[args.name]
    if args.size not in exp.sizes:
        print(f"{exp.name} has no size {args.size!r}; it defines {list(exp.sizes)}",
              file=sys.stderr)
        return 2
    return _run(exp, args.size, args.processes)


if __name__ == "__main__":
    sys.exit(main())
