"""End to end: real netesto-agent processes in two namespaces, CURVE keys, real flows.

h1 (client) runs in ``pair.a``, h2 (server) in ``pair.b``, each agent bound to its
veth address with its own key pair. The controller is ``netesto run`` started
inside ``pair.a`` (from where both agents are reachable over the veth).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netesto.controller import Lab, run
from netesto.errors import LabError

from .agentproc import AgentProc, make_keys, start_agent


def start_pair(pair, tmp_path: Path, *, shape_h1: bool = False, lease: float | None = None,
               path: dict[str, str] | None = None) -> tuple[Path, dict[str, AgentProc]]:
    """Agents h1 (pair.a) and h2 (pair.b) with CURVE keys; returns the lab file.

    With ``shape_h1`` the lab says h1's traffic is shaped by agent h2 on its veth0; ``path``
    gives an agent its own PATH (the tools its host has).
    """
    keys = make_keys(tmp_path / "keys")
    env = {n: ["env", f"PATH={p}"] for n, p in (path or {}).items()}
    popen = {"h1": lambda argv: pair.popen(pair.a, [*env.get("h1", []), *argv]),
             "h2": lambda argv: pair.popen(pair.b, [*env.get("h2", []), *argv])}
    addr = {"h1": pair.addr_a, "h2": pair.addr_b}
    agents = {n: start_agent(popen[n], n, addr[n], tmp_path, keys=keys, lease=lease) for n in ("h1", "h2")}
    hosts = {
        n: {"control": addr[n], "port": a.port, "public_key": str(keys.agent(n)[0]), "dev": "veth0"}
        for n, a in agents.items()
    }
    if shape_h1:
        hosts["h1"]["shape"] = {"agent": "h2", "dev": "veth0"}
    lab = Lab.from_dict({"lab": {"name": "pair", "controller_key": str(keys.controller_secret)}, "hosts": hosts})
    path = tmp_path / "lab.toml"
    path.write_text(lab.to_toml())
    return path, agents


def netesto_run(pair, script: Path, lab: Path, work: Path, on_line=None, timeout: float = 90) -> tuple[int, str, str]:
    """``netesto run`` in pair.a; ``on_line(line)`` sees each progress line as it comes."""
    proc = pair.popen(pair.a, [sys.executable, "-m", "netesto", "run", str(script), "--lab", str(lab),
                               "--workdir", str(work)],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if on_line:
                on_line(line)
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
    finally:
        timer.cancel()
    return rc, "".join(lines), err

PAPER = """
SOURCE inlib
RUN InlibShortWaits
RUN TwoFlowBaseStream server=h2 client1=h1 client2=h1 ca1=cubic ca2=reno dur1=2 dur2=1 delay2=0.5 expName=twoflow
RUN MServerRR servers=h2 clients=h1 reqs=1K,10K ca=cubic dur=2 expName=mserverrr
DO_SERVER host=h1 exp=COUNTER start=1 expName=crossed
DO_SERVER host=h2 exp=PREV start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S pacing=10m dur=1 ca=cubic
DO_CLIENT host=h2 server=h1 test=TCP_STREAM req=S pacing=10m dur=1 ca=cubic
WAIT 1
GET_DATA host=h1
GET_DATA host=h2
"""


@pytest.mark.netns
def test_paper_examples_run_end_to_end(veth_pair, tmp_path: Path) -> None:
    lab, agents = start_pair(veth_pair, tmp_path)
    work = tmp_path / "work"
    script = tmp_path / "paper.script"
    script.write_text(PAPER)
    rc, out, err = netesto_run(veth_pair, script, lab, work)
    assert rc == 0, out + err
    assert "experiment 1 twoflow" in out and "experiment 2 mserverrr" in out
    assert (work / "counter").read_text().strip() == "3"
    expected = {1: {"h1-h2-1-0", "h1-h2-2-0"}, 2: {"h1-h2-1-0", "h1-h2-2-0"}}
    for exp, flows in expected.items():
        d = work / str(exp)
        names = {p.name for p in (d / "flows").iterdir()}
        for f in flows:
            assert f"{f}.client.nflow" in names, (exp, names)
            assert f"{f}.server.nflow" in names, (exp, names)
        doc = json.loads((d / "experiment.json").read_text())
        assert {f["flow_id"] for f in doc["flows"]} == flows
        assert set(doc["hosts"]) == {"h1", "h2"}
        assert all(abs(h["clock_offset"]) < 0.05 for h in doc["hosts"].values())
        skews = [f["start_skew"] for f in doc["flows"]]
        assert all(s is not None and abs(s) < 0.5 for s in skews), skews
        assert (d / "0").is_dir() and any((d / "0").glob("h2.*")) and any((d / "0").glob("h1.*"))
        assert (d / "1").is_dir() and any((d / "1").glob("h2.*"))
        assert (d / "ping" / "h1-h2.nflow").is_file()  # ping ran alongside the pair
    # TwoFlowBaseStream: the second flow starts delay2 = 0.5 s after the first
    doc = json.loads((work / "1" / "experiment.json").read_text())
    by = {f["flow_id"]: f for f in doc["flows"]}
    assert by["h1-h2-2-0"]["start_at"] - by["h1-h2-1-0"]["start_at"] == pytest.approx(0.5, abs=1e-6)
    assert by["h1-h2-2-0"]["ca"] == "reno" and by["h1-h2-1-0"]["test"] == "TCP_STREAM"
    # flows on the two hosts were scheduled for one instant and started together
    doc = json.loads((work / "3" / "experiment.json").read_text())
    f1, f2 = sorted(doc["flows"], key=lambda f: f["flow_id"])
    assert (f1["flow_id"], f2["flow_id"]) == ("h1-h2-1-0", "h2-h1-2-0")
    assert f1["start_at"] == f2["start_at"]
    # Both hosts share this machine's clock: the actual starts meet within a loaded
    # machine's wake-up slack (flows started in turn, over RPCs, would still pass 0.25 s
    # only by luck; equal start_at above is the batching itself).
    assert abs((f1["start_at"] + f1["start_skew"]) - (f2["start_at"] + f2["start_skew"])) < 0.25
    assert (work / "3" / "flows" / "h2-h1-2-0.server.nflow").is_file()
    # the agents kept nothing once the controller stored and acknowledged it
    for a in agents.values():
        assert not any((a.datadir / str(n)).exists() for n in (1, 2, 3))
    assert "from h1 in" in out and "from h2 in" in out
    processed_twoflow(work)


def processed_twoflow(work: Path) -> None:
    """What PROCESS_EXP made of the paper's experiment 1 (TwoFlowBaseStream: cubic for 2 s,
    reno joining 0.5 s later for 1 s): exp.nc on the common time axis, exp.csv, figure 8."""
    import csv

    from netesto.results import Table, convergence_time, figure8, open_experiment

    d = work / "1"
    assert (d / "exp.nc").is_file() and (d / "all.exp.out").is_file()
    ds = open_experiment(d)
    assert sorted(ds.flow.values) == ["h1-h2-1-0", "h1-h2-2-0"]
    f1, f2 = ds.sel(flow="h1-h2-1-0"), ds.sel(flow="h1-h2-2-0")
    assert str(f2.ca.values) == "reno" and float(f2.delay) == pytest.approx(0.5)
    # The second flow joined 0.5 s after the first (plus the measured start
    # skews of experiment.json) on the common time axis.
    doc = json.loads((d / "experiment.json").read_text())
    skew = {f["flow_id"]: f["start_skew"] for f in doc["flows"]}
    expected = 0.5 + skew["h1-h2-2-0"] - skew["h1-h2-1-0"]
    assert float(f2.start - f1.start) == pytest.approx(expected, abs=0.02)
    # never shorter than asked; longer by the end timer's lateness and the send buffer's drain
    # to the receiver, both of which a loaded machine stretches (CI, 4 workers on 2 cores: +0.32 s)
    assert 2.0 - 0.01 <= float(f1.duration) < 2.0 + 1.0
    assert 1.0 - 0.01 <= float(f2.duration) < 1.0 + 1.0
    for f in (f1, f2):
        bits = float(f.goodput.fillna(0).sum()) * ds.attrs["interval"]
        assert bits == pytest.approx(float(f.bytes) * 8, rel=1e-6)
    assert "TwoFlowBaseStream" in ds.attrs["script"]
    c = convergence_time(ds, "h1-h2-2-0", tolerance=0.5, hold=0.2)
    # NaN (never converged) or within the joining flow's life.
    assert c != c or 0 <= c <= float(f2.duration)
    with open(work / "exp.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["exp"] for r in rows if r["exp"].startswith("1.")] == ["1.0", "1.1", "1.2"]
    first = {r["exp"]: r for r in rows}
    assert first["1.0"]["ca"] == "cubic/reno" and first["1.0"]["expName"] == "twoflow"
    # sumRateDur: (rate1 x 2 s + rate2 x 1 s) / 2 s
    r1, r2 = float(first["1.1"]["rate"]), float(first["1.2"]["rate"])
    assert float(first["1.0"]["rate"]) == pytest.approx((r1 * 2 + r2 * 1) / 2, abs=0.2)
    assert int(first["1.1"]["client-tx-packets"].split(".")[0] or 0) > 0
    fig = figure8(Table.read(work)).to_pandas()
    assert list(fig["exp"]) == [r["exp"] for r in rows if r["exp"].endswith(".0")]  # a row per experiment


KILL = """
SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1
DO_SERVER host=h2 exp=COUNTER order=0 start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S dur=3 stats=1 exp=PREV ca=cubic
WAIT 3
GET_DATA host=h2
GET_DATA host=h1
PROCESS_EXP
"""


@pytest.mark.netns
def test_agent_killed_mid_experiment(veth_pair, tmp_path: Path) -> None:
    lab, agents = start_pair(veth_pair, tmp_path)
    before = veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip()
    assert before != "1"
    work = tmp_path / "work"
    script = tmp_path / "kill.script"
    script.write_text(KILL)
    killed = []

    def on_line(line: str) -> None:
        if "flow(s) of" in line and not killed:  # the flows are scheduled: kill h2 while they run
            killed.append(time.time())
            threading.Timer(1.5, agents["h2"].kill).start()

    rc, out, err = netesto_run(veth_pair, script, lab, work, on_line)
    assert killed and agents["h2"].proc.poll() is not None
    assert rc == 1, out + err
    assert "ERROR h2:" in out and "(host dropped)" in out
    assert "h2" in err and "unreachable" in err and "Data kept for experiment(s): 1 (from h1)" in err
    # the other host's data is kept, experiment.json written
    assert (work / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()
    doc = json.loads((work / "1" / "experiment.json").read_text())
    assert doc["flows"][0]["flow_id"] == "h1-h2-1-0" and "h2" in doc["hosts"]
    assert "from h1 in" in out and "from h2 in" not in out
    # h1's changed sysctl was restored
    after = veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip()
    assert after == before


def test_unknown_host_fails_before_anything_runs(tmp_path: Path) -> None:
    lab = Lab.loopback(2, base_port=1)  # nothing listens: nothing may be contacted
    with pytest.raises(LabError, match="'h3'.*h1, h2.*did you mean"):
        run("DO_SERVER host=h1 start=1\nDO_CLIENT host=h2 server=h3 dur=1\n", lab=lab, workdir=tmp_path)
    assert not (tmp_path / "counter").exists()


LONG = """
SET_SYSCTL host=h1 net.ipv4.tcp_ecn=1
DO_SERVER host=h2 exp=COUNTER order=0 start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S pacing=10m dur=30 exp=PREV ca=cubic
WAIT 30
GET_DATA host=h2
GET_DATA host=h1
"""


def _engine_clients(ns: str) -> list[int]:
    """The flow-engine clients running flows in ``ns``: a client the agent started ahead (``--specs -``)
    runs some only once it has renamed itself for them (netesto.agent.spare)."""
    from netns import ns_pids  # tests/ is on sys.path (conftest)

    from netesto.procs import SPARE_RUNNING

    out = []
    for pid in ns_pids(ns):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        ahead = b"--specs" in cmd and cmd[cmd.index(b"--specs") + 1:][:1] == [b"-"]
        if b"netesto.engine" in cmd and b"client" in cmd and (not ahead or comm == SPARE_RUNNING):
            out.append(pid)
    return out


@pytest.mark.netns
@pytest.mark.parametrize("signals", [("SIGINT",), ("SIGTERM",), ("SIGINT", "SIGINT", "SIGINT")],
                         ids=["ctrl-c", "sigterm", "ctrl-c-x3"])
def test_ctrl_c_stops_flows_and_restores(veth_pair, tmp_path: Path, signals: tuple[str, ...]) -> None:
    # SIGTERM and a third Ctrl-C used to exit at once, leaving flows running and hosts changed
    # until the lease expired; now every one of them restores the hosts before the process exits.
    import signal

    lab, agents = start_pair(veth_pair, tmp_path)
    before = veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip()
    script = tmp_path / "long.script"
    script.write_text(LONG)
    proc_box: list = []
    running: list[bool] = []
    interrupted: list[float] = []
    stopped: list[float] = []  # when the flow's engine client was gone

    def on_line(line: str) -> None:
        if "flow(s) of" in line:
            def interrupt() -> None:
                interrupted.append(time.monotonic())
                running.append(bool(_engine_clients(veth_pair.a)))
                for name in signals:
                    proc_box[0].send_signal(getattr(signal, name))
                    time.sleep(0.05)
                while _engine_clients(veth_pair.a) and time.monotonic() < interrupted[0] + 40:
                    time.sleep(0.1)
                stopped.append(time.monotonic())
            threading.Thread(target=lambda: (time.sleep(2.0), interrupt()), daemon=True).start()

    real_popen = veth_pair.popen

    def popen(ns, argv, **kw):
        proc = real_popen(ns, argv, **kw)
        proc_box.append(proc)
        return proc

    veth_pair.popen = popen
    try:
        rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work", on_line)
    finally:
        veth_pair.popen = real_popen
    assert running == [True]  # the flow was running when Ctrl-C came
    assert rc == 128 + getattr(signal, signals[0]), out + err  # Ctrl-C 130, SIGTERM 143
    assert "interrupted" in err
    # the agent stopped the flow at the interrupt, not after the 28 s it had left (an engine worker may take
    # a moment to notice its parent's end); timed from the interrupt to the flow's end, not to the script's:
    # on a loaded runner agents slow to start, then fetching and processing, took 22-25 s of it in busy runs
    deadline = time.monotonic() + 10
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stopped and stopped[0] - interrupted[0] < 15, (interrupted, stopped)
    assert not _engine_clients(veth_pair.a)
    assert agents["h1"].proc.poll() is None  # agents keep running
    after = veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip()
    assert after == before
    if len(signals) == 1:
        assert (tmp_path / "work" / "1" / "exp.nc").is_file()  # what ran was fetched and processed
    else:  # the later Ctrl-C skipped the processing: fetched, described, not processed
        assert (tmp_path / "work" / "1" / "experiment.json").is_file() and "not processed" in err


SHAPE = """
SET_QDISC host=h1 qdisc=tbf rate=100mbit burst=15k limit=150000
ECHO shaped
WAIT 2
"""


@pytest.mark.netns
def test_qdisc_goes_to_the_shaping_agent_and_is_restored_at_the_end(veth_pair, tmp_path: Path) -> None:
    lab, agents = start_pair(veth_pair, tmp_path, shape_h1=True)
    script = tmp_path / "shape.script"
    script.write_text(SHAPE)

    def qdiscs(ns: str) -> str:
        return veth_pair.run(ns, ["tc", "qdisc", "show", "dev", "veth0"]).stdout

    seen: dict[str, str] = {}

    def on_line(line: str) -> None:
        if line.rstrip().endswith("shaped"):
            seen["b"], seen["a"] = qdiscs(veth_pair.b), qdiscs(veth_pair.a)

    before_b = qdiscs(veth_pair.b)
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work", on_line)
    assert rc == 0, out + err
    assert "tbf" in seen["b"] and "rate 100Mbit" in seen["b"]  # on the shaping agent's device
    assert "tbf" not in seen["a"]  # not on h1 itself
    assert "tbf" not in qdiscs(veth_pair.b) and qdiscs(veth_pair.b) == before_b  # restored when the run ended


@pytest.mark.netns
def test_a_root_qdisc_the_agent_cannot_rebuild_is_named_at_set_and_at_restore(veth_pair, tmp_path: Path) -> None:
    """The shaping device has its own htb tree: the agent says at SET_QDISC that restore will not
    rebuild it, and the run prints restore's report, instead of a silent change to the host."""
    lab, _agents = start_pair(veth_pair, tmp_path, shape_h1=True)
    veth_pair.run(veth_pair.b, ["tc", "qdisc", "replace", "dev", "veth0", "root", "handle", "1:", "htb",
                                "default", "10"], check=True)
    script = tmp_path / "shape.script"
    script.write_text(SHAPE)
    rc, out, err = netesto_run(veth_pair, script, lab, tmp_path / "work")
    assert rc == 0, out + err
    lines = [line.split("] ", 1)[-1] for line in out.splitlines()]  # without the progress clock
    notes = [line for line in lines if line.startswith("note: h2: the root qdisc of veth0") and "htb" in line]
    assert notes and "cannot be rebuilt exactly" in notes[0], out
    restored = [line for line in lines if line.startswith("ERROR h2: restore: qdisc on veth0:")]
    assert restored and "NOT restored exactly" in restored[0] and "htb" in restored[0], out


@pytest.mark.netns
def test_controller_killed_mid_flow_then_a_new_controller_collects(veth_pair, tmp_path: Path) -> None:
    """`netesto run` dies by SIGKILL while a 30 s flow runs: at lease expiry (8 s) the agents stop
    the flow and restore h1's sysctl, keep the data; `netesto run --collect` fetches it.

    (8 s, not less: AgentClient's heartbeat skips a beat while its last request is under
    4 s old, so a live controller would let a shorter lease lapse.)"""
    import os
    import signal

    lab, agents = start_pair(veth_pair, tmp_path, lease=8.0)
    before = veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip()
    assert before != "1"
    script = tmp_path / "long.script"
    script.write_text(LONG)
    work = tmp_path / "work"
    proc = veth_pair.popen(veth_pair.a, [sys.executable, "-m", "netesto", "run", str(script), "--lab", str(lab),
                                         "--workdir", str(work)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "flow(s) of" in line:
                break
        time.sleep(2.5)  # the flow has started (1 s lead) and runs
        assert _engine_clients(veth_pair.a), f"the flow is not running: {agents['h1'].log.read_text()[-3000:]}"
        assert veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip() == "1"
        os.kill(proc.pid, signal.SIGKILL)  # the controller (ip netns exec execs it: same pid)
        proc.wait(timeout=5)
        killed = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = killed + 20
    while time.monotonic() < deadline and (_engine_clients(veth_pair.a)
                                           or veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip() != before):
        time.sleep(0.2)
    assert not _engine_clients(veth_pair.a), "the flow still runs after lease expiry"
    assert veth_pair.run(veth_pair.a, ["cat", "/proc/sys/net/ipv4/tcp_ecn"]).stdout.strip() == before
    assert time.monotonic() - killed < 20  # long before the 30 s flow would have ended
    assert all(a.proc.poll() is None for a in agents.values())  # the agents live on
    assert not (work / "1" / "flows").exists()
    rc = veth_pair.run(veth_pair.a, [sys.executable, "-m", "netesto", "run", "--collect", "--lab", str(lab), "--workdir", str(work)])
    assert rc.returncode == 0, rc.stdout + rc.stderr
    assert "from h1" in rc.stdout and "from h2" in rc.stdout, rc.stdout
    from netesto.raw.nflow import read_flow

    client = read_flow(work / "1" / "flows" / "h1-h2-1-0.client.nflow")
    assert client.rows > 0 and (work / "1" / "flows" / "h1-h2-1-0.server.nflow").is_file()
    # ... and processes what it fetched (it used to leave raw files only); exp.csv gets the rows once
    assert (work / "1" / "exp.nc").is_file() and (work / "1" / "all.exp.out").is_file()
    rows = [line.split(",")[0] for line in (work / "exp.csv").read_text().splitlines()[1:]]
    assert rows == ["1.0"], rows
