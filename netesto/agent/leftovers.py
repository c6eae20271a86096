"""What an agent started and nobody stops: found by the mark its processes carry, stopped by the next agent.

Every process an agent starts (the engine, iperf3, netserver, tcpdump, the collectors, and what they
start in turn) inherits :data:`MARK`: the agent's pid and start time (:func:`netesto.proctable.identity`)
and its data directory, which is what makes a restarted agent the same agent. They get SIGTERM when the
agent dies, and the engine and the collectors also stop when they see their parent gone; but netserver's
children, a tool that blocks or ignores the signal, or a signal lost in a handler would go on with
nobody to stop them, serving ports and holding CPUs the next experiment needs. An agent starting on a
data directory finds the processes marked with that directory whose agent no longer runs, and stops
them: SIGTERM, so an engine still ends its files (which the new agent then serves) and tcpdump its
capture, then SIGKILL for any left :data:`GRACE` seconds later. It never touches the processes of an
agent that runs, nor those of other data directories (other agents on the same host, one per
namespace, each restarted on its own), nor itself or its ancestors. An agent that stops cleanly stops
in the same way what it started and is still running (:func:`stop_own`), before it exits.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable

from netesto.proctable import ancestors, command, env_value, identity, pid_of, pids, runs, stat

log = logging.getLogger("netesto.agent")

MARK = "NETESTO_AGENT_ID"  # "PID.START DATADIR" of the agent a process was started under
GRACE = 3.0  # seconds a SIGTERMed leftover has to end before SIGKILL
KILLED = 2.0  # seconds a SIGKILLed leftover may take to be gone (a loaded machine schedules its exit late)
POLL = 0.05


def mark(datadir: Path | str, pid: int | None = None) -> str:
    """The mark of the agent ``pid`` (this process) serving ``datadir``."""
    return f"{identity(os.getpid() if pid is None else pid)} {Path(datadir).resolve()}"


def mark_children(datadir: Path | str) -> str:
    """Mark every process this agent starts from now on as its own; the mark."""
    os.environ[MARK] = mine = mark(datadir)
    return mine


def _marked(keep: Callable[[str, str], bool]) -> dict[str, str]:
    """Processes whose mark ``keep(agent, datadir)`` takes, by identity: the agent each was started under.
    Never this process or its ancestors, nor a zombie."""
    me = os.getpid()
    spared = {me, *ancestors(me)}
    left = {}
    for pid in pids():
        if pid in spared:
            continue
        st = stat(pid)
        if st is None or st.state == "Z":
            continue
        agent, _, where = (env_value(pid, MARK) or "").partition(" ")
        if agent and keep(agent, where):
            left[f"{pid}.{st.start}"] = agent
    return left


def found(datadir: Path | str) -> dict[str, str]:
    """Processes marked with ``datadir`` whose agent no longer runs, by :func:`~netesto.proctable.identity`:
    the agent each was started under (its identity)."""
    ours = str(Path(datadir).resolve())
    dead: dict[str, bool] = {}

    def gone(agent: str, where: str) -> bool:
        if where != ours:
            return False
        if agent not in dead:
            dead[agent] = not runs(agent)
        return dead[agent]
    return _marked(gone)


def stop_leftovers(datadir: Path | str, grace: float = GRACE) -> list[str]:
    """Stop what :func:`found` finds; each process stopped, described (pid, command, its agent, how it ended)."""
    return _stop(found(datadir), grace, "left by an earlier agent, stopped")


def stop_own(grace: float = GRACE) -> list[str]:
    """At the agent's clean stop: stop what it started and is still running (its mark: netserver's children,
    a tool that ignored its stop), so a stopped agent leaves nothing behind; each described as above."""
    mine = os.environ.get(MARK, "")
    return _stop(_marked(lambda agent, where: f"{agent} {where}" == mine), grace,
                 "still running as the agent stopped, stopped")


def _stop(left: dict[str, str], grace: float, said_as: str) -> list[str]:
    """SIGTERM to each of ``left``; SIGKILL to any still running ``grace`` s later, waited for (:data:`KILLED`)."""
    if not left:
        return []
    said = {ident: f"pid {pid_of(ident)} ({command(pid_of(ident), 120) or '?'}) of agent {pid_of(agent)}"
            for ident, agent in left.items()}
    for ident in left:
        _signal(ident, signal.SIGTERM)
    deadline = time.monotonic() + grace
    running = [ident for ident in left if runs(ident)]
    while running and time.monotonic() < deadline:
        time.sleep(POLL)
        running = [ident for ident in running if runs(ident)]
    for ident in running:
        _signal(ident, signal.SIGKILL)
    deadline = time.monotonic() + KILLED  # gone before the agent listens (or exits): their ports and CPUs free
    while any(runs(ident) for ident in running) and time.monotonic() < deadline:
        time.sleep(POLL / 5)
    told = [said[ident] + (f": killed, still running {grace:g} s after SIGTERM" if ident in running
                           else ": ended on SIGTERM") for ident in left]
    for line in told:
        log.warning("%s: %s", said_as, line)
    return told


def _signal(ident: str, sig: int) -> None:
    """Signal the process ``ident`` names, if it still runs (a pid alone may be another's by now)."""
    if not runs(ident):
        return
    try:
        os.kill(pid_of(ident), sig)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["GRACE", "MARK", "found", "mark", "mark_children", "stop_leftovers", "stop_own"]
