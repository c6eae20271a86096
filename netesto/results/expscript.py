"""The original exp.py script format -> the tables and plots of a page (rendered by :mod:`netesto.report.table`).

Script lines are stripped; a trailing ``\\`` joins the next line (no space);
``#`` and blank lines are skipped; ``$var``/``${var}`` are replaced from the
variables given on the command line or by ``source=file,var=value``; each
line is ``key=value`` split at the first ``=`` (surrounding quotes removed).
Command keys are case-insensitive; any other key sets a (case-sensitive)
option such as ``plotX`` or ``Y1Units``.

Commands: ``File``, ``read``, ``append``, ``Select`` (``;`` = OR, ``,`` =
AND; ``== != >= <= > <``, ``<>`` range ``lo:hi``, ``[has]`` (``^x`` =
prefix), ``[hasnot]``; ``all`` resets), ``Cols``/``SelectCols``,
``RemoveCols``/``DeleteCols``, ``Rows``/``SelectRows``/``SelectExp``,
``Average``, ``NewCol=name=expr`` (column names, numbers, ``+ - * /``,
parentheses, ``&`` concatenation), the paper's ``NewColField1``/
``NewColOp``/``NewColField2``/``NewColName``, ``doTable``,
``PercentTable``, ``doPlot[=name]``, ``format``, ``relPath``, ``path``,
``source``, ``log``, ``end``.
"""

from __future__ import annotations

import html
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from netesto.errors import ResultsError
from netesto.results.analysis import Table
from netesto.results.safeexpr import cell_text

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_SELECT_OPS = ("[hasnot]", "[has]", "==", "!=", ">=", "<=", "<>", ">", "<")
PLOT_MARK = "<!--netesto:plot:{}-->"
_NEWCOL_OPS = {"newcoldiv": "/", "newcolmul": "*", "newcoladd": "+", "newcolsub": "-"}


def script_lines(text: str, variables: Mapping[str, str]) -> list[tuple[int, str, str]]:
    """(line number, key, value) of each command line of a script."""
    out: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not pending:
            start = n
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        if not line or line.startswith("#"):
            continue
        line = _VAR.sub(lambda m: str(variables.get(m.group(1) or m.group(2), m.group(0))), line)
        key, sep, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out.append((start, key.strip(), value))
    return out


def _select_mask(df: pd.DataFrame, spec: str) -> pd.Series:
    """The original's Select syntax over ``df`` (unknown columns are ignored)."""
    if spec.strip().lower() == "all":
        return pd.Series(True, index=df.index)
    result = pd.Series(False, index=df.index)
    for group in spec.split(";"):
        mask = pd.Series(True, index=df.index)
        for cond in group.split(","):
            cond = cond.strip()
            if not cond:
                continue
            for op in _SELECT_OPS:
                if op in cond:
                    name, _, value = cond.partition(op)
                    break
            else:
                raise ResultsError(f"Select: no operator in {cond!r}")
            name, value = name.strip(), value.strip()
            if name not in df.columns:  # the original ignored it: a typo selected everything
                raise ResultsError(f"Select: unknown column {name!r}{_did_you_mean(name, df.columns)}")
            col = df[name]
            text = col.map(cell_text)
            num = pd.to_numeric(col, errors="coerce")
            try:
                fval = float(value)
            except ValueError:
                fval = None
            if op == "[has]":
                m = text.str.startswith(value[1:]) if value.startswith("^") else text.str.contains(value, regex=False)
            elif op == "[hasnot]":
                m = ~text.str.contains(value, regex=False)
            elif op == "<>":
                lo, _, hi = value.partition(":")
                m = pd.Series(True, index=df.index)
                if lo.strip():
                    m &= num >= _number(cond, lo)
                if hi.strip():
                    m &= num <= _number(cond, hi)
            elif op in ("==", "!=") and (fval is None or num.isna().all()):
                m = (text == value) if op == "==" else (text != value)
            elif fval is None:
                raise ResultsError(f"Select: {cond!r} needs a number after {op}")
            else:
                m = {"==": num == fval, "!=": num != fval, ">=": num >= fval, "<=": num <= fval,
                     ">": num > fval, "<": num < fval}[op]
            mask &= m.fillna(False)
        result |= mask
    return result


def _number(cond: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ResultsError(f"{cond!r}: {text.strip()!r} is not a number") from None


def _int(option: str, text: object, whole: object = None) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        shown = whole if whole is not None else text
        raise ResultsError(f"{option} {shown!r}: "
                           "expected a whole number") from None


def _newcol_expr(expr: str) -> str:
    """The original NewCol grammar is a subset of ours; check it stays so."""
    if not re.fullmatch(r"[\sA-Za-z_0-9.+\-*/()&]*", expr):
        raise ResultsError(f"NewCol: {expr!r}: only column names, numbers, + - * / ( ) and & are allowed")
    return expr


@dataclass
class ExpScript:
    """Runs one exp.py script and collects the page's HTML parts and plots (``doPlot`` leaves
    :data:`PLOT_MARK` where the report puts each plot's div)."""

    base: Path
    variables: dict[str, str] = field(default_factory=dict)
    table: Table | None = None
    full: Table | None = None
    options: dict[str, str] = field(default_factory=dict)
    parts: list[str] = field(default_factory=list)
    rel_path: str = ""
    fmt: int | None = None
    plots: list[Any] = field(default_factory=list)  # holoviews plots of doPlot, in page order
    # Where the page will be: without relPath=, its exp links point from there to the CSV's directory.
    page_dir: Path | None = None

    def _load(self, path: str) -> Table:
        p = Path(path)
        if not p.is_absolute():
            p = self.base / p
        if p.suffix != ".csv":
            p = p.with_name(p.name + ".csv")
        return Table.read_csv(p)

    def _need(self) -> Table:
        if self.table is None:
            self.full = self.table = self._load("exp")
        return self.table

    def _set(self, t: Table) -> None:
        self.table = Table(t.df, t.decimals, self.fmt, self.rel_path)

    def run(self, text: str, *, source: str = "<script>") -> None:
        for lineno, key, value in script_lines(text, self.variables):
            try:
                if self.command(key, value) == "end":
                    break
            except ResultsError as exc:
                raise ResultsError(f"{source}:{lineno}: {key}: {exc.message}") from exc
            except (ValueError, TypeError) as exc:  # a value no check above foresaw
                raise ResultsError(f"{source}:{lineno}: {key}: bad value: {exc}") from exc

    def command(self, key: str, value: str) -> str | None:
        k = key.lower()
        if k == "end":
            return "end"
        if k == "file":
            if self.full is None:
                self.rel_path = self._links_to(value)
                self.full = self._load(value)
                self._set(self.full)
        elif k == "read":
            self.full = self._load(value)
            self._set(self.full)
        elif k == "append":
            extra = self._load(value).df
            cur = self._need().df
            shift = 100 * (int(max(float(str(e).split(".")[0]) for e in cur["exp"])) // 100 + 1)
            extra = extra.copy()
            extra["exp"] = [f"{int(float(str(e).split('.')[0])) + shift}.{str(e).partition('.')[2] or '0'}"
                            for e in extra["exp"]]
            self._set(Table(pd.concat([cur, extra], ignore_index=True)))
        elif k == "format":
            self.fmt = _int("value", value)
            self._set(self._need())
        elif k == "relpath":
            self.rel_path = value
            self._set(self._need())
        elif k in ("path", "log", "iterfile"):
            self.options[key] = value
        elif k == "source":
            fname, _, rest = value.partition(",")
            for pair in rest.split(","):
                if "=" in pair:
                    a, _, b = pair.partition("=")
                    self.variables[a.strip()] = b.strip()
            p = Path(fname)
            p = p if p.is_absolute() else self.base / p
            try:
                text = p.read_text()
            except OSError as exc:
                raise ResultsError(f"cannot read {p}: {exc.strerror}") from exc
            for _, key2, value2 in script_lines(text, self.variables):
                if self.command(key2, value2) == "end":
                    return "end"
        elif k == "select":
            t = self._need()
            if value.strip().lower() == "all":
                assert self.full is not None
                self._set(self.full)
            else:
                self._set(Table(t.df[_select_mask(t.df, value)], t.decimals).sort("exp"))
        elif k in ("cols", "selectcols"):
            t = self._need()
            if value.strip().upper() != "ALL":
                wanted = [c.strip() for c in value.split(",") if c.strip()]
                unknown = [c for c in wanted if c not in t.df.columns]
                if unknown:
                    raise ResultsError(f"unknown column {unknown[0]!r}{_did_you_mean(unknown[0], t.df.columns)}")
                # Shown in the table's own column order, as the original.
                self._set(t.cols(*[c for c in t.df.columns if c in wanted]))
        elif k in ("removecols", "deletecols"):
            self._set(self._need().remove_cols(value))
        elif k in ("rows", "selectrows", "selectexp"):
            t = self._need()
            if value.strip().lower() != "all":
                self._set(t.rows(value.split(",")))
        elif k == "average":
            self._set(self._need().average(_split_average(value)))
        elif k == "newcol":
            name, sep, expr = value.partition("=")
            if not sep or not name.strip():
                raise ResultsError("expected NewCol=name=expression")
            self._set(self._need().new_col(name.strip(), _newcol_expr(expr)))
        elif k == "newcolname":
            f1, f2 = self.options.get("NewColField1", ""), self.options.get("NewColField2", "")
            op = _NEWCOL_OPS.get(self.options.get("NewColOp", "").lower())
            if not f1 or not f2 or op is None:
                raise ResultsError("NewColName needs NewColField1, NewColOp (NewColDiv/Mul/Add/Sub) and NewColField2")
            self._set(self._need().new_col(value, f"col({f1!r}) {op} col({f2!r})"))
        elif k == "dotable":
            t = self._need()
            self.parts.append(t.to_html(row_color_change=self.options.get("rowColorChange")))
        elif k == "percenttable":
            self.parts.append(_percent_table(self._need()).to_html())
        elif k == "doplot":
            self.parts.append(self._plot(value))
        elif key in OPTIONS:
            self.options[key] = value
        else:
            raise ResultsError(f"unknown command or option {key!r}{_did_you_mean(key)}")
        return None

    def _links_to(self, csv: str) -> str:
        """The original's relPath (for its web server) unless we know where the page goes:
        then the path from the page's folder to the CSV's, so row links open each exp.html."""
        if self.page_dir is None:
            return csv.rsplit("/", 1)[0] if "/" in csv else csv
        path = Path(csv) if Path(csv).is_absolute() else self.base / csv
        rel = os.path.relpath(path.resolve().parent, self.page_dir.resolve())
        return "" if rel == "." else rel

    def _plot(self, name: str) -> str:
        t = self._need()
        o = self.options
        if "plotX" not in o or "plotY1" not in o:
            raise ResultsError("doPlot needs plotX and plotY1")
        width, height = 1300, 650
        size = o.get("plotSize", "")
        if size:
            w, _, h = size.replace("x", ",").partition(",")
            width, height = _int("plotSize", w, size), _int("plotSize", h, size)
        width = _int("plotXSize", o.get("plotXSize", width))
        height = _int("plotYSize", o.get("plotYSize", height))
        series_labels: dict[str, str] = {}
        series = o.get("plotSeries") or None
        if series and ";" in series:
            series, _, labels = series.partition(";")
            for pair in labels.split(","):
                a, _, b = pair.partition("=")
                series_labels[a.strip()] = b.strip()
        y1 = [s.strip().strip("'\"") for s in o["plotY1"].split(",")]
        y2 = [s.strip().strip("'\"") for s in o.get("plotY2", "").split(",") if s.strip()]
        missing = [c for c in [o["plotX"], *y1, *y2, *([series] if series else [])] if c not in t.df.columns]
        if missing:
            raise ResultsError(f"doPlot: unknown column(s) {', '.join(missing)}")
        plot_t = _scale_units(t, y1, o.get("Y1Units"))
        plot = plot_t.plot(o["plotX"], y1, y2=y2 or None, series=series,
                           title=o.get("plotTitle", "").replace("|", " / "), width=width,
                           height=height, x_title=o.get("plotXTitle", ""),
                           y1_title=o.get("plotY1Title", ""), y2_title=o.get("plotY2Title", ""),
                           series_title=o.get("plotSeriesTitle", ""), series_labels=series_labels)
        self.plots.append(plot)
        anchor = html.escape(name or f"plot{len(self.plots)}")
        # the plot's div is known once every plot is rendered into the page's one bokeh document
        return f'<div id="{anchor}">{PLOT_MARK.format(len(self.plots) - 1)}</div>'


COMMANDS = ("File", "read", "append", "Select", "Cols", "SelectCols", "RemoveCols", "DeleteCols", "Rows",
            "SelectRows", "SelectExp", "Average", "NewCol", "NewColName", "doTable", "PercentTable", "doPlot",
            "format", "relPath", "path", "log", "IterFile", "source", "end")
# The original's options (case-sensitive), those we draw and those we accept and leave alone.
OPTIONS = frozenset({
    "plotX", "plotY1", "plotY2", "plotSeries", "plotTitle", "plotXTitle", "plotY1Title", "plotY2Title",
    "plotSeriesTitle", "plotSize", "plotXSize", "plotYSize", "plotXLen", "xUniform", "Y1min", "Y2min",
    "Y1eqY2", "Y1Units", "Y2Units", "Y1div", "Y2div", "Y1LogScale", "Y2LogScale", "BkgLevel", "PlotRatio",
    "PlotPercent", "rowColorChange", "NewColField1", "NewColOp", "NewColField2",
})


def _did_you_mean(word: str, choices: Iterable[object] | None = None) -> str:
    """"; did you mean X?" for the closest of ``choices`` (default: commands and options)."""
    import difflib

    names = [str(c) for c in choices] if choices is not None else [*COMMANDS, *OPTIONS]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.7)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


def _split_average(value: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in value:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _scale_units(t: Table, ys: list[str], spec: str | None) -> Table:
    """``Y1Units=1=us,1000=ms``: divide by the largest factor below the max."""
    if not spec:
        return t
    factors = []
    for part in spec.split(","):
        a, _, _label = part.partition("=")
        try:
            factors.append(float(a))
        except ValueError:
            raise ResultsError(f"Y1Units: bad factor {a!r}") from None
    # the largest finite value (an inf is not drawn and must not pick the factor)
    finite = [float(v) for y in ys for v in pd.to_numeric(t.df[y], errors="coerce") if np.isfinite(v)]
    top = max(finite, default=math.nan)
    below = [f for f in sorted(factors) if f <= top] or [1.0]
    f = below[-1]
    if f == 1.0:
        return t
    df = t.df.copy()
    for y in ys:
        df[y] = pd.to_numeric(df[y], errors="coerce") / f
    return Table(df, t.decimals, t.default_decimals, t.rel_path)


def _percent_table(t: Table) -> Table:
    df = t.df.copy()
    if df.empty:
        return t
    for c in df.columns:
        if pd.api.types.is_numeric_dtype(df[c]):
            first = df[c].iloc[0]
            with np.errstate(divide="ignore", invalid="ignore"):
                df[c] = 100.0 * (df[c] - first) / first if first else np.nan
    return Table(df, None, 1, t.rel_path)


__all__ = ["ExpScript", "PLOT_MARK", "script_lines"]
