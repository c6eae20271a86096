"""PROCESS_EXP: raw experiment directory -> exp.nc, .exp.out files, exp.csv rows (a page writer adds exp.html)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from netesto.errors import ResultsError
from netesto.raw.jsontext import dumps
from netesto.results.dataset import build_dataset
from netesto.results.expcsv import aggregate, append_rows, load_fields, parse_other
from netesto.results.limits import host_limited
from netesto.results.load import ExperimentRaw, load_experiment
from netesto.results.storage import write_netcdf
from netesto.results.summaries import GroupSummary, all_summary, group_summaries, render, write_text_atomic


@dataclass(frozen=True)
class Processed:
    """What a page writer gets from :func:`process_experiment`: the experiment's dataset, its
    per-group and overall summaries, its raw data, and what could not be read."""

    exp: int
    directory: Path
    ds: Any
    groups: tuple[GroupSummary, ...]
    all_items: tuple[tuple[str, str], ...]
    raw: ExperimentRaw
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


# writes the experiment's page (exp.html) and returns its path, or None when it cannot;
# the report layer's is netesto.report.experiment.write_page
PageWriter = Callable[[Processed], "Path | None"]


@dataclass
class ProcessResult:
    """What :func:`process_experiment` wrote and what it could not read."""

    exp: int
    directory: Path
    files: list[Path] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # flows their hosts' buffers limited (limits.HOST_LIMIT_PERCENT of their life or more): the run says them
    host_limited: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def process_experiment(
    workdir: str | os.PathLike[str],
    exp: int | str,
    *,
    desc: str = "",
    other: str | Iterable[Any] = (),
    fields_file: str | os.PathLike[str] | None = None,
    csv_name: str = "exp.csv",
    page: PageWriter | None = None,
    steady: str | None = None,
) -> ProcessResult:
    """Process ``<workdir>/<exp>/``: write ``exp.nc``, one ``<hsn>.exp.out``
    per group and ``all.exp.out`` there, and append the aggregate row (exp
    ``N.0``) plus one row per group (``N.g``, only when there are several
    groups) to ``<workdir>/exp.csv``; ``page`` then writes the page
    (:func:`netesto.process_experiment` passes the report's, for ``exp.html``).

    Raw files that cannot be decoded are skipped and listed in
    ``result.errors`` (each message names the file, and they are written to
    ``<exp>/errors.txt`` and printed on stderr); everything else is processed.
    Raises :class:`ResultsError` only if no flow could be read at all.
    ``steady`` is the warm-up left out of the per-flow, per-group and per-algorithm
    numbers of the dataset (``"5s"``, ``"10rtt"``; :mod:`netesto.results.groups`).
    Re-processing replaces the experiment's files (it never re-reads an old
    all.exp.out) and its exp.csv rows.
    """
    root = Path(workdir)
    expdir = root / str(exp)
    raw = load_experiment(expdir)
    result = ProcessResult(raw.exp, expdir, errors=list(raw.errors), warnings=list(raw.warnings))
    err_file = expdir / "errors.txt"
    if raw.errors or raw.warnings:
        write_text_atomic(err_file, "".join(f"{e}\n" for e in raw.errors + raw.warnings))
        for e in raw.errors:
            print(f"netesto results: error: {e}", file=sys.stderr)
        for w in raw.warnings:
            print(f"netesto results: warning: {w}", file=sys.stderr)
    else:
        err_file.unlink(missing_ok=True)
    if not raw.flows:
        detail = "; ".join(raw.errors) or "no flows/ data"
        raise ResultsError(f"{expdir}: no flow data could be read ({detail})")
    fields = load_fields(root, fields_file)
    desc = desc or raw.record.desc
    # experiment.json's OTHER pairs, then the caller's (later ones win).
    merged = dict((str(k), str(v)) for k, v in raw.other)
    merged.update(parse_other(other))
    other_pairs = list(merged.items())
    _note_processing(expdir / "experiment.json", desc, other_pairs)
    ds = build_dataset(raw, steady=steady)
    # The dataset records what the CSV rows record (sweep coordinates come from it).
    ds.attrs["desc"] = desc
    ds.attrs["other"] = json.dumps([list(p) for p in other_pairs])
    result.files.append(write_netcdf(ds, expdir / "exp.nc"))
    result.host_limited = host_limited(ds)
    groups = group_summaries(ds, raw)
    for old in expdir.glob("*.exp.out"):
        if old.name != "all.exp.out" and old.name[: -len(".exp.out")] not in {g.hsn for g in groups}:
            old.unlink()
    for g in groups:
        p = expdir / f"{g.hsn}.exp.out"
        write_text_atomic(p, g.text())
        result.files.append(p)
    all_items = all_summary(ds, raw.exp, groups)
    p = expdir / "all.exp.out"
    write_text_atomic(p, render(all_items))
    result.files.append(p)
    rows = [aggregate(all_items, fields, desc=desc, other=other_pairs)]
    if len(groups) > 1:
        rows += [aggregate(g.items, fields, desc=desc, other=other_pairs) for g in groups]
    result.files.append(append_rows(root / csv_name, fields, rows, replace_exp=raw.exp))
    result.rows = rows
    if page is not None:
        written = page(Processed(raw.exp, expdir, ds, tuple(groups), tuple(all_items), raw,
                                 tuple(result.errors), tuple(result.warnings)))
        if written is not None:
            result.files.append(written)
    return result


def _note_processing(path: Path, desc: str, other: list[tuple[str, str]]) -> None:
    """Keep the DESC and OTHER this processing used in experiment.json (``processed``):
    summaries of many experiments read them there instead of opening each exp.nc."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # no (readable) experiment.json: readers fall back to exp.nc
    if isinstance(meta, dict):
        meta["processed"] = {"desc": desc, "other": [list(p) for p in other]}
        write_text_atomic(path, dumps(meta, indent=1))  # strict: NaN as null


__all__ = ["PageWriter", "ProcessResult", "Processed", "process_experiment"]
