"""Hosts with an RTT of their own: set at up, reshaped in place, put back by the router agent's restore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from netesto.errors import UsageError
from netesto.testbed import reshape
from netesto.testbed.config import TestbedConfig
from netesto.testbed.delaycontrol import send_control
from netesto.testbed.state import state_path

from . import tbutil


def _settings(bed) -> dict[str, float]:
    """The delay line's one-way delay toward each host (ms), by host."""
    reply = send_control(bed.state["delayline_control"], {"op": "stats"})
    queues = {str(lk["queue"]): lk["host"] for lk in bed.state["links"]}
    return {queues[q]: s["delay_ms"] for q, s in reply["settings"].items() if q in queues}


def _rtt(bed, a: int, b: int) -> float:
    links = bed.state["links"]
    return tbutil.median_rtt(links[a - 1]["ns"], links[b - 1]["addr"])


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    with tbutil.testbed_up(tmp_path_factory, hosts=3, bw="100mbit", rtt="20ms", host_rtt="h3:40ms",
                           agents=False) as up:
        if up.state.get("delay_mode") != "delayline":
            pytest.skip("this kernel has netem: the delay line's queues are not used")
        yield up


@pytest.mark.netns
def test_a_hosts_own_rtt_is_on_the_wire_from_up_and_after_a_reshape(bed) -> None:
    # toward h3 30 ms, toward the others 10: h3's paths 40 ms, the others' 20 ms, data and ACKs both delayed
    assert _settings(bed) == {"h1": 10.0, "h2": 10.0, "h3": 30.0}
    assert 19 <= _rtt(bed, 2, 1) <= 24 and 39 <= _rtt(bed, 3, 1) <= 44 and 39 <= _rtt(bed, 2, 3) <= 44
    assert tomllib.loads(Path(bed.lab).read_text())["testbed"]["host_rtt"] == {"h3": 40.0}
    try:
        now = reshape(bed.name, host_rtt="h2:30ms+h3:60ms")
        assert now["host_rtt"] == {"h2": 30.0, "h3": 60.0} and now["rtt_ms"] == 20.0
        assert _settings(bed) == {"h1": 10.0, "h2": 20.0, "h3": 50.0}
        # two hosts with their own: r2 + r3 - rtt
        assert 29 <= _rtt(bed, 2, 1) <= 34 and 59 <= _rtt(bed, 3, 1) <= 64 and 69 <= _rtt(bed, 2, 3) <= 75
        with pytest.raises(UsageError, match="at least half the testbed's rtt"):
            reshape(bed.name, rtt="200ms")  # the hosts' own RTTs kept: 30 ms is under half of 200
        # the router agent's restore (a SET_NETEM of zeros) puts back the host's own delay, not the base
        send_control(bed.state["delayline_control"], {"queue": 3, "delay": 1.0})
        env = {**os.environ, "NETESTO_TESTBED_STATE": str(state_path(bed.name))}
        code = ("import json; from netesto.testbed.delayline import netem_fallback; "
                "print(json.dumps(netem_fallback('r-h3', 0, 0, 0, 0)))")
        done = subprocess.run(["ip", "netns", "exec", bed.state["router_ns"], sys.executable, "-c", code],
                              capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["delay_ms"] == 50.0 and _settings(bed)["h3"] == 50.0
    finally:
        reshape(bed.name, host_rtt="")
    assert _settings(bed) == {"h1": 10.0, "h2": 10.0, "h3": 10.0} and "host_rtt" not in tomllib.loads(
        Path(bed.lab).read_text())["testbed"]
    assert 19 <= _rtt(bed, 3, 1) <= 24


@pytest.mark.parametrize(("text", "says"), [
    ("h4:40ms", "the testbed's hosts are h1..h3"), ("h3:5ms", "at least half the testbed's rtt"),
    ("h3", "HOST:TIME"), ("h3:fast", "bad --host-rtt"), ("h3:40ms+h3:50ms", "given twice"),
])
def test_a_host_rtt_the_testbed_cannot_have_is_refused_before_anything_is_built(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("..", r"\.\.")):
        TestbedConfig.parse(name="x", hosts=3, rtt="20ms", host_rtt=text)
