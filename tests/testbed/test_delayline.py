"""The delay line seen from outside: tcpdump on the router's links shows no packet held less than its delay.

The testbed the researcher measured (100 Mbit/s, 20 ms, 1 BDP): a TCP flow
that fills the bottleneck and pings beside it, tcpdump on both router links,
every packet matched in and out by its content. The old loop stamped every
packet read in one pass with the pass's clock reading: ACKs that had waited
in its socket left up to 10 ms early, and TCP measured a min_rtt below the
path's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig
from netesto.testbed.delaycontrol import delayline_stats

from . import tbutil
from .delayrun import Measured, busy_loops, measure

pytestmark = pytest.mark.netns

ONE_WAY_MS = 10.0
PATH_MS = 2 * ONE_WAY_MS
RESOLUTION_MS = 0.001  # ping's summary and ss's minrtt print microseconds
ARRIVAL_SLACK_NS = 100_000  # far below the 3 ms jitter, far above two CPUs' race into one queue


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    if not lifecycle.namespaces_supported()[0] or subprocess.run(["which", "tcpdump"], capture_output=True).returncode:
        pytest.skip("needs root, network namespaces and tcpdump")
    name = tbutil.unique_name()
    result = lifecycle.up(TestbedConfig.parse(name=name, dir=tmp_path_factory.mktemp(name), agents=False, hosts=2,
                                              bw="100mbit", rtt=f"{PATH_MS:g}ms", buffer="1bdp"))
    try:
        if result.state["delay_mode"] != "delayline":
            pytest.skip("this kernel has netem: the testbed does not use the delay line")
        yield result
    finally:
        assert lifecycle.down(result.name) == []


def _check(m: Measured, own: dict, state: dict) -> None:
    assert m.capture_dropped == 0, "the capture missed packets: it cannot vouch for them"
    held = m.held_ms()
    acks = [h for h in m.holds if h.proto == 6 and h.src == state["links"][1]["addr"]]
    assert len(held) > 500 and len(m.held_ms(1)) > 100 and len(acks) > 100, (len(held), len(acks))
    early = [h for h in held if h < ONE_WAY_MS]
    assert not early, f"{len(early)} of {len(held)} packets held less than {ONE_WAY_MS} ms: {early[:10]}"
    assert m.ping_min_ms is not None and PATH_MS - RESOLUTION_MS <= m.ping_min_ms <= PATH_MS * 1.02, m.ping_min_ms
    assert m.tcp_min_rtts and all(PATH_MS - RESOLUTION_MS <= r <= PATH_MS * 1.02 for r in m.tcp_min_rtts), m.tcp_min_rtts
    # Its own count agrees: nothing early, every packet the capture saw held.
    assert own["early"] == 0 and own["dropped"] == 0 and own["held"] >= len(held), own


@pytest.mark.parametrize("hog", [0, 2], ids=["alone", "two_busy_loops"])
def test_no_packet_leaves_before_its_delay(bed, tmp_path, hog: int) -> None:
    delayline_stats(bed.state, reset=True)
    with busy_loops(hog):
        m = measure(bed.state, tmp_path, seconds=2.0, tcp=True, ping_interval=0.01)
    own = delayline_stats(bed.state, reset=True)
    _check(m, own, bed.state)
    assert m.goodput_mbit is not None and m.goodput_mbit > 60  # the flow filled the bottleneck


def test_statistics_reach_the_testbed_and_its_log(tmp_path) -> None:
    """Per link over the control socket while it runs; the final ones in the logs after `down`."""
    name = tbutil.unique_name()
    result = lifecycle.up(TestbedConfig.parse(name=name, dir=tmp_path, agents=False, hosts=2, rtt="10ms"))
    try:
        if result.state["delay_mode"] != "delayline":
            pytest.skip("this kernel has netem: the testbed does not use the delay line")
        h1, h2 = result.state["links"]
        tbutil.ns_run(h1["ns"], ["ping", "-c", "20", "-i", "0.01", h2["addr"]])
        live = delayline_stats(result.state)
        assert live["queues"][str(h2["queue"])]["held"] >= 20 and live["queues"][str(h1["queue"])]["held"] >= 20
        assert live["early"] == 0 and live["added_p50_ms"] is not None
        assert live["added_p50_ms"] <= live["added_p99_ms"] <= live["added_max_ms"]
    finally:
        assert lifecycle.down(name) == []
    final = json.loads((Path(tmp_path) / f"{name}.logs" / "delayline.stats.json").read_text())
    assert final["held"] >= live["held"] and final["early"] == 0 and final["dropped_at_exit"] == 0
    assert "delayline: final statistics" in (Path(tmp_path) / f"{name}.logs" / "delayline.log").read_text()


def test_jitter_reorders_a_flow_only_where_netem_would(bed, tmp_path) -> None:
    """SET_NETEM's fallback with jitter: packets of one flow overtake each other without a rate (as netem's
    do), and leave in the order they came with one (netem with a rate keeps order)."""
    h1, h2 = bed.state["links"]
    from netesto.testbed.state import state_path

    def fallback(delay: float, jitter: float, rate: int) -> None:
        code = f"from netesto.testbed.delayline import netem_fallback as f; f('r-h2', {delay}, {jitter}, 0, {rate}, 1000)"
        proc = subprocess.run(["ip", "netns", "exec", bed.state["router_ns"], sys.executable, "-c", code], capture_output=True,
                              text=True, env={"NETESTO_TESTBED_STATE": str(state_path(bed.name)),
                                              "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": ":".join(sys.path)})
        assert proc.returncode == 0, proc.stderr

    overtaken = {}
    try:
        for rate in (0, 100_000_000):
            fallback(ONE_WAY_MS, 3.0, rate)
            m = measure(bed.state, tmp_path / str(rate), seconds=1.5, tcp=True, ping_interval=0.05)
            data = sorted((h for h in m.holds if h.proto == 6 and h.src == h1["addr"]), key=lambda h: h.t_in_ns)
            # A packet overtaken: one that came in clearly earlier (more than ARRIVAL_SLACK_NS) left later.
            # Packets of one flow that two CPUs hand to the router's link within microseconds of each
            # other may reach the delay line's queue in another order than the capture stamps them.
            overtaken[rate] = sum(1 for i, a in enumerate(data) for b in data[i + 1:i + 64]
                                  if b.t_in_ns - a.t_in_ns > ARRIVAL_SLACK_NS
                                  and b.t_in_ns + b.held_ns < a.t_in_ns + a.held_ns)
            assert len(data) > 100 and m.capture_dropped == 0
            toward_h2 = [h.held_ns for h in m.holds if h.dst == h2["addr"]]
            assert min(toward_h2) >= (ONE_WAY_MS - 3.0) * 1e6  # each packet's hold is its own draw, never less
    finally:
        fallback(0, 0, 0)  # the testbed's own link again
    assert overtaken[0] > 0 and overtaken[100_000_000] == 0, overtaken
