"""Names an agent can check are refused before any flow starts: a congestion control a host lacks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from netesto.collectors.tcpinfo import available_congestion_controls, congestion_controls

from .test_integration import netesto_run, start_pair

SCRIPT = """DO_SERVER host=h2 exp=COUNTER start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM dur=1 ca=cubic
WAIT 2
DO_CLIENT host=h1 server=h2 test=TCP_STREAM dur=1 ca=bbrr
WAIT 2
GET_DATA host=h1
GET_DATA host=h2
"""


def test_a_host_says_the_algorithms_its_sockets_take() -> None:
    have = congestion_controls()
    assert have[:len(available_congestion_controls())] == available_congestion_controls()
    assert "diag" not in have and len(set(have)) == len(have)


@pytest.mark.netns
def test_an_unknown_congestion_control_fails_before_any_flow_starts(veth_pair, tmp_path: Path) -> None:
    lab, _ = start_pair(veth_pair, tmp_path)
    script = tmp_path / "typo.script"
    script.write_text(SCRIPT)
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc != 0, out + err
    have = ", ".join(congestion_controls())
    said = f"typo.script:4: DO_CLIENT ca=bbrr: h1 has no congestion control 'bbrr'; it has {have}"
    assert said in out + err, out + err
    if "bbr" in congestion_controls():
        assert "(did you mean bbr?)" in out + err
    assert (out + err).count("has no congestion control") == 1, out + err  # said once
    # nothing ran: not even the first DO_CLIENT's cubic flow (the check came before it)
    assert not list((tmp_path / "work").rglob("*.nflow")), list((tmp_path / "work").rglob("*"))
    assert "Traceback" not in err


@pytest.mark.netns
def test_a_driver_whose_tool_a_host_lacks_fails_before_any_flow_starts(veth_pair, tmp_path: Path) -> None:
    assert shutil.which("iperf3"), "this test needs iperf3 (apt-get install iperf3)"
    # h2's agent has a PATH without the directories that hold iperf3 (/bin is /usr/bin on merged-/usr systems)
    bare = ":".join(d for d in os.environ["PATH"].split(":") if d and not os.path.exists(os.path.join(d, "iperf3")))
    lab, _ = start_pair(veth_pair, tmp_path, path={"h2": bare or "/nonexistent"})
    script = tmp_path / "tool.script"
    script.write_text(SCRIPT.replace("ca=bbrr", "ca=cubic driver=iperf3"))
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc != 0, out + err
    said = "tool.script:4: DO_CLIENT driver=iperf3: h2 has no iperf3 on its agent's PATH; install it there or use driver=builtin"
    assert said in out + err and (out + err).count("has no iperf3") == 1, out + err
    assert not list((tmp_path / "work").rglob("*.nflow")), list((tmp_path / "work").rglob("*"))
    assert "Traceback" not in err
