"""HTML for notebooks: an experiment's or a run's summary table and main plots (what rich reprs show).

The HTML draws offline (bokeh's JavaScript inline, once per kernel: :mod:`netesto.plots.inline`):
it renders in JupyterLab with no internet and in a notebook exported by nbconvert.
"""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

from netesto.errors import NetestoError

MAX_PLOTTED = 3  # a run's last experiments with plots; the rest are rows of its table

# (flow summary variable, column header, divisor, decimals)
COLUMNS: tuple[tuple[str, str, float, int], ...] = (
    ("rate", "rate (Mbit/s)", 1.0, 1),
    ("mean_rtt", "mean RTT (ms)", 1000.0, 2),
    ("mean_cwnd", "mean cwnd", 1.0, 1),
    ("retrans_total", "retransmits", 1.0, 0),
    ("lat_p99_total", "p99 latency (ms)", 1000.0, 2),
)
_STYLE = ("<style>.netesto-result table{border-collapse:collapse;margin:.3em 0}.netesto-result td,"
          ".netesto-result th{border:1px solid #bbb;padding:1px 6px;text-align:right}"
          ".netesto-result .errors{color:#a00}</style>")


def _cell(value: Any, divisor: float = 1.0, decimals: int = 1) -> str:
    try:
        number = float(value) / divisor
    except (TypeError, ValueError):
        return html.escape(str(value))
    return "" if not math.isfinite(number) else f"{number:.{decimals}f}"


def flow_table(ds: Any) -> str:
    """One row per flow: its id, host, server, test, ca and the summaries of :data:`COLUMNS` it has
    (columns no flow has a value for are left out)."""
    import numpy as np

    names = [c for c in ("host", "server", "test", "ca") if c in ds.coords]
    columns = [c for c in COLUMNS if c[0] in ds and np.isfinite(np.asarray(ds[c[0]].values, dtype=float)).any()]
    rows = ["<tr><th>flow</th>" + "".join(f"<th>{n}</th>" for n in names)
            + "".join(f"<th>{html.escape(c[1])}</th>" for c in columns) + "</tr>"]
    for i, flow in enumerate(ds["flow"].values):
        cells = [html.escape(str(flow))] + [html.escape(str(ds[n].values[i])) for n in names]
        cells += [_cell(ds[var].values[i], div, dec) for var, _, div, dec in columns]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _plots(datasets: Sequence[Any]) -> tuple[str, str, list[str]]:
    """(head, script, one div per dataset) of their main plots, in one bokeh document."""
    try:
        import bokeh  # noqa: F401
        import holoviews  # noqa: F401
    except ImportError as exc:
        from netesto.extras import install_hint

        note = html.escape(f"Plots need holoviews and bokeh; {install_hint(exc.name or 'holoviews')}.")
        return "", "", [f"<p>{note}</p>"] * len(datasets)
    from netesto.plots.flows import timeseries
    from netesto.plots.inline import embed

    layouts = []
    for ds in datasets:
        try:
            layouts.append(timeseries(ds))
        except ValueError:  # no goodput, cwnd or rtt to draw
            layouts.append(None)
    drawn = embed([lay for lay in layouts if lay is not None]) if any(lay is not None for lay in layouts) else None
    divs = iter(drawn.divs if drawn else ())
    return (drawn.head if drawn else "", drawn.script if drawn else "",
            [next(divs) if lay is not None else "" for lay in layouts])


def experiment_html(ds: Any, *, title: str = "") -> str:
    """An experiment's flow table and its goodput, cwnd and RTT plots (``ExperimentResult._repr_html_``)."""
    head, script, (div,) = _plots([ds])
    name = title or f"Experiment {ds.attrs.get('exp', '')} {ds.attrs.get('exp_name', '')}".strip()
    return (f'<div class="netesto-result">{_STYLE}{head}<h3>{html.escape(name)}</h3>{flow_table(ds)}{div}'
            f"{script}</div>")


def run_html(result: Any) -> str:
    """A run's experiments (one row each), its errors, and the flow tables and plots of its last
    :data:`MAX_PLOTTED` experiments (``RunResult._repr_html_``). ``result`` is a
    :class:`~netesto.controller.result.RunResult`; experiments whose data cannot be opened are
    rows that say so."""
    state = "interrupted: data collected so far kept" if getattr(result, "interrupted", False) else (
        "failed" if result.errors else "ok")
    parts = [f"<p>Run in {html.escape(str(result.workdir))}: {len(result.experiments)} experiment(s) in "
             f"{float(result.elapsed):.1f} s, {state}.</p>"]
    if result.errors:
        parts.append('<ul class="errors">' + "".join(f"<li>{html.escape(str(e))}</li>" for e in result.errors)
                     + "</ul>")
    rows, datasets = ["<tr><th>exp</th><th>name</th><th>flows</th><th>total rate (Mbit/s)</th></tr>"], []
    for e in result.experiments:
        try:
            ds = e.dataset
        except (ImportError, OSError, ValueError, NetestoError) as exc:  # a repr shows what it can
            rows.append(f"<tr><td>{e.exp}</td><td>{html.escape(e.exp_name)}</td><td colspan=2>no data: "
                        f"{html.escape(str(exc))}</td></tr>")
            continue
        total = _cell(float(ds["rate"].sum()) if "rate" in ds else math.nan)
        rows.append(f"<tr><td>{e.exp}</td><td>{html.escape(e.exp_name)}</td><td>{ds.sizes.get('flow', 0)}</td>"
                    f"<td>{total}</td></tr>")
        datasets.append((e, ds))
    parts.append("<table>" + "".join(rows) + "</table>")
    shown = datasets[-MAX_PLOTTED:]
    head, script, divs = _plots([ds for _, ds in shown])
    for (e, ds), div in zip(shown, divs):
        parts.append(f"<h3>Experiment {e.exp} {html.escape(e.exp_name)}</h3>{flow_table(ds)}{div}")
    return f'<div class="netesto-result">{_STYLE}{head}{"".join(parts)}{script}</div>'


__all__ = ["COLUMNS", "MAX_PLOTTED", "experiment_html", "flow_table", "run_html"]
