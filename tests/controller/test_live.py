"""LiveState and LiveText: what a live view shows, folded from a run's progress events."""

from __future__ import annotations

import io

from netesto.controller.live import LiveState, LiveText
from netesto.controller.progress import (
    ActionStarted,
    DataStored,
    FlowProgress,
    FlowsScheduled,
    HostError,
    RunFinished,
    RunStarted,
)

T0 = 1000.0


def _events(interrupted: bool = False) -> list:
    def prog(flow: str, t: float, rate: float, **more) -> FlowProgress:
        return FlowProgress(host="h2", exp=1, flow=flow, event="progress", data={"rate_bps": rate, **more}, t=T0 + t)

    return [
        RunStarted(lab="lab", hosts=("h1", "h2"), workdir="w", t=T0),
        ActionStarted(kind="DO_SERVER", host="h1", exp=1, text="", loc="", t=T0 + 0.1),
        ActionStarted(kind="DO_CLIENT", host="h2", exp=1, text="", loc="", t=T0 + 0.2),
        FlowsScheduled(exp=1, host="h2", flows=("a", "b"), start_at=T0 + 1.0, dur=5.0, t=T0 + 0.3),
        FlowProgress(host="h2", exp=1, flow="a", event="started", t=T0 + 1.0),
        FlowProgress(host="h2", exp=1, flow="b", event="started", t=T0 + 1.0),
        prog("a", 2.0, 6e7),
        prog("b", 2.0, 4e7, cwnd=20, srtt_us=12500),
        prog("a", 3.0, 5e7),
        FlowProgress(host="h2", exp=1, flow="a", event="done", t=T0 + 6.0),
        HostError(host="h1", error="ping to x: refused", t=T0 + 6.1),
        FlowProgress(host="h2", exp=1, flow="b", event="error", data={"error": "reset"}, t=T0 + 6.2),
        DataStored(host="h1", exp=1, files=3, bytes=10, dest="w/1", t=T0 + 7.0),
        RunFinished(experiments=(1,), elapsed=8.0, interrupted=interrupted, t=T0 + 8.0),
    ]


def test_the_state_follows_flows_hosts_and_time():
    s = LiveState(estimate=4.0)
    seen = []
    for e in _events():
        s.handle(e)
        seen.append((s.hosts(), round(s.time_left(now=e.t), 1)))
        if isinstance(e, FlowProgress) and e.flow == "b" and e.event == "progress":
            assert [(x.flow, x.t, x.rate, x.cwnd) for x in s.take()] == [("a", 2.0, 6e7, None), ("b", 2.0, 4e7, 20.0)]
            assert s.last["b"].srtt == 12.5
    assert seen[1] == ({"h1": "serving", "h2": "idle"}, 3.9)
    assert seen[5] == ({"h1": "serving", "h2": "2 flows running"}, 5.0)  # the flows' end beats the estimate
    assert seen[9][0]["h2"] == "1 flow running"
    assert seen[10][0]["h1"] == "serving (ping to x: refused)"
    assert seen[11][0]["h2"] == "flows done"
    assert seen[12][0]["h1"].startswith("stored 3 file(s)")
    assert seen[13] == ({"h1": "done (ping to x: refused)", "h2": "done"}, 0.0)
    assert [x.t for x in s.take()] == [3.0]
    assert s.take() == []


def test_an_interrupted_run_shows_its_hosts_restored():
    s = LiveState()
    for e in _events(interrupted=True):
        s.handle(e)
    assert s.hosts()["h2"] == "stopped, restored"


def test_live_text_prints_one_rate_line_a_second_at_most():
    out = io.StringIO()
    sink = LiveText(out, estimate=4.0, every=0.0)
    for e in _events():
        sink(e)
    lines = [line for line in out.getvalue().splitlines() if "goodput" in line]
    assert len(lines) == 3
    assert "goodput a 60.0 Mbit/s; sum 60.0 Mbit/s | h1: serving; h2: 2 flows running |" in lines[0]
    assert "goodput a 60.0 Mbit/s, b 40.0 Mbit/s cwnd 20; sum 100.0 Mbit/s" in lines[1]
    slow = io.StringIO()
    sink = LiveText(slow, estimate=4.0, every=60.0)
    for e in _events():
        sink(e)
    assert sum("goodput" in line for line in slow.getvalue().splitlines()) == 1
