"""LiveData: the live view's samples as a holoviews Buffer and DynamicMaps that follow the run."""

from __future__ import annotations

import math

import holoviews as hv
import pytest
from bokeh.document import Document
from bokeh.models import ColumnDataSource, GlyphRenderer

from netesto.controller.live import Sample
from netesto.controller.progress import FlowProgress, RunFinished, RunStarted
from netesto.plots.live import LivePlot
from netesto.plots.livedata import LiveData


def _sources(model) -> list[ColumnDataSource]:
    return [r.data_source for r in model.select({"type": GlyphRenderer})]


def test_a_kept_composed_dynamicmap_follows_new_samples_with_real_data_per_flow():
    plot = LivePlot()
    plot.add([Sample("a", "h2", 1.0, 9e7, cwnd=10.0), Sample("b", "h3", 1.0, 1e7)])
    live = plot.data.holoviews("goodput")
    composed = live * hv.HLine(50)  # kept and extended by the user
    frame = live[()]
    assert isinstance(frame, hv.NdOverlay) and list(frame.keys()) == ["a", "b"]
    assert list(frame["a"].dimension_values("goodput")) == [90.0]
    assert list(frame["b"].dimension_values("host")) == ["h3"]
    assert frame.select(t=(0.5, 1.5))["a"].data.shape[0] == 1

    doc = Document()
    rendered = hv.renderer("bokeh").get_plot(composed, doc=doc)
    plot.add([Sample("a", "h2", 2.0, 8e7, cwnd=12.0), Sample("b", "h3", 2.0, 2e7)])  # the run goes on
    ts = sorted(tuple(s.data["t"]) for s in _sources(rendered.state) if "t" in s.data)
    assert ts == [(1.0, 2.0), (1.0, 2.0)]  # both flows' lines in the displayed document grew
    cwnd = plot.data.overlay("cwnd")
    assert list(cwnd.keys()) == ["a"]  # b sent no cwnd: no line of NaNs
    assert list(cwnd["a"].dimension_values("cwnd")) == [10.0, 12.0]


def test_the_frame_has_every_sample_with_units_and_nan_for_what_a_sample_lacks():
    data = LiveData()
    data.add([Sample("a", "h2", 0.5, 1e6, srtt=2.5)])
    data.add([])
    df = data.frame()
    assert list(df.columns) == ["t", "flow", "host", "goodput", "cwnd", "srtt"]
    assert df.goodput.tolist() == [1.0] and math.isnan(df.cwnd[0]) and df.srtt.tolist() == [2.5]
    assert len(data) == 1 and data.flows == ["a"]
    buffer = data.buffer  # asked for late: holds what came before
    data.add([Sample("b", "h2", 1.0, 2e6)])
    assert buffer.data.flow.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="one of goodput, cwnd, srtt"):
        data.holoviews("rate")


def test_text_progress_keeps_every_sample_too():
    from netesto.magics.cellmagic import text_progress

    text = text_progress(5.0)
    text.stream, text.every = open("/dev/null", "w"), 60.0
    text.handle(RunStarted(lab="lab", hosts=("h2",), workdir="w", t=100.0))
    for i in range(3):
        text.handle(FlowProgress(host="h2", exp=1, flow="f1", event="progress", data={"goodput_bps": 1e6 * i},
                                 t=101.0 + i))
    text.handle(RunFinished(t=104.0, elapsed=4.0, experiments=(1,), errors=()))
    assert text.live.frame().goodput.tolist() == [0.0, 1.0, 2.0]  # not only the lines it printed


def test_a_live_dynamicmap_shown_while_samples_come_draws_once_whole():
    """Shown in a notebook (the live widget) while another thread sends samples, as a run's progress thread
    does: the plot subscribed to its streams before it had drawn itself, and a sample then drew it a second
    time, half-built (holoviews' ``'NoneType' object has no attribute 'values'``, in the sending thread)."""
    import threading

    from netesto.magics.offline import _live_bundle

    data = LiveData()
    data.add([Sample("a", "h2", 0.0, 1e7), Sample("b", "h2", 0.0, 2e7)])
    stop, errors = threading.Event(), []

    def feed() -> None:
        t = 0.0
        while not stop.wait(0.002):
            t += 0.01
            try:
                data.add([Sample("a", "h2", t, 1e7 + t * 1e5), Sample("b", "h2", t, 2e7)])
            except Exception as exc:  # noqa: BLE001 - what the test is looking for
                errors.append(exc)
                return

    sender = threading.Thread(target=feed, daemon=True)
    sender.start()
    try:
        bundles = [_live_bundle(data.holoviews("goodput") * hv.HLine(15)) for _ in range(4)]
    finally:
        stop.set()
        sender.join(timeout=10)
    assert errors == []
    assert all("application/vnd.jupyter.widget-view+json" in b for b in bundles)
