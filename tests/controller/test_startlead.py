"""A batch's start lead: fixed for hosts not seen yet, then learned from how soon their flows were ready."""

from __future__ import annotations

import pytest

import netesto
from netesto.controller import startlead
from netesto.controller.progress import FlowProgress, FlowsScheduled, RecordingProgress
from tests.testbed import tbutil

SCRIPT = """DO_SERVER host=h1 exp=COUNTER start=1
DO_CLIENT host=h2 server=h1 dur=1
WAIT 1
DO_SERVER host=h1 order=1
GET_DATA host=h1
GET_DATA host=h2
"""


def batches(rec: RecordingProgress) -> list[FlowsScheduled]:
    return [e for e in rec.events if isinstance(e, FlowsScheduled)]


def started(rec: RecordingProgress) -> list[dict]:
    return [e.data for e in rec.events if isinstance(e, FlowProgress) and e.event == "started"]


def test_a_lead_shrinks_to_what_the_hosts_readiness_needs_and_flows_still_start_on_time(tmp_path_factory) -> None:
    startlead.forget()
    with tbutil.testbed_up(tmp_path_factory, hosts=2, loopback=True) as up:
        work = tmp_path_factory.mktemp("work")
        first, second, given = RecordingProgress(), RecordingProgress(), RecordingProgress()
        netesto.run(SCRIPT, up.lab, work, progress=first)
        # not seen before: the fixed lead; the flow was ready well before its instant
        assert [b.lead for b in batches(first)] == [startlead.FIXED]
        (s1,) = started(first)
        assert s1["ready"] < s1["start_at"] and s1["skew"] >= 0
        agent = next(iter(startlead._READY))
        learned = list(startlead._READY[agent])
        assert len(startlead._READY) == 1 and len(learned) == 1 and 0 < learned[0] < startlead.FIXED
        netesto.run(SCRIPT, up.lab, work, progress=second)
        # seen: SAFETY times its readiness, within FLOOR..FIXED
        expected = min(startlead.FIXED, max(startlead.FLOOR, startlead.SAFETY * learned[0]))
        assert [b.lead for b in batches(second)] == [pytest.approx(expected)]
        (s2,) = started(second)
        # ready before the shorter instant too (it is SAFETY x a readiness seen on the same host): what
        # is left of a start's lateness is the timer's wake-up, as with any lead
        assert s2["ready"] < s2["start_at"] and s2["skew"] >= 0, s2
        assert len(startlead._READY[agent]) == 2
        # a lead given to the run is used as given
        netesto.run(SCRIPT, up.lab, work, progress=given, lead=0.7)
        assert [b.lead for b in batches(given)] == [0.7]


def test_a_flow_ready_late_lengthens_the_next_leads() -> None:
    startlead.forget()
    startlead.learn("h:1", 0.05)
    assert startlead.lead(["h:1"]) == startlead.FLOOR
    startlead.learn("h:1", 0.25)  # a flow that was ready 0.25 s after its batch was scheduled
    assert startlead.lead(["h:1"]) == pytest.approx(0.75)
    startlead.learn("h:1", 2.0)  # late: never more than the fixed lead
    assert startlead.lead(["h:1"]) == startlead.FIXED
    for _ in range(startlead.KEPT):  # forgotten once KEPT newer ones came
        startlead.learn("h:1", 0.05)
    assert startlead.lead(["h:1"]) == startlead.FLOOR
    startlead.learn("h:1", float("nan"))
    assert startlead.lead(["h:1", "h:2"]) == startlead.FIXED + startlead.FIXED_PER_HOST  # h:2 not seen
