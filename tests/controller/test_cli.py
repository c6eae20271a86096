"""``netesto run`` against real loopback agents (insecure, loopback only): -D, --quiet, stdin."""

from __future__ import annotations

import json
import os
import time
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.controller import Lab

from .agentproc import loopback_popen, start_agent

SCRIPT = """
DO_SERVER host=h2 exp=COUNTER start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S pacing=10m dur=$dur exp=PREV ca=cubic
ECHO flows of $dur s
WAIT $dur
GET_DATA host=h2
GET_DATA host=h1
"""


@pytest.fixture
def loopback_lab(tmp_path: Path):
    yield from _loopback_lab(tmp_path)


@pytest.fixture
def short_lease_lab(tmp_path: Path):
    """Agents whose controller's lease lapses 3 s after its last request."""
    yield from _loopback_lab(tmp_path, lease=3.0)


def _loopback_lab(tmp_path: Path, lease: float | None = None):
    agents = [start_agent(loopback_popen, f"h{i}", "127.0.0.1", tmp_path, lease=lease) for i in (1, 2)]
    try:
        lab = Lab.of(h1={"control": "127.0.0.1", "port": agents[0].port},
                     h2={"control": "127.0.0.1", "port": agents[1].port}, insecure=True)
        path = tmp_path / "lab.toml"
        path.write_text(lab.to_toml())
        yield path
    finally:
        for a in agents:
            a.stop()  # SIGTERM: the agent stops the iperf3 servers it started


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netesto", "run", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_defines_progress_and_quiet(loopback_lab: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.script"
    script.write_text(SCRIPT.replace("ca=cubic", "ca=cubic delay=0.5"))
    work = tmp_path / "work"
    done = cli(str(script), "--lab", str(loopback_lab), "--workdir", str(work), "-D", "dur=1")
    assert done.returncode == 0, done.stdout + done.stderr
    # the flow's length and delay as written (it read "of 1.5 s": the two added up)
    assert "flows of 1 s" in done.stdout and "h1: 1 flow(s) of 1 s from 0.5 s in exp 1" in done.stdout
    assert "stored" in done.stdout and "done in" in done.stdout
    doc = json.loads((work / "1" / "experiment.json").read_text())
    assert doc["flows"][0]["dur"] == 1.0 and doc["flows"][0]["flow_id"] == "h1-h2-1-0"
    assert (work / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()
    # --quiet, script from stdin, the counter continues; a processed experiment prints no rate table
    quiet = cli("-", "--lab", str(loopback_lab), "--workdir", str(work), "-D", "dur=1", "--quiet",
                stdin=SCRIPT + "PROCESS_EXP exp=PREV\n")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    lines = quiet.stdout.strip().splitlines()
    assert len(lines) == 1 and "experiments 2" in lines[0] and "rate(Mbit/s)" not in quiet.stdout
    assert (work / "2" / "exp.html").is_file()
    assert (work / "counter").read_text().strip() == "2"


def test_bad_define_and_missing_lab(tmp_path: Path) -> None:
    script = tmp_path / "s.script"
    script.write_text(SCRIPT)
    bad = cli(str(script), "--lab", str(tmp_path / "nolab.toml"))
    assert bad.returncode == 2 and "lab file" in bad.stderr and "not found" in bad.stderr
    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.loopback(2).to_toml())
    bad = cli(str(script), "--lab", str(lab), "-D", "novalue")
    assert bad.returncode == 2 and "VAR=VALUE" in bad.stderr


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def _two_free_ports() -> int:
    """A base port free with the one after it, below the kernel's ephemeral range: 5201 may be someone
    else's on this host, and a port the kernel handed out once (bind to port 0) it hands out again to the
    connections of tests running beside this one ("Address already in use" for iperf3's listener)."""
    import random

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        base = random.randrange(10000, min(low, 30000) - 1)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", base))
                b.bind(("127.0.0.1", base + 1))
        except OSError:
            continue
        return base
    raise AssertionError("no two free ports below the ephemeral range")


def test_iperf3_driver_gets_a_server_per_flow(loopback_lab: Path, tmp_path: Path) -> None:
    from netesto.controller import run

    text = ("DO_SERVER host=h2 start=1\n"
            "DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S dur=1 driver=iperf3 instances=2\n"
            "WAIT 1\nGET_DATA host=h2\nGET_DATA host=h1\n")
    base = _two_free_ports()
    result = run(text, lab=loopback_lab, workdir=tmp_path / "w", iperf3_port=base)
    flows = tmp_path / "w" / str(result.exps[0]) / "flows"
    assert result[result.exps[0]].path == flows.parent
    for i in (0, 1):
        for side in ("client", "server"):
            assert (flows / f"h1-h2-1-{i}.{side}.nflow").is_file()
    # the iperf3 servers the agent started for the run end with it (they outlived runs by minutes)
    ports = {str(base), str(base + 1)}

    def iperf3_servers() -> list[str]:
        out = subprocess.run(["pgrep", "-af", "iperf3"], capture_output=True, text=True).stdout.splitlines()
        return [line for line in out if " -s" in line and ports & set(line.split())]

    deadline = time.monotonic() + 5
    while iperf3_servers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert iperf3_servers() == []


def test_controller_killed_then_collect_fetches_what_agents_kept(short_lease_lab: Path, tmp_path: Path) -> None:
    loopback_lab = short_lease_lab
    import os
    import signal
    import time

    script = tmp_path / "s.script"
    script.write_text(SCRIPT.replace("WAIT $dur", "WAIT 30"))
    work = tmp_path / "work"
    proc = subprocess.Popen([sys.executable, "-m", "netesto", "run", str(script), "--lab", str(loopback_lab),
                             "--workdir", str(work), "-D", "dur=1"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "flow(s) of" in line:
            break
    time.sleep(2.5)  # the 1 s flow has run
    os.kill(proc.pid, signal.SIGKILL)  # the controller dies before GET_DATA
    proc.wait(timeout=5)
    assert not (work / "1" / "flows").exists()
    # the agents cannot tell a killed controller from a live one until its lease lapses:
    # until then the lab is busy, and --collect says whose run holds it
    done = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(work))
    deadline = time.monotonic() + 15
    while done.returncode != 0 and time.monotonic() < deadline:
        assert "lab busy: run " in done.stderr and "claim lapses in" in done.stderr, done.stderr
        time.sleep(0.5)
        done = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(work))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored" in done.stdout
    assert (work / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()
    assert (work / "1" / "flows" / "h1-h2-1-0.server.nflow").is_file()
    again = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(work))
    assert again.returncode == 0 and "stored" not in again.stdout  # acknowledged: nothing left


def test_run_result_opens_the_dataset(loopback_lab: Path, tmp_path: Path) -> None:
    pytest.importorskip("xarray")
    from netesto.controller import run

    text = SCRIPT.replace("$dur", "1") + "PROCESS_EXP\n"
    result = run(text, lab=loopback_lab, workdir=tmp_path / "w")
    ds = result[1].dataset
    assert set(ds["flow"].values) == {"h1-h2-1-0"}
    with pytest.raises(KeyError, match="experiment 7"):
        result[7]



def test_flows_use_the_test_address_control_stays_on_the_control_address(tmp_path: Path) -> None:
    """Flowgrind's split: both agents are reached at 127.0.0.1; h2's flow server listens
    only on its test address 127.0.0.2, and the flow gets there."""
    from netesto.controller import run
    from netesto.controller.progress import HostError, RecordingProgress
    from netesto.errors import AgentError
    from netesto.raw.nflow import read_flow

    h1 = start_agent(loopback_popen, "h1", "127.0.0.1", tmp_path)
    h2 = start_agent(loopback_popen, "h2", "127.0.0.1", tmp_path, test_bind="127.0.0.2")
    try:
        lab = Lab.of(h1={"control": "127.0.0.1", "port": h1.port},
                     h2={"control": "127.0.0.1", "port": h2.port, "test": "127.0.0.2"}, insecure=True)
        result = run(SCRIPT.replace("$dur", "1"), lab=lab, workdir=tmp_path / "w")
        flows = tmp_path / "w" / str(result.exps[0]) / "flows"
        client = read_flow(flows / "h1-h2-1-0.client.nflow")
        server = read_flow(flows / "h1-h2-1-0.server.nflow")
        assert client.summary and client.summary["status"] == "ok", client.summary
        assert client.header["remote"][0] == "127.0.0.2", client.header
        assert server.header["local"][0] == "127.0.0.2", server.header
        # The same lab with the test address left out: flows go to 127.0.0.1, where h2
        # has no flow server. The failed flow is reported as such, with its reason.
        wrong = Lab.of(h1={"control": "127.0.0.1", "port": h1.port}, h2={"control": "127.0.0.1", "port": h2.port}, insecure=True)
        rec = RecordingProgress()
        # ... and the run ends with an error (it used to return as if all was well)
        with pytest.raises(AgentError, match=r"flow h1-h2-1-0 of experiment \d+ failed") as info:
            run(SCRIPT.replace("$dur", "1"), lab=wrong, workdir=tmp_path / "w", progress=rec)
        assert info.value.host == "h1" and info.value.kind == "FlowFailed"
        exp = info.value.detail.exps[0]
        errors = [ev.error for ev in rec.events if isinstance(ev, HostError)]
        assert any(f"flow h1-h2-1-0 of experiment {exp} failed" in e and "refused" in e for e in errors), errors
        doc = json.loads((tmp_path / "w" / str(exp) / "experiment.json").read_text())
        assert any("h1-h2-1-0" in e and "refused" in e for e in doc["errors"]), doc["errors"]
    finally:
        h1.stop()
        h2.stop()


@pytest.mark.alone
def test_progress_subclass_sees_flow_events_while_flows_run(loopback_lab: Path, tmp_path: Path) -> None:
    """The callback interface the notebook plugs into: ``on_<event>`` methods, flow progress
    relayed from the agents during the WAIT (before any GET_DATA), data stored after."""
    import threading

    from netesto.controller import Progress, run

    class Seen(Progress):
        def __init__(self) -> None:
            self.order: list[str] = []
            self.lock = threading.Lock()

        def _add(self, what: str) -> None:
            with self.lock:
                self.order.append(what)

        def on_flow_progress(self, e) -> None:
            if e.flow == "h1-h2-1-0":
                self._add(f"flow:{e.event}")

        def on_action_started(self, e) -> None:
            self._add(f"action:{e.kind}")

        def on_data_stored(self, e) -> None:
            self._add(f"stored:{e.host}")

    seen = Seen()
    # the WAIT outlasts the 2 s flow by 2 s: a loaded machine starts a flow up to ~1.5 s into it (the start
    # lead), and the flow's progress must come while the WAIT still runs
    run(SCRIPT.replace("$dur", "2").replace("WAIT 2", "WAIT 4"), lab=loopback_lab, workdir=tmp_path / "w",
        progress=seen)
    order = seen.order
    first_get = order.index("action:GET_DATA")
    during = order[:first_get]
    assert "flow:started" in during and "flow:progress" in during, order
    assert order.index("action:WAIT") < max(i for i, w in enumerate(during) if w == "flow:progress"), order  # relayed during the WAIT
    assert "flow:done" in order, order
    assert {"stored:h1", "stored:h2"} <= set(order[first_get:]), order


def test_ctrl_c_keeps_the_description_of_experiments_already_fetched(loopback_lab: Path, tmp_path: Path) -> None:
    # An interrupted run used to skip writing experiment.json, even for an experiment
    # whose data was all fetched: its script, flows and clock offsets were lost.
    import threading

    from netesto.controller import run
    from netesto.controller.progress import DataStored
    from netesto.errors import RunInterrupted

    cancel = threading.Event()
    stored: list[str] = []

    def progress(event: object) -> None:
        if isinstance(event, DataStored):
            stored.append(event.host)
            if len(stored) == 2:
                cancel.set()  # both hosts of experiment 1 are stored: "Ctrl-C"

    text = SCRIPT.replace("$dur", "1") + "DO_CLIENT host=h1 server=h2 dur=30 exp=COUNTER\nWAIT 30\nGET_DATA host=h1\n"
    work = tmp_path / "w"
    with pytest.raises(RunInterrupted) as info:
        run(text, lab=loopback_lab, workdir=work, progress=progress, cancel=cancel)
    meta = json.loads((work / "1" / "experiment.json").read_text())
    assert meta["exp"] == 1 and [f["flow_id"] for f in meta["flows"]] == ["h1-h2-1-0"]
    result = info.value.result
    assert result.interrupted and not result.ok and result.exps == [1, 2] and info.value.exit_code == 130


def test_an_interrupted_run_keeps_processes_and_marks_what_it_collected(loopback_lab: Path, tmp_path: Path) -> None:
    # Ctrl-C used to leave the flows' data on the agents (and block the next run with it).
    import threading

    from netesto.controller import run
    from netesto.controller.progress import FlowProgress
    from netesto.errors import RunInterrupted

    cancel = threading.Event()

    def progress(event: object) -> None:
        if isinstance(event, FlowProgress) and event.event == "progress" and event.exp == 1:
            cancel.set()  # the 30 s flow is running: "Ctrl-C"

    text = SCRIPT.replace("$dur", "30")
    work = tmp_path / "w"
    t0 = time.monotonic()
    with pytest.raises(RunInterrupted) as info:
        run(text, lab=loopback_lab, workdir=work, progress=progress, cancel=cancel)
    assert time.monotonic() - t0 < 25  # did not sit out the flow
    result = info.value.result
    assert result.interrupted and result.exps == [1] and "interrupted" in str(info.value)
    meta = json.loads((work / "1" / "experiment.json").read_text())
    assert meta["interrupted"] is True
    ds = result[1].dataset
    assert ds.attrs["interrupted"] == 1 and float(ds.goodput.sum()) > 0
    # h2's "after" snapshot, which the script's end never took, is taken on the way out: its counters'
    # deltas are there (h2 took in the flow's segments), and no snapshot is reported missing
    assert (work / "1" / "1" / "h2.netstat").is_file()
    delta = ds.host_delta.sel(node="h2")
    assert float(delta.sel(counter="Tcp.InSegs")) > 0
    errors = work / "1" / "errors.txt"
    assert "no snapshot of" not in (errors.read_text() if errors.exists() else "")
    agent_data = [p for p in tmp_path.glob("agent-h*/1") if p.is_dir()]
    assert agent_data == [], agent_data  # everything was fetched: the next run is not blocked


def test_a_run_does_not_overwrite_data_an_agent_kept_from_an_earlier_run(loopback_lab: Path, tmp_path: Path) -> None:
    # Another workdir's run was interrupted in its experiment 1: h2 keeps that data for
    # --collect. A run in a fresh workdir (counter 0 -> experiment 1) used to note it,
    # then write its own experiment 1 over it, losing the earlier flow's samples.
    from netesto.controller import run
    from netesto.errors import AgentError

    old = tmp_path / "agent-h2" / "1" / "flows" / "h1-h2-1-0.client.nflow"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"earlier run's samples")
    with pytest.raises(AgentError) as err:
        run(SCRIPT.replace("$dur", "1"), lab=loopback_lab, workdir=tmp_path / "w")
    assert err.value.host == "h2"
    assert "h2: holds unfetched data of experiment 1" in str(err.value) and "--collect" in str(err.value)
    assert old.read_bytes() == b"earlier run's samples"
    assert not (tmp_path / "w" / "1" / "flows" / "h1-h2-1-0.client.nflow").exists()
    # Once collected elsewhere, the same run goes ahead.
    done = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(tmp_path / "old"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "old" / "1" / "flows" / "h1-h2-1-0.client.nflow").read_bytes() == b"earlier run's samples"
    result = run(SCRIPT.replace("$dur", "1"), lab=loopback_lab, workdir=tmp_path / "w2")
    assert result.ok and result.exps == [1]


def test_a_workdir_that_cannot_be_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    # --workdir naming a file (or a path below one) ended in a FileExistsError traceback.
    script = tmp_path / "s.script"
    script.write_text(SCRIPT)
    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.loopback(2).to_toml())
    afile = tmp_path / "afile"
    afile.write_text("")
    for work in (afile, afile / "sub"):
        for args in ((str(script),), ("--collect",)):
            bad = cli(*args, "--lab", str(lab), "--workdir", str(work))
            assert bad.returncode == 2, bad.stderr
            assert "Traceback" not in bad.stderr and f"workdir {work}" in bad.stderr, bad.stderr


def test_a_script_that_is_not_utf8_is_an_error_at_its_line(tmp_path: Path) -> None:
    # `netesto run` ended in a UnicodeDecodeError traceback (plan said "<file>:0:0").
    script = tmp_path / "s.script"
    script.write_bytes(b"SET a=1\nECHO caf\xe9\n")
    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.loopback(2).to_toml())
    bad = cli(str(script), "--lab", str(lab), "--workdir", str(tmp_path / "w"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert f"{script}:2:9: error: not UTF-8 text" in bad.stderr, bad.stderr
    from netesto.errors import ScriptError
    from netesto.script import Interpreter

    with pytest.raises(ScriptError) as err:
        Interpreter().run_file(script)
    assert (err.value.line, err.value.column) == (2, 9)


def test_flow_server_refuses_a_port_out_of_range(tmp_path: Path) -> None:
    # `netesto flow server --port 99999` used to listen on 34463 (99999 mod 65536) and say so.
    for bad in (["--port", "99999"], ["--port", "-1"], ["--workers", "-2"]):
        done = subprocess.run([sys.executable, "-m", "netesto", "flow", "server", *bad, "--datadir", str(tmp_path)],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and "listening" not in done.stdout, done.stdout + done.stderr
        assert bad[0] in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_keys_into_a_path_that_cannot_be_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    done = subprocess.run([sys.executable, "-m", "netesto", "keys", str(afile), "--name", "c"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "Traceback" not in done.stderr and str(afile) in done.stderr, done.stderr


def test_an_unknown_host_is_reported_at_its_script_line(tmp_path: Path) -> None:
    # The LabError named the host and the lab's hosts but not where the script used it.
    script = tmp_path / "s.script"
    script.write_text("SET c=h3\nDO_SERVER host=h1 start=1\n\nDO_CLIENT host=$c server=h1 dur=1\n")
    lab = tmp_path / "lab.toml"
    lab.write_text(Lab.loopback(2).to_toml())
    bad = cli(str(script), "--lab", str(lab), "--workdir", str(tmp_path / "w"))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert f"{script}:4: host 'h3' is not in lab" in bad.stderr and "did you mean" in bad.stderr, bad.stderr


@pytest.mark.parametrize("signals", [("SIGTERM",), ("SIGHUP",), ("SIGINT", "SIGINT", "SIGINT")])
def test_signals_stop_the_run_with_its_data_kept(loopback_lab: Path, tmp_path: Path, signals: tuple[str, ...]) -> None:
    # SIGTERM (rc 143) and a third Ctrl-C (rc 130) left flows running and hosts changed until
    # the lease expired. Now each stops the run as the first Ctrl-C does; later ones hurry it.
    import signal

    work = tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "netesto", "run", "-", "--lab", str(loopback_lab),
                             "--workdir", str(work), "-D", "dur=30", "-v"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(SCRIPT)
    proc.stdin.close()
    t0 = time.monotonic()
    for line in proc.stdout:
        if ": progress" in line:  # a flow runs and has samples
            break
    t0 = time.monotonic()  # the 30 s flow has 28 s or more to go
    for name in signals:
        proc.send_signal(getattr(signal, name))
        time.sleep(0.05)
    proc.wait(timeout=40)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    assert proc.returncode == 128 + getattr(signal, signals[0]), out + err  # 143 for SIGTERM, as a shell reports it
    assert time.monotonic() - t0 < 40 and "interrupted" in err, err
    from netesto.raw.nflow import read_flow

    flow = read_flow(work / "1" / "flows" / "h1-h2-1-0.client.nflow").summary  # the 30 s flow, stopped early
    assert flow["status"] == "error" and flow["duration"] < 15 and "stopped by SIGTERM" in flow["error"], flow
    meta = json.loads((work / "1" / "experiment.json").read_text())
    assert meta["interrupted"] is True
    if len(signals) == 1:
        assert (work / "1" / "exp.nc").exists()
        assert not [p for p in tmp_path.glob("agent-h*/1") if p.is_dir()]  # nothing left behind on the agents
    else:  # the later Ctrl-C skipped the waits and the processing: the raw data and experiment.json stay
        assert "not processed" in err and "netesto.process_experiment" in err, err
        assert (work / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()


def test_a_wrong_agent_key_fails_the_run_within_seconds_naming_host_and_key(tmp_path: Path) -> None:
    # A wrong CURVE key used to cost 10 s a host, and the script then ran anyway (35 s for a 5 s one).
    from .agentproc import make_keys

    keys = make_keys(tmp_path / "keys")
    agents = [start_agent(loopback_popen, f"h{i}", "127.0.0.1", tmp_path, keys=keys) for i in (1, 2)]
    try:
        wrong, _ = keys.agent("stranger")
        lab = tmp_path / "lab.toml"
        lab.write_text(f"""[lab]
name = "wrongkey"
controller_key = "{keys.controller_secret}"
[hosts.h1]
control = "127.0.0.1"
port = {agents[0].port}
public_key = "{keys.agent('h1')[0]}"
[hosts.h2]
control = "127.0.0.1"
port = {agents[1].port}
public_key = "{wrong}"
""")
        t0 = time.monotonic()
        done = cli("-", "--lab", str(lab), "--workdir", str(tmp_path / "w"), "-D", "dur=5", stdin=SCRIPT)
        assert time.monotonic() - t0 < 15  # the interpreter's start-up and h1's session included
        assert done.returncode != 0, done.stdout + done.stderr
        assert "h2" in done.stderr and "public key in the lab file does not match" in done.stderr, done.stderr
        assert "flows of 5 s" not in done.stdout  # nothing ran
    finally:
        for a in agents:
            a.stop()


def test_a_run_whose_flows_the_engine_refuses_exits_non_zero(loopback_lab: Path, tmp_path: Path) -> None:
    done = cli("-", "--lab", str(loopback_lab), "--workdir", str(tmp_path / "w"), "-D", "dur=604800",
               stdin=SCRIPT.replace("WAIT $dur", "WAIT 1"))
    assert done.returncode != 0, done.stdout + done.stderr
    assert "h1" in done.stderr, done.stderr


def test_a_second_controller_finds_the_lab_busy_and_touches_nothing(loopback_lab: Path, tmp_path: Path) -> None:
    # Run B's end-of-run restore used to reset h3's settings under run A's flows, and a
    # --collect during A took A's data (split 53/76 across two workdirs).
    import threading

    from netesto.controller import run
    from netesto.controller.progress import FlowProgress
    from netesto.errors import RunInterrupted

    running, cancel = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def progress(event: object) -> None:
        if isinstance(event, FlowProgress) and event.event == "progress":
            running.set()

    def run_a() -> None:
        try:
            run(SCRIPT.replace("$dur", "30"), lab=loopback_lab, workdir=tmp_path / "a", progress=progress, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    a = threading.Thread(target=run_a)
    a.start()
    try:
        assert running.wait(20), "run A's flow did not start"
        b = cli("-", "--lab", str(loopback_lab), "--workdir", str(tmp_path / "b"), "-D", "dur=1", stdin=SCRIPT)
        assert b.returncode != 0 and "lab busy: run " in b.stderr and "claimed by a controller" in b.stderr, b.stderr
        assert "flows of 1 s" not in b.stdout  # B ran nothing
        collect_b = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(tmp_path / "c"))
        assert collect_b.returncode != 0 and "lab busy" in collect_b.stderr, collect_b.stdout + collect_b.stderr
        assert not list((tmp_path / "c").glob("*/flows"))  # took none of A's data
    finally:
        cancel.set()
        a.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], RunInterrupted), outcome
    flows = tmp_path / "a" / "1" / "flows"
    assert (flows / "h1-h2-1-0.client.nflow").is_file() and (flows / "h1-h2-1-0.server.nflow").is_file()


@pytest.fixture
def tiny_workdir(tmp_path: Path):
    """A 64 KiB tmpfs: the workdir fills up while the run stores its data."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_workdir_ends_the_run_with_one_error_and_the_agents_keep_the_data(
        loopback_lab: Path, tmp_path: Path, tiny_workdir: Path) -> None:
    # A full disk gave three chained tracebacks, a crash inside cleanup, and hosts left
    # changed until the lease expired.
    done = cli("-", "--lab", str(loopback_lab), "--workdir", str(tiny_workdir / "w"), "-D", "dur=2", stdin=SCRIPT)
    assert done.returncode not in (0, 130), done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "No space left on device" in done.stderr and "netesto run: error:" in done.stderr, done.stderr
    # nothing was acknowledged that was not written: the agents keep it for --collect
    kept = [p for p in tmp_path.glob("agent-h*/1/flows/*.nflow")]
    assert kept, list(tmp_path.glob("agent-h*/**"))
    again = cli("--collect", "--lab", str(loopback_lab), "--workdir", str(tmp_path / "roomy"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "roomy" / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()


def test_run_prints_the_rate_table_and_where_the_report_is(loopback_lab: Path, tmp_path: Path) -> None:
    # `netesto run` printed no rate table and did not say where exp.html is (the demo does both).
    work = tmp_path / "w"
    done = cli("-", "--lab", str(loopback_lab), "--workdir", str(work), "-D", "dur=1",
               stdin=SCRIPT + "PROCESS_EXP exp=PREV\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rate(Mbit/s)" in done.stdout and "\n  1.0    all " in done.stdout, done.stdout
    assert f"report: {work}/1/exp.html (open it in a browser)" in done.stdout, done.stdout
    # --quiet prints no table (test_defines_progress_and_quiet); -q is --quiet
    import argparse

    from netesto.commands import run as run_command

    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    assert parser.parse_args(["-", "--lab", "lab.toml", "-q"]).quiet is True


def test_a_controller_frozen_past_its_lease_exits_non_zero_saying_why(short_lease_lab: Path, tmp_path: Path) -> None:
    # A controller stopped (SIGSTOP, a suspended laptop) past its lease: the agents stop the
    # flows and restore. The run used to carry on and exit 0 as if the flows had run.
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "netesto", "run", "-", "--lab", str(short_lease_lab),
                             "--workdir", str(tmp_path / "w"), "-D", "dur=10", "-v"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(SCRIPT)
    proc.stdin.close()
    for line in proc.stdout:
        if ": progress" in line:
            break
    proc.send_signal(signal.SIGSTOP)
    time.sleep(5)  # the agents' lease is 3 s: they stop the flow meanwhile
    proc.send_signal(signal.SIGCONT)
    proc.wait(timeout=60)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    assert proc.returncode not in (0, 130), out + err
    assert "lease expired" in err and "h1-h2-1-0" in err, err
    assert (tmp_path / "w" / "1" / "flows" / "h1-h2-1-0.client.nflow").is_file()  # what ran is kept
