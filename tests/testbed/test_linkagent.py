"""The agent's link schedules with a stand-in backend: refused input, the instants, and every way a schedule ends."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from netesto.errors import AgentError, PolicyError
from netesto.protocol.commands import LinkScheduleArgs
from netesto.protocol.replies import LinkScheduleReply
from tests.agent.agentproc import AgentProc, start_agent, wait_for

from .fake_link import BASE


@pytest.fixture
def link_agent(tmp_path: Path):
    """An agent on loopback whose link backend is :mod:`tests.testbed.fake_link` (lease 2 s)."""
    started: list[AgentProc] = []
    shapes = tmp_path / "shapes"
    shapes.mkdir()

    def start(backend: str = "tests.testbed.fake_link:backend", **kw) -> AgentProc:
        env = {"NETESTO_LINK_BACKEND": backend, "FAKE_LINK_DIR": str(shapes)}
        agent = start_agent(tmp_path, keys=None, extra=("--lease", "2"), env=env, datadir=tmp_path / "data",
                            tag=f"agent{len(started)}", **kw)
        started.append(agent)
        return agent

    yield start, shapes
    for agent in started:
        agent.kill()


def shape(shapes: Path) -> dict:
    return json.loads((shapes / "lo.json").read_text())


def calls(shapes: Path) -> list[list]:
    path = shapes / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_steps_land_at_their_instants_and_the_link_comes_back(link_agent, tmp_path) -> None:
    start, shapes = link_agent
    agent = start()
    c = agent.client()
    t0 = time.time() + 0.3
    reply = c.link_schedule(7, "lo", t0, t0 + 1.0, [(0, "rate", 50e6), (0.4, "rate", 10e6), (0.4, "delay", 30)])
    assert reply.base == BASE and reply.steps == 3
    assert wait_for(lambda: shape(shapes)["rate"] == 10e6, timeout=5)
    assert wait_for(lambda: shape(shapes) == BASE, timeout=5)  # back at until
    applied = [x for x in calls(shapes) if x[1] == "apply"]
    assert [x[2:] for x in applied] == [["rate", 50e6], ["rate", 10e6], ["delay", 30]]
    for (t, *_), at in zip(applied, (0.0, 0.4, 0.4)):
        assert 0 <= t - (t0 + at) < 0.05, t - (t0 + at)  # at their instants, never before
    path = tmp_path / "data" / "7" / "links" / "lo.json"
    # (the record says how it ended once the link is back: a moment after the shape is restored)
    def ended() -> bool:
        try:
            return json.loads(path.read_text()).get("ended") is not None
        except (OSError, ValueError):
            return False

    assert wait_for(ended, timeout=5)
    record = json.loads(path.read_text())
    assert record["host"] == "h1" and record["ended"]["why"] == "until" and record["ended"]["shape"] == BASE
    assert [s["readback"] for s in record["steps"]] == [50e6, 10e6, 30]
    assert all(s["start"] <= s["applied"] for s in record["steps"])


@pytest.mark.parametrize("steps, kind, text", [
    ([[0, "rte", 1e6]], PolicyError, "unknown link parameter 'rte'"),
    ([[0, "rate", 1.0]], PolicyError, "rate=1 bit/s is outside 10000..1e+10"),
    ([[-1, "rate", 1e6]], PolicyError, "step time -1.0 is outside"),
    ([[0, "loss", 101]], PolicyError, "loss=101 % is outside 0..100"),
    ([["x", "rate", 1e6]], AgentError, "bad step ['x', 'rate', 1000000.0]"),
    ([[0, "rate"]], AgentError, "expected [seconds, parameter, value]"),
])
def test_bad_steps_are_refused_and_change_nothing(link_agent, steps, kind, text) -> None:
    start, shapes = link_agent
    c = start().client()
    with pytest.raises(kind, match=re.escape(text)):  # as another controller might send them
        c.call(LinkScheduleReply, LinkScheduleArgs(1, "lo", time.time(), time.time() + 1, steps))
    assert shape(shapes) == BASE and not [x for x in calls(shapes) if x[1] == "apply"]


def test_an_agent_without_a_backend_refuses_and_a_trace_that_does_not_parse_is_refused(link_agent) -> None:
    start, shapes = link_agent
    with pytest.raises(AgentError, match="no link backend"):
        start(backend="").client().link_schedule(1, "lo", time.time(), time.time() + 1, [(0, "rate", 1e6)])
    c = start().client()
    with pytest.raises(AgentError, match="trace: x:2: 'oops' is not a timestamp"):
        c.link_schedule(1, "lo", time.time(), time.time() + 1, [], {"name": "x", "text": "1\noops\n"})
    assert shape(shapes) == BASE  # put back after the refusal


def test_stop_restore_and_a_lapsed_lease_each_end_the_schedule(link_agent) -> None:
    start, shapes = link_agent
    agent = start()
    for end in ("stop", "restore", "lease"):
        c = agent.client()
        t0 = time.time()
        c.link_schedule(2, "lo", t0, t0 + 30, [(0, "rate", 5e6), (10, "rate", 1e6)])
        assert wait_for(lambda: shape(shapes)["rate"] == 5e6, timeout=5)
        if end == "stop":
            c.stop()
        elif end == "restore":
            assert "link lo" in c.restore().restored
        else:
            c.close()  # the controller goes silent: the 2 s lease lapses
        assert wait_for(lambda: shape(shapes) == BASE, timeout=10), end
        assert not [x for x in calls(shapes) if x[1] == "apply" and x[3] == 1e6], end  # the 10 s step never came


def test_a_killed_agent_restores_the_link_when_it_starts_again(link_agent, tmp_path) -> None:
    start, shapes = link_agent
    agent = start()
    t0 = time.time()
    agent.client().link_schedule(3, "lo", t0, t0 + 60, [(0, "rate", 5e6), (0, "buffer", 30e3)])
    assert wait_for(lambda: shape(shapes)["buffer"] == 30e3, timeout=5)
    agent.kill(signal.SIGKILL)
    assert shape(shapes)["rate"] == 5e6  # left changed by the dead agent
    start()
    assert wait_for(lambda: shape(shapes) == BASE, timeout=10)
