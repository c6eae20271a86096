"""The live view of a ``%%netesto`` cell: progress bar, host status, time left, per-flow plot.

The plot is :class:`netesto.plots.live.LivePlot` (bokeh) hosted in a
``jupyter_bokeh.BokehModel`` widget: its updates travel as widget messages, which
JupyterLab renders offline through jupyterlab_widgets and jupyter_bokeh's lab
extension, BokehJS itself coming inline once per kernel (:func:`load_bokehjs`). When the
run is over the view leaves a static snapshot in its place (:meth:`LiveWidgetProgress.snapshot`):
its final plot, hosts and log, which reopen with the notebook and show in its exports.
A ticker thread draws what arrived twice a second, so the view moves while the
kernel's main thread waits on the run.
"""

from __future__ import annotations

import html
import json
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from jupyter_bokeh import BokehModel

from netesto.controller.live import LiveState, format_rate
from netesto.controller.progress import FlowsScheduled, ProgressEvent, RunFinished
from netesto.magics.widgets import WidgetProgress
from netesto.plots.livedata import DOCUMENTS

TICK = 0.5  # seconds between redraws


class BatchedBokehModel(BokehModel):  # type: ignore[misc]  # jupyter_bokeh is untyped
    """A ``BokehModel`` that sends the document changes made in :meth:`batch` as ONE
    PATCH-DOC message (the widget sends one per change: a redraw of 16 flows was 32)."""

    def __init__(self, model: Any) -> None:
        self._held: list[Any] | None = None
        super().__init__(model)

    def _sync_model(self, model: Any, content: dict[str, Any], buffers: list[Any]) -> None:
        """The front end's change (a zoom, a legend click), applied while no redraw changes the document."""
        with DOCUMENTS:
            super()._sync_model(model, content, buffers)

    def close(self) -> None:
        """Close once: jupyter_bokeh's second close (a widget's ``__del__`` closes it again) raised KeyError."""
        if not getattr(self, "_closed", False):
            self._closed = True
            super().close()

    @contextmanager
    def batch(self) -> Iterator[None]:
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._send_patch(held)

    def _document_patched(self, event: Any) -> None:
        if event.setter is self:
            return
        if self._held is not None:
            self._held.append(event)
        else:
            self._send_patch([event])

    def _send_patch(self, events: list[Any]) -> None:
        # jupyter_bokeh's own message layout: header, metadata, content, then each buffer
        from bokeh.protocol import Protocol

        msg = Protocol().create("PATCH-DOC", events)
        for part in (msg.header_json, msg.metadata_json, msg.content_json):
            self.send({"msg": "patch", "payload": part})
        for buffer in msg.buffers:
            self.send({"msg": "patch", "payload": json.dumps(buffer.ref)})
            self.send({"msg": "patch"}, [buffer.to_bytes()])


def load_bokehjs(models: Iterable[Any]) -> None:
    """Put the BokehJS ``models`` need (inline: labs are offline) into the page for the BokehModel
    view, unless an earlier output of this kernel did (:mod:`netesto.plots.inline`). Not bokeh's
    ``output_notebook``: that stores BokehJS twice in the notebook, as JavaScript and as JSON."""
    from IPython.display import display

    from netesto.plots.inline import carrier

    import bokeh

    html_ = carrier(list(models))
    if html_:
        display({"text/html": html_, "text/plain": f"(BokehJS {bokeh.__version__}, for this notebook's plots)"},
                raw=True)


class LiveWidgetProgress(WidgetProgress):
    """:class:`WidgetProgress` plus per-host status, time left and the live goodput/cwnd plot."""

    def __init__(self, estimate: float, *, flows: Iterable[str] = (), tick: float = TICK) -> None:
        """``flows``: the flow ids the plan will start; their lines are drawn now, before the
        run, when it costs the flows nothing (about 17 ms of CPU a flow)."""
        import ipywidgets as w

        from netesto.plots.live import LivePlot

        super().__init__(estimate)
        self.state = LiveState(estimate)
        self.plot = LivePlot()
        self.plot.declare(flows)
        self.live = self.plot.data  # the samples drawn, for holoviews users (netesto.plots.livedata)
        self.hosts = w.HTML(value="")
        self.figure = BatchedBokehModel(self.plot.layout)
        self.box.children = (self.box.children[0], self.hosts, self.figure, self.log)
        self._tick_every = tick
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._ticking, name="netesto-live-view", daemon=True)
        self._ticker.start()

    def handle(self, event: ProgressEvent) -> None:
        self.state.handle(event)
        super().handle(event)

    def on_flows_scheduled(self, e: FlowsScheduled) -> None:
        with DOCUMENTS, self.figure.batch():
            self.plot.declare(e.flows)

    def _ticking(self) -> None:
        while not self._stop.wait(self._tick_every):
            try:
                self.redraw()
            except Exception:  # a broken view must not end the ticking (the run goes on)
                pass

    def redraw(self) -> None:
        """Draw the samples that arrived, the hosts' status and the time left."""
        with self._lock:
            if self._finished:
                return
            with DOCUMENTS, self.figure.batch():
                self.plot.add(self.state.take())
                self.plot.now(self.state.elapsed())
            self._tick(self._live_text())
            self.hosts.value = self._hosts_html()

    def _live_text(self) -> str:
        recent = self.state.recent(3.0)
        rate = f"sum {format_rate(sum(s.rate for s in recent))}, " if recent else ""
        return f"{rate}{self.state.left_text()}"

    def _hosts_html(self) -> str:
        cells = "".join(f"<td style='padding-right:1.5em'><b>{html.escape(h)}</b> {html.escape(text)}</td>"
                        for h, text in self.state.hosts().items())
        return f"<table><tr>{cells}</tr></table>"

    def on_run_finished(self, e: RunFinished) -> None:
        with DOCUMENTS, self.figure.batch():
            self.plot.add(self.state.take())
        self.hosts.value = self._hosts_html()
        super().on_run_finished(e)
        self._stop.set()

    def close_run(self, text: str = "stopped") -> None:
        super().close_run(text)
        self._stop.set()

    def snapshot_parts(self) -> tuple[str, str]:
        from netesto.plots.inline import output

        with self._lock, DOCUMENTS:
            return self._hosts_html() + output(self.plot.layout), ""


__all__ = ["BatchedBokehModel", "LiveWidgetProgress", "load_bokehjs"]
