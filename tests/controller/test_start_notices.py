"""The run's lines for flows that started late or never: said once each, from an event or from the fetched file."""

from __future__ import annotations

from pathlib import Path

from netesto.controller.records import ExpState, FlowRecord, skews_from_files, start_notices
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.columns import FLOW_COLUMNS
from netesto.raw.nflow import FlowWriter
from netesto.script.actions import DoClient


def _flow(instance: int, skew: float | None) -> FlowRecord:
    spec = FlowSpec(f"h2-h1-1-{instance}", "TCP_STREAM", "10.0.0.1", 5000, start_at=100.0, interval=0.01)
    rec = FlowRecord(spec, DoClient(host="h2", exp=1, server="h1"), "h2", "h1", instance, 100.0, 100.0)
    rec.start_skew = skew
    return rec


def test_late_starts_are_named_once_and_in_time_ones_not(tmp_path: Path) -> None:
    e = ExpState(1, "x", tmp_path)
    e.flows = [_flow(0, 0.004), _flow(1, 0.062), _flow(2, None)]
    lines = start_notices(e, "h2")
    assert lines == ["flow h2-h1-1-1 on h2 started 62 ms after its scheduled instant (more than one sampling "
                     "interval, 10 ms)"]
    assert start_notices(e, "h2") == [] and start_notices(e) == []  # said once
    assert start_notices(ExpState(1, "x", tmp_path, flows=[_flow(1, 0.062)]), "h3") == []  # another host's


def test_a_flow_whose_file_says_it_never_started_is_named(tmp_path: Path) -> None:
    e = ExpState(1, "x", tmp_path)
    e.flows = [_flow(0, None)]
    path = tmp_path / "flows" / "h2-h1-1-0.client.nflow"
    path.parent.mkdir(parents=True)
    FlowWriter(path, FLOW_COLUMNS, {"start_wall": 99.0, "started": False}).close({"status": "error"})
    skews_from_files(e, "h2")
    assert start_notices(e, "h2") == ["flow h2-h1-1-0 on h2 never started (its data phase never began)"]
