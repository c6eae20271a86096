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
UP_LINK = '<a href="../index.html" title="every experiment of this working directory">Up</a>'
# exp.out key -> (the unit shown beside it, what its value is divided by to be in that unit).
# RTTs are recorded in us and shown in ms, as the terminal's rate table shows them; transaction
# latencies stay in us, as `netesto flow` prints them.
RTT_MS = ("ms", 1000.0)
KEY_UNITS: dict[str, tuple[str, float]] = {
    "dur": ("s", 1.0), "delay": ("s", 1.0), "req": ("bytes", 1.0), "reply": ("bytes", 1.0),
    **{k: ("Mbit/s", 1.0) for k in ("rate", "rateMin", "rateMax")},
    **{f"{k}Latency": ("us", 1.0) for k in ("min", "mean", "max", "p50", "p90", "p99", "p999")},
    "localCpu": ("% of a core", 1.0), "remoteCpu": ("% of a core", 1.0),
    "cwnd": ("packets", 1.0), "rtt": RTT_MS, "pingRtt": RTT_MS,
    "tcpRmem": ("bytes", 1.0), "tcpWmem": ("bytes", 1.0), "rx-frames": ("frames", 1.0), "tx-frames": ("frames", 1.0),
    **{k: ("packets", 1.0) for k in ("localRetrans", "remoteRetrans", "lost", "retrans_total", "packetsSent",
                                       "client-rx-packets", "client-tx-packets")},
    **{k: ("bytes", 1.0) for k in ("client-rx-bytes", "client-tx-bytes", "client-tx-packet-len",
                                     "client-rx-packet-len")},
}
# keys whose numbers are counts, indices or names, with no unit to state (retransPkts% says its own)
NO_UNIT = frozenset({"exp", "group", "instances", "kernel", "adaptive-rx", "jain"})


@dataclass(frozen=True)
class PagePlots:
    """The plots of a page: bokeh's inline code for <head>, the data script, and one entry per
    plot (id, title, caption, div, folded); ``note`` says why there are none, if so."""

    head: str = ""
    script: str = ""
    plots: tuple[dict[str, Any], ...] = ()
    note: str = ""
    fct: Any = None  # the FCT-slowdown figure's div (drawn workloads), in a block of its own


def page_plots(ds: Any, raw: Any = None) -> PagePlots:
    """The page's per-flow plots (holoviews/bokeh, time axes linked): those of :data:`PLOTS` that
    the dataset has values for, each its own bokeh figure; with the experiment's ``raw`` data
    (:class:`~netesto.results.load.ExperimentRaw`), the latency CDF of its RR/CRR flows last."""
    try:
        import bokeh  # noqa: F401
        import holoviews  # noqa: F401
    except ImportError as exc:
        from netesto.extras import install_hint

        return PagePlots(note=f"Plots need holoviews and bokeh; {install_hint(exc.name or 'holoviews')}.")
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
    fct = _fct_figure(ds)
    emb = embed([fig for *_, fig in shown] + ([fct] if fct is not None else []))
    from markupsafe import Markup

    plots = tuple({"id": name, "title": title, "caption": caption, "div": Markup(div), "folded": name in FOLDED}
                  for (name, title, caption, _), div in zip(shown, emb.divs))
    # bokeh's own code and the plots' JSON data: inserted as markup
    return PagePlots(Markup(emb.head), Markup(emb.script), plots, fct=Markup(emb.divs[-1]) if fct is not None else None)


def _fct_figure(ds: Any) -> Any:
    """The FCT-slowdown-by-size figure of a drawn workload's transactions (None without any)."""
    if "txn" not in ds.dims:
        return None
    from netesto.plots.fct import fct_slowdown
    from netesto.plots.page import figures

    try:
        return figures(fct_slowdown(ds))[0]
    except ValueError:  # no completed transaction with a slowdown: the tables say why
        return None


def in_unit(key: str, text: str) -> str:
    """An exp.out value in the unit :data:`KEY_UNITS` shows it in (text that is no number unchanged).

    >>> in_unit("rtt", "32918.8"), in_unit("pingRtt", "527"), in_unit("rate", "94.1"), in_unit("rtt", "")
    ('32.9', '0.527', '94.1', '')
    """
    _, divisor = KEY_UNITS.get(key, ("", 1.0))
    if divisor == 1.0:
        return text
    try:
        value = float(text) / divisor
    except ValueError:
        return text
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def labelled(key: str) -> str:
    """``rtt (ms)``: a key with its unit, if it has one."""
    unit = KEY_UNITS.get(key, ("", 1.0))[0]
    return f"{key} ({unit})" if unit else key


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
    from markupsafe import Markup

    from netesto.results.fct import page_rows
    from netesto.results.health import page_context

    return jinja2.Environment(autoescape=True).from_string(text).render(
        **page_context(ds),  # the sampling, limits and flow-warnings blocks
        **page_rows(ds),  # the flow completion times block: its tables
        fct_figure=plots.fct,
        plots=plots.plots,
        bokeh_head=plots.head,
        bokeh_script=plots.script,
        plots_note=plots.note,
        exp=exp,
        exp_name=ds.attrs.get("exp_name", ""),
        groups=[{"hsn": g.hsn, "values": {k: in_unit(k, str(v)) for k, v in g.as_dict().items()}} for g in groups],
        keys=keys,
        labels={k: labelled(k) for k in keys},
        overall=dict(all_items),
        errors=list(errors),
        warnings=list(warnings),
        run_errors=[str(e) for e in json.loads(ds.attrs.get("run_errors", "[]") or "[]")],
        # Links only to pages that exist: the previous one's Next is added when this one is written.
        prev_exp=exp - 1 if (directory.parent / str(exp - 1) / "exp.html").is_file() else None,
        next_exp=exp + 1 if (directory.parent / str(exp + 1) / "exp.html").is_file() else None,
        next_mark=NEXT_MARK,
        up_link=Markup(UP_LINK),
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
    """Write ``<exp>/exp.html`` for a processed experiment and link the previous page to it, and
    the working directory's ``index.html`` (the page's Up) again, with this experiment in it (the
    original appended a line to ``ExpList.html``); None without Jinja2 (the page writer
    :func:`process_experiment` passes to the results)."""
    page = render_page(done.ds, done.groups, done.all_items, exp=done.exp, directory=done.directory,
                       errors=done.errors, warnings=done.warnings, raw=done.raw)
    if page is None:
        return None
    from netesto.errors import NetestoError
    from netesto.report.index import write_index

    try:
        write_index(done.directory.parent)
    except (NetestoError, OSError):  # no index: the page's Up goes nowhere, so it has none
        page = page.replace(UP_LINK, "")
    path = done.directory / "exp.html"
    write_text_atomic(path, page)
    link_next(done.directory.parent / str(done.exp - 1) / "exp.html", done.exp)
    return path


def process_experiment(workdir: str | os.PathLike[str], exp: int | str, *, html: bool = True,
                       **options: Any) -> ProcessResult:
    """:func:`netesto.results.process_experiment` (exp.nc, .exp.out files, exp.csv rows; ``options``
    are its ``desc``, ``other``, ``fields_file``, ``csv_name``, ``steady``), then, with ``html``, the
    experiment's page ``<exp>/exp.html`` (what ``PROCESS_EXP`` does)."""
    return process_data(workdir, exp, page=write_page if html else None, **options)


__all__ = ["FOLDED", "KEY_UNITS", "NO_UNIT", "PLOTS", "PagePlots", "in_unit", "labelled", "link_next", "page_plots",
           "process_experiment", "render_page", "write_page"]
