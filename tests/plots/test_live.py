"""LivePlot: samples stream into one line per flow; cwnd shows once a sample carries it."""

from __future__ import annotations

from bokeh.document import Document
from bokeh.document.events import ColumnsStreamedEvent

from netesto.controller.live import Sample
from netesto.plots.live import LivePlot


def test_samples_stream_per_flow_and_only_the_new_points_are_sent():
    plot = LivePlot()
    doc = Document()
    doc.add_root(plot.layout)
    sent: list = []
    doc.on_change(lambda event: sent.append(event))
    assert plot.add([Sample("a", "h2", 1.0, 9e7), Sample("b", "h2", 1.0, 1e7)]) == 2
    assert not plot.cwnd.visible
    plot.add([Sample("a", "h2", 2.0, 8e7, cwnd=30.0)])
    assert plot.cwnd.visible
    rates, cwnds = plot.sources["a"]
    assert rates.data["t"] == [1.0, 2.0] and rates.data["y"] == [90.0, 80.0] and cwnds.data["y"] == [30.0]
    assert plot.sources["b"][0].data["flow"] == ["b"]
    streamed = [e for e in sent if isinstance(e, ColumnsStreamedEvent)]
    assert [len(e.data["t"]) for e in streamed] == [1, 1, 1, 1]  # each flow's new points, nothing resent
    assert len(plot.goodput.renderers) == 2 and len(plot.cwnd.renderers) == 2
    plot.now(2.345)
    assert plot.cursor.location == 2.35


def test_declared_flows_get_their_lines_before_any_sample_with_one_model_walk():
    plot = LivePlot()
    doc = Document()
    doc.add_root(plot.layout)
    walks = []
    recompute = doc.models.recompute
    doc.models.recompute = lambda: (walks.append(1), recompute())[1]  # type: ignore[method-assign]
    plot.declare([f"f{i}" for i in range(16)])
    assert len(plot.goodput.renderers) == 16 and len(walks) == 1
    plot.add([Sample("f3", "h2", 1.0, 1e6)])
    assert len(plot.goodput.renderers) == 16 and len(walks) == 1  # no new line, no walk
