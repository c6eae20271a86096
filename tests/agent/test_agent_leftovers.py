"""An agent stops, as it starts, what an earlier agent left running; and nothing of an agent that runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from netesto.agent.leftovers import MARK, found, mark, stop_leftovers
from netesto.controller.claim import default_client_factory
from netesto.controller.lab import Lab
from netesto.controller.progress import Notice
from netesto.controller.session import Sessions
from netesto.procs import SPARE_NAME
from netesto.proctable import command, env_value, identity, pid_of, read, runs
from tests.agent.agentproc import wait_for
from tests.leftovers import children

# A stand-in netserver that forks a child per "connection", as netserver does: the death signal the agent
# set on netserver is cleared in the child by fork, so a killed agent takes netserver with it but not the
# child serving a test. One child ends on SIGTERM; the other ignores it.
NETSERVER = """#!{python}
import os, signal, sys, time
for ignore in (False, True):
    if os.fork() == 0:
        if ignore:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(120)
        os._exit(0)
open({ready!r}, "w").write("up")
time.sleep(120)
"""


def _stand_in_netserver(tmp_path) -> tuple:
    """A directory holding :data:`NETSERVER` as ``netserver``, and the file it writes once it has forked."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ready = tmp_path / "netserver.up"
    script = bindir / "netserver"
    script.write_text(NETSERVER.format(python=sys.executable, ready=str(ready)))
    script.chmod(0o755)
    return bindir, ready


def _sleeper(mark: str | None, *, ignore_term: bool = False) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != MARK}
    if mark is not None:
        env[MARK] = mark
    code = ("import signal, time\n" + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
            + "print('up', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    return proc


def _dead_agent(datadir) -> str:
    """The mark of an agent on ``datadir`` that ran and is gone."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    theirs = mark(datadir, gone.pid)
    gone.wait()
    return theirs


def test_only_processes_of_a_gone_agent_on_the_same_data_directory_are_leftovers(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    live = _sleeper(mark(here))  # this process is alive: its mark is a live agent's
    orphan = _sleeper(_dead_agent(here))
    reused = _sleeper(f"{os.getpid()}.1 {here}")  # a live pid, started at another time: the pid was reused
    elsewhere = _sleeper(_dead_agent(there))  # another agent's: restarted on its own data directory, it stops it
    unmarked = _sleeper(None)
    try:
        left = {pid_of(ident) for ident in found(here)}
        assert left == {orphan.pid, reused.pid}
        assert {pid_of(ident) for ident in found(there)} == {elsewhere.pid}
    finally:
        for p in (live, orphan, reused, elsewhere, unmarked):
            p.kill()
            p.wait()


def test_leftovers_get_sigterm_then_sigkill_and_are_described(tmp_path):
    dead = _dead_agent(tmp_path)
    polite = _sleeper(dead)
    stubborn = _sleeper(dead, ignore_term=True)
    bystander = _sleeper(mark(tmp_path))
    try:
        t0 = time.monotonic()
        told = stop_leftovers(tmp_path, grace=0.5)
        took = time.monotonic() - t0
        assert len(told) == 2
        ours = {line.split()[1]: line for line in told}
        assert ours[str(polite.pid)].endswith("ended on SIGTERM"), told
        assert ours[str(stubborn.pid)].endswith("killed, still running 0.5 s after SIGTERM"), told
        assert f"of agent {dead.partition('.')[0]}" in ours[str(polite.pid)] and "python" in ours[str(polite.pid)]
        assert took >= 0.5
        assert polite.wait(5) == -signal.SIGTERM and stubborn.wait(5) == -signal.SIGKILL
        assert bystander.poll() is None  # its agent (this process) runs
    finally:
        for p in (polite, stubborn, bystander):
            p.kill()
            p.wait()


def test_an_agent_stops_what_a_killed_agent_left_running_and_tells_the_controller(agents, keys, tmp_path):
    bindir, ready = _stand_in_netserver(tmp_path)
    first = agents(keys=None, extra=("--insecure", "--test-bind", "127.0.0.1"), tag="first",
                   env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    with first.client() as c:
        [server] = c.prepare_server(1, driver="netperf", ports=[12998]).pids
    assert wait_for(ready.exists, timeout=10.0)
    served = children(server)
    assert len(served) == 2
    idents = [identity(pid) for pid in served]
    netserver = identity(server)
    try:
        first.kill()  # SIGKILL: netserver gets its death signal, the children it forked do not
        assert wait_for(lambda: not runs(netserver), timeout=5.0)
        time.sleep(0.5)
        assert all(runs(ident) for ident in idents), "the forked children should outlive the killed agent"
        # An agent on another data directory leaves them be; the agent restarted on this one stops them.
        other = agents(keys=None, extra=("--insecure",), tag="other")
        assert all(runs(ident) for ident in idents)
        with other.client() as c:
            assert c.hello().stopped_at_start == []
        second = agents(keys=None, extra=("--insecure",), tag="second", datadir=first.datadir)
        assert not any(runs(ident) for ident in idents)
        with second.client() as c:
            said = c.hello().stopped_at_start
        ours = [line for line in said if int(line.split()[1]) in served]
        assert len(ours) == 2 and len(said) == 2, said
        assert sum(line.endswith("ended on SIGTERM") for line in ours) == 1
        assert sum("killed, still running" in line for line in ours) == 1
        assert all(f"of agent {first.proc.pid}" in line and "netserver" in line for line in ours)
        assert "left by an earlier agent, stopped" in second.log_text()
        notices: list[Notice] = []
        lab = Lab.loopback(1, base_port=second.port)
        sessions = Sessions(lab, default_client_factory, run_id="leftovers", emit=notices.append,
                            on_event=lambda host, ev: None)
        try:
            sessions.open("h1")
        finally:
            sessions.close()
        [notice] = [n for n in notices if isinstance(n, Notice) and "earlier agent left running" in n.text]
        assert notice.host == "h1" and "netserver" in notice.text
        with second.client() as c:  # told to the run that claimed the agent, not to every run after it
            assert c.hello().stopped_at_start == []
    finally:
        for ident in idents:
            if runs(ident):
                os.kill(pid_of(ident), signal.SIGKILL)


@pytest.mark.parametrize("who", ["self", "parent"])
def test_an_agent_never_stops_itself_or_its_ancestors_whatever_their_mark(who, tmp_path):
    code = ("import os, json; from netesto.agent.leftovers import found; "
            "print(json.dumps({'me': os.getpid(), 'parent': os.getppid(), "
            "'left': [int(i.split('.')[0]) for i in found(os.environ['DATADIR'])]}))")
    inner = [sys.executable, "-c", code]
    argv = inner if who == "self" else [sys.executable, "-c",
                                        f"import subprocess, sys; sys.stdout.write(subprocess.run({inner!r}, "
                                        "capture_output=True, text=True).stdout)"]
    proc = subprocess.run(argv, env={**os.environ, MARK: _dead_agent(tmp_path), "DATADIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["me"] not in got["left"]
    assert (got["parent"] not in got["left"]) if who == "parent" else got["parent"] == os.getpid()


def test_every_process_an_agent_starts_carries_its_mark_the_spare_started_with_it_too(agents, tmp_path):
    agent = agents(keys=None, extra=("--insecure",))
    assert wait_for(lambda: any(read(pid, "comm").strip() == SPARE_NAME.encode() for pid in children(agent.proc.pid)))
    theirs = mark(agent.datadir, agent.proc.pid)
    started = children(agent.proc.pid)
    assert started and all(env_value(pid, MARK) == theirs for pid in started), \
        {pid: (command(pid), env_value(pid, MARK)) for pid in started}


def test_an_agent_that_stops_cleanly_leaves_nothing_it_started_behind(agents, tmp_path):
    bindir, ready = _stand_in_netserver(tmp_path)
    agent = agents(keys=None, extra=("--insecure", "--test-bind", "127.0.0.1"),
                   env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    with agent.client() as c:
        [server] = c.prepare_server(1, driver="netperf", ports=[12997]).pids
    assert wait_for(ready.exists, timeout=10.0)
    idents = [identity(pid) for pid in children(server)]
    assert len(idents) == 2
    try:
        agent.proc.send_signal(signal.SIGTERM)  # a clean stop: netserver goes, and the agent sees to its children
        assert agent.proc.wait(timeout=30) == 0
        assert not any(runs(ident) for ident in idents)
        pids = {pid_of(ident) for ident in idents}
        stopped = [line for line in agent.log_text().splitlines() if "still running as the agent stopped" in line
                   and int(re.search(r"pid (\d+) ", line).group(1)) in pids]  # (netserver itself may be ending)
        assert len(stopped) == 2 and all("netserver" in line for line in stopped), agent.log_text()
        assert sum("killed, still running" in line for line in stopped) == 1
    finally:
        for ident in idents:
            if runs(ident):
                os.kill(pid_of(ident), signal.SIGKILL)
