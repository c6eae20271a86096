"""A running testbed reshaped in place: rate, buffer and RTT change on the wire."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest

from netesto.errors import TestbedError, UsageError
from netesto.testbed import reshape
from netesto.testbed.config import UpResult
from netesto.testbed.state import load_state, state_path

from . import tbutil

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with tbutil.testbed_up(tmp_path_factory, hosts=2, bw="100mbit", rtt="20ms", buffer="1bdp", agents=False) as up:
        yield up


def _lab_testbed(bed: UpResult) -> dict:
    """The lab file's [testbed] table (this testbed has no agents, so no keys a Lab would need)."""
    return tomllib.loads(Path(bed.lab).read_text())["testbed"]


def _router_qdiscs(bed: UpResult, dev: str) -> str:
    return tbutil.ns_run(bed.state["router_ns"], ["tc", "qdisc", "show", "dev", dev]).stdout + \
        tbutil.ns_run(bed.state["router_ns"], ["tc", "class", "show", "dev", dev]).stdout


def test_reshape_changes_rate_buffer_and_rtt_in_place(bed) -> None:
    h1, h2 = bed.state["links"]
    try:
        now = reshape(bed.name, bw="20mbit", rtt="40ms", buffer="1bdp")
        assert now["bw_bps"] == 20_000_000 and now["rtt_ms"] == 40.0 and now["buffer_bytes"] == 100_000
        for lk in (h1, h2):
            shown = _router_qdiscs(bed, lk["router_dev"])
            assert "rate 20Mbit" in shown and "limit 100000b" in shown, shown
        assert 38 <= tbutil.median_rtt(h1["ns"], h2["addr"]) <= 48
        goodput = tbutil.iperf3(h1["ns"], h2["ns"], h2["addr"], seconds=2, omit=1)["end"]["sum_received"]["bits_per_second"]
        assert 14e6 <= goodput <= 20.5e6, goodput
        saved = load_state(state_path(bed.name))
        assert saved["bw_bps"] == 20_000_000 and saved["config"]["rtt_ms"] == 40.0
        # the lab file says so too: a run on it records the shape it ran through
        assert _lab_testbed(bed) == {"name": bed.name, "mode": "netns", "bw": 20_000_000, "rtt": 40.0,
                                                  "buffer": 100_000, "loss": 0.0, "jitter": 0.0}
        # An agent's restore removes a changed link's root qdisc; the guard puts
        # back the testbed's CURRENT bottleneck, not the one it was built with.
        tbutil.ns_run(bed.state["router_ns"], ["tc", "qdisc", "del", "dev", h2["router_dev"], "root"])
        deadline = time.monotonic() + 5
        while "rate 20Mbit" not in _router_qdiscs(bed, h2["router_dev"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "rate 20Mbit" in _router_qdiscs(bed, h2["router_dev"])
    finally:
        reshape(bed.name, bw="100mbit", rtt="20ms", buffer="1bdp")
    assert 18 <= tbutil.median_rtt(h1["ns"], h2["addr"]) <= 26
    assert "rate 100Mbit" in _router_qdiscs(bed, h1["router_dev"])
    assert _lab_testbed(bed)["bw"] == 100_000_000


def test_reshape_keeps_what_is_not_given(bed) -> None:
    before = load_state(state_path(bed.name))["config"]
    now = reshape(bed.name, buffer="64K")
    assert now["buffer_bytes"] == 65536
    assert now["bw_bps"] == before["bw_bps"] and now["rtt_ms"] == before["rtt_ms"]
    reshape(bed.name, buffer="1bdp")


def test_reshape_refuses_bad_values_and_unknown_testbeds(bed) -> None:
    with pytest.raises(UsageError, match="bad rate"):
        reshape(bed.name, bw="fast")
    with pytest.raises(TestbedError, match="no testbed state"):
        reshape("nosuchbed")
