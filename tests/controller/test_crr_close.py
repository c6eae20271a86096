"""``crr_close=`` end to end: from a script line through the plan to the agents' flows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .test_integration import netesto_run, start_pair

CRR = """
DO_SERVER host=h2 exp=COUNTER start=1
DO_CLIENT host=h1 server=h2 test=TCP_CRR req=100 reply=100 dur=1 ca=cubic crr_close=server
WAIT 1
GET_DATA host=h1
GET_DATA host=h2
"""


@pytest.mark.netns
def test_a_crr_flow_closed_by_the_server_leaves_time_wait_on_the_server_only(veth_pair, tmp_path: Path) -> None:
    lab, agents = start_pair(veth_pair, tmp_path)
    script = tmp_path / "crr.script"
    script.write_text(CRR)
    planned = subprocess.run([sys.executable, "-m", "netesto", "plan", str(script)], capture_output=True, text=True,
                             timeout=60)
    assert planned.returncode == 0, planned.stderr
    assert "test=TCP_CRR group=1 crr_close=server" in planned.stdout, planned.stdout
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc == 0, out + err
    control = {f":{a.port}" for a in agents.values()}

    def time_wait(ns: str) -> list[str]:
        """The TIME_WAIT sockets of ``ns`` but the controller's connections to the agents."""
        lines = veth_pair.run(ns, ["ss", "-tanH", "state", "time-wait"]).stdout.splitlines()
        return [ln for ln in lines if not any(p in ln.split()[-1] or p in ln.split()[-2] for p in control)]

    server, client = time_wait(veth_pair.b), time_wait(veth_pair.a)
    # netperf's way: the server closes after its reply, so the TIME_WAIT is on the server's side (the
    # client closes first only the connection the flow's end cut short; with crr_close=client every one)
    assert len(server) >= 20 and len(client) <= 1, (len(server), client)
