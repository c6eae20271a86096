"""Live per-flow goodput and cwnd: bokeh figures that grow as interval samples arrive.

:class:`LivePlot` keeps one ``ColumnDataSource`` per flow and streams new samples
into it (``source.stream``), so a displayed document sends only the new points. It
works wherever a bokeh document is kept in sync with its view: in a notebook the
magics host it in a ``jupyter_bokeh.BokehModel`` widget (:mod:`netesto.magics.liveview`);
nothing here imports IPython. Every sample drawn is also in :attr:`LivePlot.data`
(:class:`~netesto.plots.livedata.LiveData`): the same samples as a holoviews ``Buffer`` and
``DynamicMap`` a user keeps and extends.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Iterable

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.models.annotations import Span
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from netesto.plots.livedata import LiveData

if TYPE_CHECKING:
    from netesto.controller.live import Sample

# Points kept per flow on screen: an hour at one sample a second.
ROLLOVER = 3600


class LivePlot:
    """Goodput (Mbit/s) over the run's time and, once any sample carries it, cwnd (packets)
    below, x axes linked, one line per flow (the legend hides a flow when clicked)."""

    def __init__(self, *, width: int = 720, height: int = 220, title: str = "") -> None:
        tools = "pan,xwheel_zoom,box_zoom,reset,save"
        self.goodput = figure(height=height, width=width, tools=tools, title=title or "goodput per flow",
                              x_axis_label="time (s)", y_axis_label="Mbit/s")
        self.cwnd = figure(height=int(height * 0.8), width=width, tools=tools, x_range=self.goodput.x_range,
                           title="cwnd per flow", x_axis_label="time (s)", y_axis_label="packets")
        self.cwnd.visible = False  # shown once a sample carries cwnd
        for fig, unit in ((self.goodput, "Mbit/s"), (self.cwnd, "packets")):
            fig.add_tools(HoverTool(tooltips=[("flow", "@flow"), ("host", "@host"), ("t", "@t{0.0} s"),
                                              ("value", f"@y{{0.0}} {unit}")]))
        # "now": moves with the run's clock, so the plot shows time passing while no sample comes
        self.cursor = Span(location=0.0, dimension="height", line_color="gray", line_dash="dotted")
        self.goodput.add_layout(self.cursor)
        self.layout = column(self.goodput, self.cwnd)
        self.sources: dict[str, tuple[ColumnDataSource, ColumnDataSource]] = {}
        self.points = 0
        self.data = LiveData()  # every sample drawn, for holoviews users (its buffer, its DynamicMaps)

    def _frozen(self) -> AbstractContextManager[Any]:
        """New lines change the document's model graph: walk it once, not once per line (16 flows'
        lines, recomputed one by one, took seconds of CPU the flows then lacked)."""
        doc = self.layout.document
        return doc.models.freeze() if doc is not None else nullcontext()

    def declare(self, flows: Iterable[str]) -> None:
        """Draw the lines of ``flows`` now (scheduled, not started yet: the work is done before they run)."""
        with self._frozen():
            for flow in flows:
                self._sources(flow)

    def _sources(self, flow: str) -> tuple[ColumnDataSource, ColumnDataSource]:
        got = self.sources.get(flow)
        if got is None:
            colour = Category10_10[len(self.sources) % len(Category10_10)]
            got = (ColumnDataSource(_columns()), ColumnDataSource(_columns()))
            for fig, source in zip((self.goodput, self.cwnd), got):
                fig.line("t", "y", source=source, color=colour, line_width=2, legend_label=flow)
            for fig in (self.goodput, self.cwnd):
                fig.legend.click_policy = "hide"
                fig.legend.location = "top_left"
            self.sources[flow] = got
        return got

    def now(self, t: float) -> None:
        """Move the time cursor to ``t`` seconds after the run's start."""
        self.cursor.location = round(t, 2)

    def add(self, samples: Iterable[Sample]) -> int:
        """Stream ``samples`` into the figures (one ``stream`` per flow and panel); how many."""
        rates: dict[str, dict[str, list[Any]]] = {}
        cwnds: dict[str, dict[str, list[Any]]] = {}
        n = 0
        samples = list(samples)
        self.data.add(samples)
        if any(s.flow not in self.sources for s in samples):
            self.declare(s.flow for s in samples)
        for s in samples:
            for into, value in ((rates, s.rate / 1e6), (cwnds, s.cwnd)):
                if value is None:
                    continue
                cols = into.setdefault(s.flow, _columns())
                cols["t"].append(s.t)
                cols["y"].append(value)
                cols["flow"].append(s.flow)
                cols["host"].append(s.host)
            n += 1
        for flow, cols in rates.items():
            self.sources[flow][0].stream(cols, rollover=ROLLOVER)  # type: ignore[arg-type]  # bokeh types the columns invariantly
        for flow, cols in cwnds.items():
            self.sources[flow][1].stream(cols, rollover=ROLLOVER)  # type: ignore[arg-type]
        if cwnds and not self.cwnd.visible:
            self.cwnd.visible = True
        self.points += n
        return n


def _columns() -> dict[str, list[Any]]:
    return {"t": [], "y": [], "flow": [], "host": []}


__all__ = ["LivePlot", "ROLLOVER"]
