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


def test_a_kernel_says_the_qdiscs_it_can_install() -> None:
    from netesto.agent.facts import qdiscs

    have = qdiscs()
    if not have:
        pytest.skip("this kernel's configuration and modules cannot be read")
    assert {"pfifo_fast", "noqueue", "mq"} <= set(have) and have == sorted(set(have))
    # what tc here really installs is in the list: htb, the testbeds' bottleneck, on a fresh namespace's lo
    if shutil.which("tc"):
        import subprocess
        import uuid

        ns = f"nq{uuid.uuid4().hex[:8]}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            rc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "htb"],
                                capture_output=True).returncode
        finally:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        assert (rc == 0) == ("htb" in have)


@pytest.mark.netns
def test_a_qdisc_the_kernel_lacks_fails_before_any_flow_starts(veth_pair, tmp_path: Path) -> None:
    from netesto.agent.facts import qdiscs
    from netesto.policy import QDISCS

    missing = [q for q in QDISCS if q not in qdiscs()]
    if not qdiscs() or not missing:
        pytest.skip("this kernel has every qdisc netesto knows, or does not say which it has")
    lab, _ = start_pair(veth_pair, tmp_path)
    script = tmp_path / "q.script"
    script.write_text(SCRIPT.replace("DO_CLIENT host=h1 server=h2 test=TCP_STREAM dur=1 ca=bbrr",
                                     f"SET_QDISC host=h1 qdisc={missing[0]}"))
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc != 0, out + err
    said = f"q.script:4: SET_QDISC qdisc={missing[0]}: h1's kernel has no qdisc {missing[0]!r}; it has {', '.join(qdiscs())}"
    assert said in out + err and (out + err).count("has no qdisc") == 1, out + err
    assert not list((tmp_path / "work").rglob("*.nflow")), list((tmp_path / "work").rglob("*"))
    assert "Traceback" not in err


@pytest.mark.netns
def test_a_device_the_lab_file_misnames_fails_before_any_flow_starts(veth_pair, tmp_path: Path) -> None:
    lab, _ = start_pair(veth_pair, tmp_path, shape_h1=True)
    text = lab.read_text()
    assert 'dev = "veth0" }' in text
    lab.write_text(text.replace('dev = "veth0" }', 'dev = "vet0" }'))  # h1's bottleneck on h2, misspelled
    script = tmp_path / "dev.script"
    script.write_text(SCRIPT.replace("DO_CLIENT host=h1 server=h2 test=TCP_STREAM dur=1 ca=bbrr",
                                     "SET_QDISC host=h1 qdisc=htb rate=50mbit"))
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc != 0, out + err
    said = "dev.script:4: SET_QDISC: h2 has no network device 'vet0' (the lab file's dev or shape for h1); it has "
    assert said in out + err and "(did you mean veth0?)" in out + err, out + err
    assert (out + err).count("has no network device") == 1, out + err
    assert not list((tmp_path / "work").rglob("*.nflow")), list((tmp_path / "work").rglob("*"))
    assert "Traceback" not in err
