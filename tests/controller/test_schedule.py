"""DO_CLIENT expansion, start instants with clock offsets, progress events."""

from __future__ import annotations

import io

import pytest

import netesto.controller.schedule as schedule
from netesto.controller.progress import ConsoleProgress, EchoText, HostError, RecordingProgress, RunStarted
from netesto.controller.schedule import agent_instants, expand_do_client, start_skew, to_controller_time
from netesto.errors import TrafficError
from netesto.script.actions import DoClient


def test_do_client_expands_to_one_spec_per_instance() -> None:
    a = DoClient(
        host="h1.mynet", exp=7, exp_name="TwoFlow", server="h2.mynet", ca="bbr", dur=2.0,
        delay=0.5, instances=3, req=65536, reply=10, test="TCP_RR", group=2,
        local_buffer=100000, remote_buffer=200000, pacing=10**8, interval=0.02,
    )
    specs = expand_do_client(a, client="h1", server="h2", server_address="10.0.0.2", port=4242,
                             token="tok", start_at=1000.0)
    assert [s.flow_id for s in specs] == ["h1-h2-2-0", "h1-h2-2-1", "h1-h2-2-2"]
    s = specs[1]
    assert (s.test, s.server, s.port, s.ca, s.dur, s.req, s.reply) == ("TCP_RR", "10.0.0.2", 4242, "bbr", 2.0, 65536, 10)
    assert (s.local_buffer, s.remote_buffer, s.pacing, s.interval, s.token, s.exp) == (100000, 200000, 10**8, 0.02, "tok", 7)
    assert s.start_at == pytest.approx(1000.5)  # delay shifts the start
    meta = dict(s.meta)
    assert meta == {"host": "h1", "server": "h2", "group": "2", "instance": "1", "exp_name": "TwoFlow", "instances": "3"}


def test_stream_and_immediate_start() -> None:
    a = DoClient(host="c", server="s", test="TCP_STREAM", req=0, dur=1.0)
    (spec,) = expand_do_client(a, client="c", server="s", server_address="::1", port=5000)
    assert spec.start_at is None and spec.test == "TCP_STREAM"


def test_bad_test_type_is_refused_by_flowspec() -> None:
    a = DoClient(host="c", server="s", test="TCP_NOPE")
    with pytest.raises(TrafficError, match="unknown test"):
        expand_do_client(a, client="c", server="s", server_address="1.2.3.4", port=1)


def test_common_instant_in_agent_time_and_back() -> None:
    offsets = {"h1": 0.25, "h2": -3.0, "h3": 0.0}
    at = agent_instants(500.0, 0.3, offsets)
    # every agent's instant maps back to the same controller instant
    back = {h: to_controller_time(t, offsets[h]) for h, t in at.items()}
    assert all(v == pytest.approx(500.3) for v in back.values())
    assert at["h2"] == pytest.approx(497.3)
    assert start_skew(497.3004, at["h2"]) == pytest.approx(0.0004)


def test_console_and_recording_progress() -> None:
    buf = io.StringIO()
    con = ConsoleProgress(buf)
    rec = RecordingProgress()
    for ev in (RunStarted(lab="tb", hosts=("h1", "h2"), workdir="/w"), EchoText(text="hello"),
               HostError(host="h2", error="gone", fatal=True)):
        con(ev)
        rec(ev)
    out = buf.getvalue()
    assert "lab tb (h1, h2)" in out and "hello" in out and "ERROR h2: gone (host dropped)" in out
    assert [e.name for e in rec.events] == ["run_started", "echo_text", "host_error"]
    assert rec.of(HostError)[0].host == "h2"


@pytest.mark.parametrize("spans, text", [
    # DO_CLIENT h3 dur=10.0 delay=5.0 used to read "1 flow(s) of 15 s" (delay and dur added up)
    (((10.0, 5.0),), "h3: 1 flow(s) of 10 s from 5 s in exp 4"),
    (((10.0, 0.0), (10.0, 0.0), (2.5, 1.5)), "h3: 2 flow(s) of 10 s, 1 flow(s) of 2.5 s from 1.5 s in exp 4"),
    ((), "h3: 1 flow(s) of 15 s in exp 4"),  # an event without spans: the time until the last ends
])
def test_console_prints_flow_lengths_as_written(spans: tuple, text: str) -> None:
    from netesto.controller.progress import FlowsScheduled

    buf = io.StringIO()
    ConsoleProgress(buf)(FlowsScheduled(exp=4, host="h3", flows=("f",), start_at=0.0, dur=15.0, spans=spans))
    assert buf.getvalue().rstrip().endswith("  " + text)
