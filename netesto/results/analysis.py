"""The exp.py operations as a small API over many experiments' summary rows.

A :class:`Table` wraps a pandas DataFrame of exp.csv-like rows (one per
experiment or group). Operations return new tables::

    t = Table.read(workdir)                       # <workdir>/exp.csv
    t = (t.select('has(exp, ".0") and test == "TCP_STREAM"')
          .new_col("fairness", "rateMax / rateMin")
          .cols("exp", "expName", "instances", "ca", "rate", "fairness"))
    t.average(["ca", "instances"])                # adds avgCnt
    t.to_html(); t.to_pandas(); t.plot(x="instances", y1="rate", series="ca")

Expressions are evaluated by :mod:`netesto.results.safeexpr` (never ``eval``).
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

import netesto.results.safeexpr as safeexpr
from netesto.errors import RawDataError, ResultsError
from netesto.raw.experiment import FILENAME, ExperimentRecord, read_experiment
from netesto.results.integrity import checked
from netesto.results.expcsv import Field, aggregate, load_fields, parse_other
from netesto.results.summaries import parse_exp_out
from netesto.results.ncio import NC_LOCK

TEXT_COLUMNS = frozenset({"exp", "expName", "desc", "kernel", "host", "server", "ca", "test"})
# Row colours of the original's table, by congestion control.
CA_COLORS = {"nv": "#ffe0e0", "reno": "#e0ffe0", "cubic": "#e0e8ff", "dctcp": "#fff0c0",
             "cdg": "#f0e0ff", "pcecn": "#e0ffff", "bbr": "#ffe8d0"}


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Columns whose non-blank values are all numbers become float64."""
    out = df.copy()
    for c in out.columns:
        if c in TEXT_COLUMNS or out[c].dtype != object:
            continue
        s = out[c].astype(str).str.strip()
        blank = s == ""
        num = pd.to_numeric(s.where(~blank), errors="coerce")
        if (num.notna() | blank).all() and (~blank).any():
            out[c] = num
    return out


def _desc_other(expdir: Path) -> tuple[str, list[tuple[str, str]]]:
    """The DESC and OTHER pairs an experiment was processed with: experiment.json's
    ``processed`` (process_experiment notes them there), else exp.nc's attributes
    (the same, for directories without it), else the run's own in experiment.json."""
    try:
        record = read_experiment(expdir / FILENAME) or ExperimentRecord()
    except RawDataError:
        record = ExperimentRecord()
    done = record.processed
    try:
        if done is not None:
            return str(done.get("desc") or ""), parse_other(done.get("other") or [])
    except (AttributeError, ResultsError):
        pass
    try:
        import netCDF4

        # netCDF4 itself: reads two attributes, not the whole dataset
        with NC_LOCK, netCDF4.Dataset(checked(expdir / "exp.nc")) as nc:  # a damaged one is not read
            return str(nc.getncattr("desc")), parse_other(json.loads(nc.getncattr("other")))
    except Exception:  # no or unreadable exp.nc: the run's own description
        pass
    try:
        return record.desc, parse_other(record.other)
    except (AttributeError, ResultsError):
        return "", []


def _exp_key(value: Any) -> tuple[float, float]:
    a, _, b = str(value).partition(".")
    try:
        return (float(a), float(b or 0))
    except ValueError:
        return (math.inf, 0.0)


@dataclass(frozen=True)
class Table:
    """Rows of summaries (a DataFrame) plus display decimals per column."""

    df: pd.DataFrame
    decimals: Mapping[str, int] | None = None
    default_decimals: int | None = None
    rel_path: str = ""

    @classmethod
    def from_records(cls, rows: Iterable[Mapping[str, Any]], **kw: Any) -> "Table":
        df = pd.DataFrame(list(rows)).fillna("")
        return cls(_typed(df.astype(object)), **kw)

    @classmethod
    def read_csv(cls, path: str | os.PathLike[str]) -> "Table":
        """Load an exp.csv (header cells may be ``name:decimals``)."""
        p = Path(path)
        try:
            with open(p, newline="") as fh:
                rows = list(csv.reader(fh))
        except OSError as exc:
            raise ResultsError(f"{p}: cannot read table: {exc.strerror}") from exc
        if not rows:
            raise ResultsError(f"{p}: empty table")
        names, decimals = [], {}
        for cell in rows[0]:
            name, sep, dec = cell.rpartition(":")
            if sep and dec.isdigit() and name:
                decimals[name] = int(dec)
                names.append(name)
            else:
                names.append(cell)
        width = len(names)
        body = [r + [""] * (width - len(r)) if len(r) < width else r[:width] for r in rows[1:] if r]
        df = pd.DataFrame(body, columns=names, dtype=object)
        return cls(_typed(df), decimals=decimals or None)

    @classmethod
    def read(cls, workdir: str | os.PathLike[str], name: str = "exp.csv") -> "Table":
        """``<workdir>/exp.csv``."""
        return cls.read_csv(Path(workdir) / name)

    @classmethod
    def from_workdir(cls, workdir: str | os.PathLike[str],
                     fields: Sequence[Field] | None = None) -> "Table":
        """One aggregate row per experiment, from each ``<exp>/all.exp.out``
        and the DESC/OTHER it was processed with (exp.nc's, else
        experiment.json's): exp.csv's ``N.0`` rows, without exp.csv (uses
        ``fields.txt`` of the workdir or the default)."""
        root = Path(workdir)
        fields = fields or load_fields(root)
        rows = []
        names = [p for p in root.iterdir() if p.name.isdigit()] if root.is_dir() else []
        for d in sorted(names, key=lambda p: int(p.name)):
            try:
                text = (d / "all.exp.out").read_text()
            except OSError:
                continue
            desc, other = _desc_other(d)
            for rec in parse_exp_out(text)[:1]:
                rows.append(aggregate(rec, fields, desc=desc, other=other))
        if not rows:
            raise ResultsError(f"{root}: no processed experiments (no <exp>/all.exp.out)")
        return cls.from_records(rows)

    # -- the exp.py operations -------------------------------------------------
    def _columns(self) -> dict[str, pd.Series]:
        return {c: self.df[c] for c in self.df.columns}

    def _with(self, df: pd.DataFrame) -> "Table":
        return Table(df, self.decimals, self.default_decimals, self.rel_path)

    def select(self, expr: str) -> "Table":
        """Rows where ``expr`` is true (e.g. ``'ca == "bbr" and rate > 90'``)."""
        mask = safeexpr.evaluate(expr, self._columns())
        if not isinstance(mask, pd.Series):
            mask = pd.Series(bool(mask), index=self.df.index)
        return self._with(self.df[mask.fillna(False).astype(bool)])

    def cols(self, *names: str) -> "Table":
        """Only these columns, in this order."""
        flat = [n.strip() for name in names for n in str(name).split(",") if n.strip()]
        missing = [n for n in flat if n not in self.df.columns]
        if missing:
            raise ResultsError(f"unknown column(s) {', '.join(missing)}; columns: {', '.join(self.df.columns)}")
        return self._with(self.df[flat])

    def remove_cols(self, *names: str) -> "Table":
        flat = [n.strip() for name in names for n in str(name).split(",") if n.strip()]
        return self._with(self.df.drop(columns=[n for n in flat if n in self.df.columns]))

    def rows(self, exps: Iterable[str]) -> "Table":
        """Rows whose ``exp`` is in ``exps`` (e.g. ``["57.0", "58.0"]``)."""
        wanted = {str(e).strip() for e in exps}
        return self._with(self.df[self.df["exp"].astype(str).isin(wanted)])

    def new_col(self, name: str, expr: str) -> "Table":
        """Add (or replace) column ``name`` computed from ``expr`` for every row."""
        value = safeexpr.evaluate(expr, self._columns())
        df = self.df.copy()
        df[name] = value
        return self._with(df)

    def sort(self, by: str | Sequence[str] = "exp") -> "Table":
        keys = [by] if isinstance(by, str) else list(by)
        if keys == ["exp"]:
            order = sorted(range(len(self.df)), key=lambda i: _exp_key(self.df["exp"].iloc[i]))
            return self._with(self.df.iloc[order])
        return self._with(self.df.sort_values(keys, kind="stable"))

    def average(self, by: Sequence[str]) -> "Table":
        """Average rows that agree on ``by`` columns; adds ``avgCnt``.

        A key may be ``col[int]`` (rows agree on the integer part) or
        ``col[has:text]`` (rows agree on whether the value contains text).
        Numeric columns are averaged; text columns keep their value if all
        rows agree, else ``...``.
        """
        keys: list[tuple[str, pd.Series]] = []
        for spec in by:
            m = re.fullmatch(r"\s*([^\[\]]+?)\s*(?:\[(int|has:.*)\])?\s*", spec)
            if not m or m.group(1) not in self.df.columns:
                raise ResultsError(f"average: unknown column {spec!r}")
            name, mod = m.group(1), m.group(2)
            s = self.df[name]
            if mod == "int":
                s = np.floor(pd.to_numeric(s, errors="coerce"))
            elif mod:
                s = s.map(safeexpr.cell_text).str.contains(mod[4:], regex=False)
            keys.append((name, s))
        if not keys:
            raise ResultsError("average: no columns given")
        key_frame = pd.DataFrame({f"__k{i}": s.astype(str) for i, (_, s) in enumerate(keys)})
        out_rows = []
        for pos in key_frame.groupby(list(key_frame.columns), sort=False).indices.values():
            part = self.df.iloc[pos]
            row: dict[str, Any] = {}
            for c in self.df.columns:
                col = part[c]
                if pd.api.types.is_numeric_dtype(col) and c not in TEXT_COLUMNS:
                    row[c] = float(col.mean()) if col.notna().any() else np.nan
                else:
                    vals = list(dict.fromkeys(col.astype(str)))
                    row[c] = vals[0] if len(vals) == 1 else "..."
            row["avgCnt"] = len(part)
            out_rows.append(row)
        return self._with(pd.DataFrame(out_rows, columns=list(self.df.columns) + ["avgCnt"]))

    # -- output ----------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        return self.df.copy()

    def __len__(self) -> int:
        return len(self.df)

    def cell_text(self, column: str, value: Any) -> str:
        if isinstance(value, float):
            if math.isnan(value):
                return ""
            dec = (self.decimals or {}).get(column, self.default_decimals)
            if dec is not None:
                return f"{value:.{dec}f}"
            return f"{value:.3f}".rstrip("0").rstrip(".") if not value.is_integer() else f"{value:.1f}"
        return str(value)

    def to_html(self, *, row_color_change: str | None = None) -> str:
        """An HTML table (exp cells link to ``<rel_path>/<exp>/exp.html``;
        rows coloured by ``ca`` as the original)."""
        cols = list(self.df.columns)
        out = ['<table class="netesto-table" border="1" cellspacing="0" cellpadding="3">',
               "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
        prev = None
        for _, r in self.df.iterrows():
            color = CA_COLORS.get(str(r.get("ca", "")).split("/")[0], "#eeeeee")
            if row_color_change and row_color_change in cols:
                if prev is not None and r[row_color_change] != prev:
                    color = "#c0ffc0"
                prev = r[row_color_change]
            cells = []
            for c in cols:
                text = html.escape(self.cell_text(c, r[c]))
                if c == "exp" and text:
                    base = f"{self.rel_path}/" if self.rel_path else ""
                    text = f'<a href="{html.escape(base)}{int(_exp_key(text)[0]) if _exp_key(text)[0] != math.inf else text}/exp.html">{text}</a>'
                cells.append(f"<td>{text}</td>")
            out.append(f'<tr style="background:{color}">' + "".join(cells) + "</tr>")
        out.append("</table>")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        return self.to_html()

    def plot(self, x: str, y1: str | Sequence[str], *, y2: str | Sequence[str] | None = None,
             series: str | None = None, kind: str = "bar", title: str = "", **opts: Any) -> Any:
        """A holoviews plot (bokeh): bars (or ``kind="line"``) of ``y1`` against ``x``, one series
        per value of ``series``, ``y2`` as diamonds on a right axis; ``opts`` are
        :func:`netesto.plots.tables.table_plot`'s (sizes, axis titles, series labels).
        ``netesto.plots.save(t.plot(...), "plot.html")`` writes it as an offline page."""
        try:
            import bokeh  # noqa: F401
            import holoviews  # noqa: F401
        except ImportError as exc:
            from netesto.extras import install_hint

            raise ResultsError(f"plots need holoviews and bokeh ({exc}); {install_hint(exc.name or 'holoviews')}") from None
        from netesto.plots.tables import table_plot

        return table_plot(self, x, y1, y2=y2, series=series, kind=kind, title=title, **opts)


def figure8(table: Table) -> Table:
    """The paper's Figure 8 table: aggregate rows (exp ``N.0``) with a
    fairness column = fastest / slowest flow rate."""
    t = table.select('has(exp, ".0")').new_col("fairness", "rateMax / rateMin")
    cols = ["exp", "expName", "test", "instances", "ca", "cwnd", "pingRtt", "rate",
            "rateMin", "rateMax", "retransPkts%", "fairness"]
    return t.cols(*[c for c in cols if c in t.df.columns]).sort("exp")


__all__ = ["CA_COLORS", "Table", "figure8"]
