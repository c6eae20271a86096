"""Real testbeds in namespaces: goodput, RTT, queueing delay, loss, clean tear-down."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netesto.errors import TestbedError, UsageError
from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig, UpResult
from netesto.testbed.delayline import send_control

from . import tbutil

pytestmark = pytest.mark.netns

RTT_MS = 20.0
BDP_MS = 20.0  # 1 BDP of queue drains in one RTT's worth of time


def _up(tmp_path_factory, **kw) -> UpResult:
    name = tbutil.unique_name()
    cfg = TestbedConfig.parse(name=name, dir=tmp_path_factory.mktemp(name), agents=False, **kw)
    return lifecycle.up(cfg)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """A 2-host testbed at 100 Mbit/s, 20 ms, 1 BDP of buffer; always torn down."""
    result = _up(tmp_path_factory, hosts=2, bw="100mbit", rtt="20ms", buffer="1bdp")
    try:
        yield result
    finally:
        problems = lifecycle.down(result.name)
        assert not problems and not tbutil.leftovers(result.name)


def _flow_with_pings(bed, ss: bool = False) -> dict:
    """One 3 s cubic iperf3 run h1 -> h2 with ping h1 -> h2 alongside (and ``ss`` of it)."""
    h1, h2 = bed.state["links"]
    pings: dict[str, str] = {}

    def _ping() -> None:
        # Starts after slow start has had 0.5 s to fill the queue.
        pings["out"] = tbutil.ns_run(h1["ns"], ["sh", "-c", f"sleep 1.2; exec ping -c 40 -i 0.05 {h2['addr']}"]).stdout

    def _ss() -> None:
        # The kernel's own min_rtt of the iperf3 data connection (iperf3's
        # "min_rtt" is the least interval srtt, which includes queueing).
        pings["ss"] = tbutil.ns_run(h1["ns"], ["sh", "-c", f"sleep 2.5; exec ss -tin dst {h2['addr']}"]).stdout

    threads = [threading.Thread(target=_ping)] + ([threading.Thread(target=_ss)] if ss else [])
    for t in threads:
        t.start()
    # 1 s of slow start left out of the figure (-O 1): the goodput is the steady state's.
    run = tbutil.iperf3(h1["ns"], h2["ns"], h2["addr"], seconds=3, ca="cubic", omit=1)
    for t in threads:
        t.join()
    min_rtts = [float(m) for m in re.findall(r"minrtt:([\d.]+)", pings.get("ss", ""))]
    return {"load": tbutil.ping_rtts(pings["out"]), "iperf": run, "min_rtts": min_rtts}


@pytest.fixture(scope="module")
def loaded(bed):
    """One 3 s cubic iperf3 run h1 -> h2 with ping h1 -> h2 alongside, plus an idle ping."""
    h1, h2 = bed.state["links"]
    idle = tbutil.ns_run(h1["ns"], ["ping", "-c", "20", "-i", "0.05", h2["addr"]])
    return {"idle": tbutil.ping_rtts(idle.stdout), **_flow_with_pings(bed, ss=True)}


def test_goodput_through_100mbit_bottleneck(bed, loaded) -> None:
    runs = [loaded["iperf"]["end"]["sum_received"]["bits_per_second"] / 1e6]
    # CPU contention on a shared 2-core machine can only lower goodput (the
    # delay line, iperf3 and the senders need CPU); the bottleneck caps it
    # (95.6 Mbit/s of payload in 100 Mbit/s of frames). So the best of up to
    # three runs is near the bottleneck's, and a wrong rate (half, double,
    # none) still fails every run. The floor is 80, not 90: a quiet CI run's
    # parallel phase had three runs in a row at 89.2-89.5.
    h1, h2 = bed.state["links"]
    while max(runs) < 80 and len(runs) < 3:
        runs.append(tbutil.iperf3(h1["ns"], h2["ns"], h2["addr"], seconds=3, ca="cubic", omit=1)["end"]["sum_received"]["bits_per_second"] / 1e6)
    assert 80 <= max(runs) <= 100, f"goodput {', '.join(f'{r:.1f}' for r in runs)} Mbit/s"
    assert all(r <= 100 for r in runs), runs


def test_ping_rtt_is_the_configured_rtt(bed, loaded) -> None:
    rtts = loaded["idle"]
    assert len(rtts) >= 18
    assert abs(min(rtts) - RTT_MS) <= 0.1 * RTT_MS, rtts
    median = statistics.median(rtts)
    if abs(median - RTT_MS) > 0.1 * RTT_MS:  # a CPU-starved round only adds: probe again
        h1, h2 = bed.state["links"]
        median = min(median, tbutil.median_rtt(h1["ns"], h2["addr"], count=20, interval=0.05))
    assert abs(median - RTT_MS) <= 0.1 * RTT_MS, (median, rtts)


def test_tcp_min_rtt_is_the_configured_rtt(loaded) -> None:
    assert loaded["min_rtts"], "ss found no connection"
    # iperf3's control and data connections: both saw the base RTT.
    for min_rtt_ms in loaded["min_rtts"]:
        assert abs(min_rtt_ms - RTT_MS) <= 0.1 * RTT_MS, f"TCP min_rtt {min_rtt_ms} ms"


def test_one_bdp_buffer_bounds_queueing_delay(bed, loaded) -> None:
    runs = [loaded["load"]]
    while True:
        rtts = runs[-1]
        assert len(rtts) >= 30, rtts
        queueing = sorted(r - RTT_MS for r in rtts)
        # A full 1-BDP queue adds at most 20 ms; one 64 KB GSO packet (5 ms at
        # 100 Mbit/s) may sit on top of the byte limit. The 90th percentile, as
        # on this shared 2-core machine a ping now and then waits for a CPU.
        p90 = queueing[int(0.9 * (len(queueing) - 1))]
        assert p90 <= BDP_MS + 5.5, f"queueing delay p90 {p90:.1f} ms: {queueing}"
        # And the queue is really there: cubic fills it. A starved sender (or a
        # timeout after the delay line fell behind) can empty it for a while, so
        # the best of up to five flows (a CI's parallel phase had three in a row
        # at 0.9-2.8 ms); a queue that never forms fails each.
        if statistics.median(queueing) >= 3 or len(runs) == 5:
            break
        runs.append(_flow_with_pings(bed)["load"])
    medians = [statistics.median(r) - RTT_MS for r in runs]
    assert max(medians) >= 3, f"median queueing {', '.join(f'{m:.1f}' for m in medians)} ms"


def test_loss_gives_retransmits(tmp_path_factory) -> None:
    result = _up(tmp_path_factory, hosts=2, bw="100mbit", rtt="4ms", loss="1")
    try:
        h1, h2 = result.state["links"]
        run = tbutil.iperf3(h1["ns"], h2["ns"], h2["addr"], seconds=2, ca="cubic")
        retrans = run["end"]["sum_sent"]["retransmits"]
        stats = send_control(result.state["delayline_control"], {"op": "stats"})["stats"]
        assert stats["dropped"] > 0 and 0.003 < stats["dropped"] / stats["packets"] < 0.03, stats
        assert retrans > 0
    finally:
        assert lifecycle.down(result.name) == []
    assert tbutil.leftovers(result.name) == []


def test_netem_fallback_changes_one_link(bed) -> None:
    """The router agent's SET_NETEM hook: 30 ms toward h2, then back to 10 ms."""
    h1, h2 = bed.state["links"]
    from netesto.testbed.state import state_path

    def fallback(delay: float) -> None:
        code = f"from netesto.testbed.delayline import netem_fallback as f; print(f('r-h2', {delay}, 0, 0, 0, 1000))"
        proc = subprocess.run(
            ["ip", "netns", "exec", bed.state["router_ns"], sys.executable, "-c", code],
            capture_output=True, text=True, env={"NETESTO_TESTBED_STATE": str(state_path(bed.name)), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                 "PYTHONPATH": ":".join(sys.path)},
        )
        assert proc.returncode == 0, proc.stderr

    try:
        fallback(30)
        assert 38 <= tbutil.median_rtt(h1["ns"], h2["addr"]) <= 47  # 30 + 10 ms (not 20, not 70)
    finally:
        fallback(RTT_MS / 2)
    assert 18 <= tbutil.median_rtt(h1["ns"], h2["addr"]) <= 26  # 10 + 10 ms again (not 40)


def test_bad_bw_fails_before_creating_anything(tmp_path) -> None:
    name = tbutil.unique_name()
    proc = subprocess.run(
        [sys.executable, "-m", "netesto", "testbed", "up", "--name", name, "--bw", "fast", "--dir", str(tmp_path)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2 and "bad rate 'fast'" in proc.stderr
    assert tbutil.leftovers(name) == []


@pytest.mark.parametrize("step", ["topology", "delay", "agents", "lab"])
def test_failed_up_leaves_nothing_behind(tmp_path, step) -> None:
    name = tbutil.unique_name()
    before = _global_sysctls()

    def fail_at(now: str) -> None:
        if now == step:
            raise TestbedError(f"injected failure at step {step!r}")

    cfg = TestbedConfig.parse(name=name, hosts=2, dir=tmp_path, agents=False)
    with pytest.raises(TestbedError, match=f"injected failure at step '{step}'"):
        lifecycle.up(cfg, at_step=fail_at)
    assert tbutil.leftovers(name) == []
    if not _other_testbeds(name):
        assert _global_sysctls() == before


def test_down_removes_everything(tmp_path) -> None:
    name = tbutil.unique_name()
    before = _global_sysctls()
    proc = subprocess.run(
        [sys.executable, "-m", "netesto", "testbed", "up", "--name", name, "--hosts", "2", "--no-agents", "--dir", str(tmp_path)],
        capture_output=True, text=True,
    )
    try:
        assert proc.returncode == 0, proc.stderr
        assert "delay line" in proc.stdout or "netem" in proc.stdout
        state = lifecycle.status(name)[0]
        assert all(p["alive"] for p in state["processes"]) and state["processes"]
        rules = tbutil.ns_run(state["router_ns"], ["iptables", "-S", "FORWARD"]).stdout
        assert rules.count("NFQUEUE") == 2
        assert "cubic" in open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read()
        status = subprocess.run([sys.executable, "-m", "netesto", "testbed", "status", "--name", name], capture_output=True, text=True)
        assert "h2" in status.stdout and "alive" in status.stdout
    finally:
        down = subprocess.run([sys.executable, "-m", "netesto", "testbed", "down", "--name", name], capture_output=True, text=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert tbutil.leftovers(name) == []
    # the lab file (and keys) go too: a run against a stale lab file waited out a timeout per host
    assert state["lab"] and not Path(state["lab"]).exists() and not (tmp_path / f"{name}.keys").exists()
    for p in state["processes"]:
        assert not lifecycle.proc_alive(p["pid"], p["start_time"])
    if not _other_testbeds(name):
        assert _global_sysctls() == before


def test_down_of_unknown_testbed_is_a_clear_error() -> None:
    with pytest.raises(TestbedError, match="no testbed state"):
        lifecycle.down("nosuchbed")


def _global_sysctls() -> tuple[str, str]:
    return (
        open("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read().strip(),
        open("/proc/sys/net/ipv4/tcp_child_ehash_entries").read().strip(),
    )


def _other_testbeds(name: str) -> bool:
    from netesto.testbed.state import list_states

    return any(s["name"] != name for s in list_states())


def test_usage_error_type() -> None:
    with pytest.raises(UsageError):
        TestbedConfig.parse(bw="fast")


def test_guard_only_delay_line_keeps_a_bottleneck_on_a_bare_link(veth_pair, tmp_path) -> None:
    """The netem-mode helper: no queues, it only re-installs the htb+bfifo when a root qdisc is removed."""
    ready = tmp_path / "ready"
    proc = veth_pair.popen(veth_pair.a, [sys.executable, "-m", "netesto.testbed.delayline", "--guard",
                                         "veth0=50000000:120000:10.1.0.0/24", "--ready-file", str(ready)])
    for _ in range(100):
        if ready.exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None

    def bottleneck() -> str:
        """The link's qdiscs once the htb root and its bfifo child are both there (the guard installs them with
        separate ``tc`` calls, so a read between the two sees the root alone), or the last read after 5 s."""
        deadline = time.monotonic() + 5
        while True:
            shown = veth_pair.run(veth_pair.a, ["tc", "qdisc", "show", "dev", "veth0"]).stdout
            if ("htb" in shown and "limit 120000b" in shown) or time.monotonic() > deadline:
                return shown
            time.sleep(0.1)

    first = bottleneck()
    assert "htb" in first and "limit 120000b" in first
    veth_pair.run(veth_pair.a, ["tc", "qdisc", "del", "dev", "veth0", "root"])
    again = bottleneck()
    assert "htb" in again and "limit 120000b" in again
    proc.terminate()
    assert proc.wait(timeout=5) == 0


def test_context_manager_tears_down_after_an_error(tmp_path) -> None:
    name = tbutil.unique_name()
    with pytest.raises(RuntimeError, match="boom"):
        with lifecycle.testbed(name=name, hosts=1, dir=tmp_path, agents=False) as tb:
            assert tb.lab.exists() and tbutil.leftovers(name)
            raise RuntimeError("boom")
    assert tbutil.leftovers(name) == []


def test_down_cleans_up_after_a_killed_up(tmp_path) -> None:
    """`up` dies by SIGKILL half-way (agents step): the state file alone lets `down` undo it."""
    import json
    import os

    from netesto.testbed.state import state_path

    name = tbutil.unique_name()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "tests.testbed.hanging_up", name, str(tmp_path), "agents"],
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state: dict = {}
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                state = json.loads(state_path(name).read_text())
            except (OSError, ValueError):
                state = {}
            if any(p["kind"] == "guard" for p in state.get("processes", [])):
                break
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        assert state.get("status") == "creating" and state["processes"], state
        assert tbutil.leftovers(name)  # the half-built testbed is there
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        down = subprocess.run([sys.executable, "-m", "netesto", "testbed", "down", "--name", name], capture_output=True, text=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert tbutil.leftovers(name) == []
    for p in state["processes"]:
        assert not lifecycle.proc_alive(p["pid"], p["start_time"])


def test_jitter_spreads_the_rtt(tmp_path) -> None:
    with lifecycle.testbed(name=tbutil.unique_name(), hosts=2, rtt="20ms", jitter="8ms", dir=tmp_path, agents=False) as tb:
        h1, h2 = tb.state["links"]
        rtts = tbutil.ping_rtts(tbutil.ns_run(h1["ns"], ["ping", "-c", "30", "-i", "0.02", h2["addr"]]).stdout)
    assert len(rtts) >= 25
    # +-4 ms each way: 12..28 ms, and really spread (not a constant 20). A
    # late wake-up on this shared machine can only add, so the top is the p90.
    assert 11.5 <= min(rtts) and sorted(rtts)[int(0.9 * (len(rtts) - 1))] <= 29, rtts
    assert statistics.pstdev(rtts) > 1.0, rtts
    assert abs(statistics.median(rtts) - 20) < 3, rtts


def test_delay_line_survives_packets_vanishing_under_it(tmp_path) -> None:
    """A link goes down while packets are held: the kernel drops them, our late verdicts fail, the loop goes on."""
    with lifecycle.testbed(name=tbutil.unique_name(), hosts=2, rtt="1000ms", dir=tmp_path, agents=False) as tb:
        h1, h2 = tb.state["links"]
        router = tb.state["router_ns"]
        control = tb.state["delayline_control"]
        ping = tbutil.ns_popen(h1["ns"], ["ping", "-c", "5", "-i", "0.05", "-W", "1", h2["addr"]], stdout=subprocess.DEVNULL)
        time.sleep(0.3)  # echo requests held for 500 ms toward h2
        subprocess.run(["ip", "-n", router, "link", "set", "r-h2", "down"], check=True)
        ping.wait(timeout=10)
        time.sleep(0.5)
        stats = send_control(control, {"op": "stats"})["stats"]
        assert stats["netlink_errors"] > 0, stats
        subprocess.run(["ip", "-n", router, "link", "set", "r-h2", "up"], check=True)
        send_control(control, {"queue": h2["queue"], "delay": 10})
        send_control(control, {"queue": h1["queue"], "delay": 10})
        assert 18 <= tbutil.median_rtt(h1["ns"], h2["addr"]) <= 26  # the loop forwards again, 10 + 10 ms


def test_two_testbeds_coexist_and_status_shows_both(tmp_path) -> None:
    """Two testbeds at once: own namespaces and subnets, own delays; `status` lists both; one goes down alone."""
    names = [tbutil.unique_name(), tbutil.unique_name()]
    beds = []
    try:
        for name, rtt in zip(names, ("10ms", "30ms")):
            beds.append(lifecycle.up(TestbedConfig.parse(name=name, hosts=2, rtt=rtt, dir=tmp_path / name, agents=False)))
        a, b = (bed.state for bed in beds)
        assert a["subnet"] != b["subnet"] and not set(a["namespaces"]) & set(b["namespaces"])
        assert all(ns.startswith(f"{n}-") for n, st in zip(names, (a, b)) for ns in st["namespaces"])
        status = subprocess.run([sys.executable, "-m", "netesto", "testbed", "status"], capture_output=True, text=True)
        assert status.returncode == 0, status.stderr
        for name, st in zip(names, (a, b)):
            block = status.stdout.split(f"testbed {name} ")[1].split("\ntestbed ")[0]
            assert block.startswith("[netns, up]") and f"{name}.lab.toml" in block, block
            assert "bottleneck 100 Mbit/s" in block and "delay by" in block
            for lk in st["links"]:
                assert re.search(rf"{lk['host']}\s+ns {lk['ns']}\s+{re.escape(lk['addr'])}\s+via {lk['router_dev']}", block), block
            assert re.search(r"delayline\s+delayline\s+pid \d+\s+alive", block) or st["delay_mode"] == "netem", block
        # each testbed's own delay on its own path
        rtt_a = tbutil.median_rtt(a["links"][0]["ns"], a["links"][1]["addr"])
        rtt_b = tbutil.median_rtt(b["links"][0]["ns"], b["links"][1]["addr"])
        assert 9 <= rtt_a <= 15 and 29 <= rtt_b <= 36, (rtt_a, rtt_b)
        # `down` without --name refuses to guess among several (or, with another owner's up, among theirs)
        guess = subprocess.run([sys.executable, "-m", "netesto", "testbed", "down"], capture_output=True, text=True)
        assert guess.returncode != 0 and re.search(r"several testbeds are up|testbeds of other owners are up",
                                                   guess.stderr), guess.stderr
        assert all(lifecycle.state_path(name).exists() for name in names)
        assert lifecycle.down(names[0]) == []
        assert tbutil.leftovers(names[0]) == []
        assert 29 <= tbutil.median_rtt(b["links"][0]["ns"], b["links"][1]["addr"]) <= 36  # untouched
        one = subprocess.run([sys.executable, "-m", "netesto", "testbed", "status", "--name", names[1]], capture_output=True, text=True)
        assert f"testbed {names[1]} [netns, up]" in one.stdout and names[0] not in one.stdout
    finally:
        for name in names:
            if lifecycle.state_path(name).exists():
                lifecycle.down(name)
    assert tbutil.leftovers(names[1]) == []


def test_up_options_reach_the_kernel(tmp_path) -> None:
    """Every `up` option lands where it should: htb rate, bfifo bytes, delay line settings, ca, sysctls."""
    name = tbutil.unique_name()
    proc = subprocess.run(
        [sys.executable, "-m", "netesto", "testbed", "up", "--name", name, "--hosts", "1", "--bw", "50mbit", "--rtt", "10ms",
         "--buffer", "2bdp", "--loss", "0.5", "--jitter", "2ms", "--ca", "reno", "--no-agents", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        state = lifecycle.status(name)[0]
        router, (h1,) = state["router_ns"], state["links"]
        qdiscs = subprocess.run(["tc", "-n", router, "qdisc", "show", "dev", "r-h1"], capture_output=True, text=True).stdout
        classes = subprocess.run(["tc", "-n", router, "class", "show", "dev", "r-h1"], capture_output=True, text=True).stdout
        assert "htb 1: root" in qdiscs and "limit 125000b" in qdiscs, qdiscs  # 2 x 50 Mbit/s x 10 ms
        assert "rate 50Mbit" in classes, classes
        inside = tbutil.ns_run(h1["ns"], ["cat", "/proc/sys/net/ipv4/tcp_congestion_control",
                                          "/proc/sys/net/ipv4/tcp_no_metrics_save", "/proc/sys/net/ipv4/tcp_ehash_entries"]).stdout.split()
        assert inside == ["reno", "1", lifecycle.EHASH_ENTRIES], inside  # its own small TCP hash table
        assert tbutil.ns_run(router, ["cat", "/proc/sys/net/ipv4/ip_forward"]).stdout.strip() == "1"
        if state["delay_mode"] == "delayline":
            settings = send_control(state["delayline_control"], {"op": "stats"})["settings"][str(h1["queue"])]
            assert settings == {"delay_ms": 5.0, "jitter_ms": 1.0, "loss": 0.005, "ordered": False}, settings  # each way
        status = subprocess.run([sys.executable, "-m", "netesto", "testbed", "status", "--name", name], capture_output=True, text=True)
        assert "bottleneck 50 Mbit/s, rtt 10.0 ms, buffer 125000 B, loss 0.5 %, jitter 2 ms, ca reno" in status.stdout, status.stdout
    finally:
        down = subprocess.run([sys.executable, "-m", "netesto", "testbed", "down", "--name", name], capture_output=True, text=True)
    assert down.returncode == 0, down.stdout + down.stderr
    assert tbutil.leftovers(name) == []
