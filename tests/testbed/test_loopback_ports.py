"""A loopback testbed's agents get ports no other testbed that is up has given its own: those may not
listen yet (another `up` between its pick and its agents' start), and a port both picked was one agent's
"Address already in use" at start-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netesto.testbed import lifecycle, loopback
from netesto.testbed.config import TestbedConfig


def test_ports_another_testbed_gave_its_agents_are_not_given_again(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    states = tmp_path / "state"
    states.mkdir()
    monkeypatch.setenv("NETESTO_STATE_DIR", str(states))
    start = loopback.BASE_PORT + 100 + (sum(map(ord, "tbb")) % 500) * 4  # where testbed "tbb" looks first
    other = {"name": "tba", "mode": "loopback", "status": "creating",  # its agents not listening yet
             "hosts": [{"name": "h1", "port": start}, {"name": "h2", "port": start + 1}], "processes": []}
    (states / "tba.json").write_text(json.dumps(other))
    up = lifecycle.up(TestbedConfig.parse(name="tbb", hosts=2, dir=tmp_path / "tbb", loopback=True, agents=False))
    try:
        ports = [h["port"] for h in up.state["hosts"]]
        assert len(set(ports)) == 2 and not {start, start + 1} & set(ports), ports
        assert min(ports) >= start + 2  # past them, not somewhere else
    finally:
        lifecycle.down("tbb")
