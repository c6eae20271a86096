"""Testbeds with real agents: CURVE hello over the lab file, SET_NETEM through the router, loopback labs."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest

from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig
from netesto.testbed.agents import agent_available

from . import tbutil

pytestmark = pytest.mark.skipif(not agent_available(), reason="the agent is not installed")


def _clients(lab_path):
    from netesto.controller.client import AgentClient
    from netesto.controller.lab import Lab

    lab = Lab.from_file(lab_path)
    return lab, {
        h.name: AgentClient(h.name, h.control, h.port, server_key=h.public_key, client_keys=lab.controller_key, timeout=10)
        for h in lab
    }


@pytest.mark.netns
def test_agents_answer_and_router_netem_acts_on_the_link(tmp_path) -> None:
    name = tbutil.unique_name()
    res = lifecycle.up(TestbedConfig.parse(name=name, hosts=2, dir=tmp_path))
    clients = {}
    try:
        lab, clients = _clients(res.lab)
        assert sorted(lab.names) == ["h1", "h2", "router"]
        for c in clients.values():
            assert c.hello()
        h1, h2 = res.state["links"]
        shape = lab.host("h2").shape
        assert (shape.agent, shape.dev) == ("router", "r-h2")

        def median_rtt() -> float:
            return tbutil.median_rtt(h1["ns"], h2["addr"])

        reply = clients["router"].set_netem(shape.dev, 40.0)
        assert reply.fallback is not None or reply.argv is not None
        assert 47 <= median_rtt() <= 58  # 40 ms toward h2 + 10 ms back (not 20, not 90)
        clients["router"].restore()
        assert 18 <= median_rtt() <= 26  # the testbed's 20 ms again (not 50, not 0)

        def qdiscs() -> str:
            return subprocess.run(["tc", "-n", res.state["router_ns"], "qdisc", "show", "dev", "r-h2"], capture_output=True, text=True).stdout

        # The delay line did the netem: restore() undid it there and left the htb alone.
        assert "htb" in qdiscs() and "limit 250000b" in qdiscs(), qdiscs()
        # A script's SET_QDISC on the router link replaces the htb; the agent's restore()
        # then deletes the root qdisc (it cannot rebuild the testbed's htb), and the
        # testbed's guard puts the bottleneck back.
        clients["router"].set_qdisc(shape.dev, "pfifo", limit="500")
        assert "qdisc pfifo" in qdiscs() and "htb" not in qdiscs(), qdiscs()
        clients["router"].restore()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not ("htb" in qdiscs() and "bfifo" in qdiscs()):
            time.sleep(0.2)
        out = qdiscs()
        assert "htb" in out and "limit 250000b" in out, out
    finally:
        for c in clients.values():
            c.close()
        problems = lifecycle.down(name)
    assert problems == []
    assert tbutil.leftovers(name) == []
    for proc in res.state["processes"]:
        assert not lifecycle.proc_alive(proc["pid"], proc["start_time"])


def test_loopback_lab_has_curve_agents_and_says_what_is_missing(tmp_path) -> None:
    name = tbutil.unique_name()
    proc = subprocess.run(
        [sys.executable, "-m", "netesto", "testbed", "up", "--loopback", "--name", name, "--hosts", "2", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )
    clients = {}
    try:
        assert proc.returncode == 0, proc.stderr
        assert "MISSING: no bottleneck" in proc.stdout
        lab, clients = _clients(tmp_path / f"{name}.lab.toml")
        assert not lab.insecure and {h.control for h in lab} == {"127.0.0.1"}
        assert len({h.port for h in lab}) == 2
        for c in clients.values():
            assert c.hello()
        state = lifecycle.status(name)[0]
        assert state["mode"] == "loopback" and all(p["alive"] for p in state["processes"])
    finally:
        for c in clients.values():
            c.close()
        down = subprocess.run([sys.executable, "-m", "netesto", "testbed", "down", "--name", name], capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert tbutil.leftovers(name) == []
    for p in state["processes"]:
        assert not lifecycle.proc_alive(p["pid"], p["start_time"])


@pytest.mark.netns
def test_script_set_netem_acts_on_the_router_link(tmp_path) -> None:
    """SET_NETEM host=h1 from a script: the router agent delays traffic toward h1; the run restores it."""
    from netesto.controller import run

    name = tbutil.unique_name()
    script = (
        "SOURCE inlib\nRUN InlibShortWaits\nSET_NETEM host=h1 netem_delay=40\n"
        "RUN MServerStream servers=h1 clients=h2 expName=netem ca=cubic dur=2 instances=1\n"
    )
    with lifecycle.testbed(name=name, hosts=2, dir=tmp_path / "tb") as tb:
        result = run(script, lab=tb.lab, workdir=tmp_path / "w")
        assert result.ok, result.errors
        exp = result.exps[-1]
        summary = dict(
            line.split(":", 1) for line in (tmp_path / "w" / str(exp) / "all.exp.out").read_text().splitlines() if ":" in line
        )
        # 40 ms toward h1 + 10 ms back, plus what the flow queues: the script's netem was there.
        assert float(summary["rtt"]) / 1000 >= 45, summary["rtt"]
        h1, h2 = tb.state["links"]
        assert 18 <= tbutil.median_rtt(h2["ns"], h1["addr"]) <= 26  # 20 ms: restored at the end of the run (not 50)
    assert tbutil.leftovers(name) == []
