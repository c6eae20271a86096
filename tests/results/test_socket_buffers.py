"""The testbed sizes its hosts' socket-buffer ceilings for its bottleneck (what results' limit shares depend on)."""

from __future__ import annotations

import pytest

from netesto.testbed.buffers import ceiling

from ..testbed import tbutil

pytestmark = pytest.mark.netns


def _max(ns: str, key: str) -> int:
    return int(tbutil.ns_run(ns, ["sysctl", "-n", key]).stdout.split()[-1])


def test_a_fast_long_path_gets_buffers_for_it_and_a_reshape_follows(tmp_path_factory) -> None:
    # 10 Gbit/s x 20 ms, 1 BDP of queue: 25 MB of path; the kernel's 4 MB send buffer gave 1.3 Gbit/s
    with tbutil.testbed_up(tmp_path_factory, hosts=2, bw="10gbit", rtt="20ms", buffer="1bdp", agents=False) as up:
        want = ceiling(10_000_000_000, 20.0, 25_000_000)
        assert want == 200_000_000
        for lk in up.state["links"]:
            assert _max(lk["ns"], "net.ipv4.tcp_wmem") == want and _max(lk["ns"], "net.ipv4.tcp_rmem") == want
        assert up.state["socket_buffers"]["net.ipv4.tcp_wmem"].endswith(str(want))
        from netesto.testbed.inplace import reshape

        reshape(up.name, rtt="100ms", buffer="1bdp")  # 125 MB of queue: 4 x 250 MB, at the 1 GiB ceiling
        for lk in up.state["links"]:
            assert _max(lk["ns"], "net.ipv4.tcp_wmem") == ceiling(10_000_000_000, 100.0, 125_000_000)
        # never lowered: a slow path keeps what the kernel had
        reshape(up.name, bw="1mbit", rtt="1ms", buffer="10kb")
        assert _max(up.state["links"][0]["ns"], "net.ipv4.tcp_rmem") >= 6_000_000
