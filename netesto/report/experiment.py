"""An experiment's page, ``<exp>/exp.html``: the key table and the per-flow plots (Jinja2, bokeh inline)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from netesto.results.process import ProcessResult, Processed
from netesto.results.process import process_experiment as process_data
from netesto.results.summaries import write_text_atomic

# (panel, what its lines are) in page order; netesto.plots.flows.PANELS has the titles
PLOTS: tuple[tuple[str, str], ...] = (
    ("goodput", "Bytes the receiver got, per second, averaged over 200 ms: one line per flow; dashed, their "
                "sum; red marks where a flow retransmitted."),
    ("goodput_raw", "The same, one point per sampling interval: a few ms of application bytes arrive in bursts, "
                    "so single samples can exceed the link rate while the mean above does not."),
    ("cwnd", "The sender's congestion window (TCP_INFO tcpi_snd_cwnd), in packets."),
    ("rtt", "The sender's smoothed round-trip time (tcpi_rtt)."),
    ("lat_p99", "The 99th percentile of request/response times in each interval (RR and CRR flows only)."),
)
CDF_CAPTION = ("The share of request/response transactions that took at most the time on the (log) axis, "
               "from every transaction's time as the engine recorded it (RR and CRR flows only).")
FOLDED = frozenset({"goodput_raw"})  # shown one click away (a <details> on the page)
NEXT_MARK = "<!--netesto:next-->"


@dataclass(frozen=True)
class PagePlots:
    """The plots of a page: bokeh's inline code for <head>, the data script, and one entry per
    plot (id, title, caption, div, folded); ``note`` says why there are none, if so."""

    head: str = ""
    script: str = ""
    plots: tuple[dict[str, Any], ...] = ()
    note: str = ""


def page_plots(ds: Any, raw: Any = None) -> PagePlots:
    """The page's per-flow plots (holoviews/bokeh, time axes linked): those of :data:`PLOTS` that
    the dataset has values for, each its own bokeh figure; with the experiment's ``raw`` data
    (:class:`~netesto.results.load.ExperimentRaw`), the latency CDF of its RR/CRR flows last."""
    try:
        import bokeh  # noqa: F401
        import holoviews  # noqa: F401
    except ImportError:
        return PagePlots(note="Plots need holoviews and bokeh: pip install 'netesto[plots]'.")
    from netesto.plots.flows import PANELS, timeseries
    from netesto.plots.page import embed, figures

    if "time" not in ds.coords or ds.sizes.get("time", 0) == 0:
        return PagePlots()
    try:
        layout = timeseries(ds, [name for name, _ in PLOTS])
    except ValueError:  # none of the variables has a value
        return PagePlots()
    by_title = {fig.title.text: fig for fig in figures(layout)}
    shown = [(name, PANELS[name][0], caption, by_title[PANELS[name][0]]) for name, caption in PLOTS
             if PANELS[name][0] in by_title]
    if raw is not None:
        from netesto.plots.latency import latency_cdf

        try:
            (fig,) = figures(latency_cdf(raw))
        except ValueError:  # no RR/CRR flow
            pass
        else:
            shown.append(("latency_cdf", fig.title.text, CDF_CAPTION, fig))
    from netesto.plots.trace import page_panels  # per-ACK traces, a bounded overview (docs/traces.md)

    for name, caption, panel in page_panels(ds):
        (fig,) = figures(panel)
        shown.append((name, fig.title.text, caption, fig))
    emb = embed([fig for *_, fig in shown])
    from markupsafe import Markup

    plots = tuple({"id": name, "title": title, "caption": caption, "div": Markup(div), "folded": name in FOLDED}
                  for (name, title, caption, _), div in zip(shown, emb.divs))
    # bokeh's own code and the plots' JSON data: inserted as markup
    return PagePlots(Markup(emb.head), Markup(emb.script), plots)


def render_page(ds: Any, groups: Sequence[Any], all_items: Sequence[tuple[str, str]], *, exp: int,
                directory: Path, errors: Sequence[str] = (), warnings: Sequence[str] = (),
                raw: Any = None) -> str | None:
    """exp.html for the experiment in ``directory``, or None without Jinja2 (or its template);
    ``raw``, the experiment's raw data, adds the latency CDF of its RR/CRR flows."""
    try:
        import jinja2
    except ImportError:
        return None
    from importlib import resources

    try:
        text = resources.files("netesto.report_templates").joinpath("exp.html.j2").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return None
    values = [g.as_dict() for g in groups]
    keys: list[str] = []
    for g in groups:
        for k, _ in g.items:
            # a row nobody has a value for (latencies of stream flows) is left out
            if k not in keys and any(str(v.get(k, "")).strip() for v in values):
                keys.append(k)
    exp = int(ds.attrs.get("exp", exp))
    plots = page_plots(ds, raw)
    return jinja2.Environment(autoescape=True).from_string(text).render(
        plots=plots.plots,
        bokeh_head=plots.head,
        bokeh_script=plots.script,
        plots_note=plots.note,
        exp=exp,
        exp_name=ds.attrs.get("exp_name", ""),
        groups=[{"hsn": g.hsn, "values": g.as_dict()} for g in groups],
        keys=keys,
        overall=dict(all_items),
        errors=list(errors),
        warnings=list(warnings),
        run_errors=[str(e) for e in json.loads(ds.attrs.get("run_errors", "[]") or "[]")],
        # Links only to pages that exist: the previous one's Next is added when this one is written.
        prev_exp=exp - 1 if (directory.parent / str(exp - 1) / "exp.html").is_file() else None,
        next_exp=exp + 1 if (directory.parent / str(exp + 1) / "exp.html").is_file() else None,
        next_mark=NEXT_MARK,
        has_latency=any(str(v.get("meanLatency", "")).strip() for v in values),
        hosts=json.loads(ds.attrs.get("hosts", "{}") or "{}"),
    )


def link_next(previous: Path, exp: int) -> bool:
    """Give the previous experiment's page its Next link, now that page ``exp`` exists."""
    try:
        text = previous.read_text(encoding="utf-8")
    except OSError:
        return False
    if NEXT_MARK not in text:
        return False
    write_text_atomic(previous, text.replace(NEXT_MARK, f' <a href="../{exp}/exp.html">Next</a>', 1))
    return True


def write_page(done: Processed) -> Path | None:
    """Write ``<exp>/exp.html`` for a processed experiment and link the previous page to it;
    None without Jinja2 (the page writer :func:`process_experiment` passes to the results)."""
    page = render_page(done.ds, done.groups, done.all_items, exp=done.exp, directory=done.directory,
                       errors=done.errors, warnings=done.warnings, raw=done.raw)
    if page is None:
        return None
    path = done.directory / "exp.html"
    write_text_atomic(path, page)
    link_next(done.directory.parent / str(done.exp - 1) / "exp.html", done.exp)
    return path


def process_experiment(workdir: str | os.PathLike[str], exp: int | str, *, html: bool = True,
                       **options: Any) -> ProcessResult:
    """:func:`netesto.results.process_experiment` (exp.nc, .exp.out files, exp.csv rows; ``options``
    are its ``desc``, ``other``, ``fields_file``, ``csv_name``), then, with ``html``, the
    experiment's page ``<exp>/exp.html`` (what ``PROCESS_EXP`` does)."""
    return process_data(workdir, exp, page=write_page if html else None, **options)


__all__ = ["FOLDED", "PLOTS", "PagePlots", "link_next", "page_plots", "process_experiment", "render_page",
           "write_page"]
