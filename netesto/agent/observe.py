"""Kernel traces and socket watches an agent runs for an experiment: started, stopped, their ends reported.

Each is a process of its own (``python -m netesto.collectors.tcpprobe`` or
``...sockwatch``, tied to the agent's life), so the agent's loop never does
their per-tick or per-page work. A start replies once the collector is armed
(it prints ``ready``); a stop signals it and replies at once, saying whether it
has finished (a trace decodes and splits its events after the signal): the
controller asks again until it has. While one runs, the experiment's data is
not complete: ``fetch_list`` names it and ``ack`` refuses, as for tcpdump.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError, NetestoError
from netesto.procs import parent_death_signal
from netesto.protocol.commands import TraceStartArgs, TraceStopArgs, WatchStartArgs, WatchStopArgs
from netesto.protocol.replies import ObserverReply, TraceStartReply, TraceStopReply, WatchStartReply, WatchStopReply

log = logging.getLogger("netesto.agent.observe")
READY_WAIT = 10.0  # s for a collector to arm (a tracefs instance with big buffers takes a while)
STOP_WAIT = 2.0  # s a stop request waits for collectors to finish before replying "not yet"


@dataclass
class Observer:
    """One collector process and what it said."""

    exp: str
    kind: str  # "trace" or "watch"
    name: str
    proc: subprocess.Popen[bytes]
    spec_path: str
    state: str = "running"  # running, stopping, done, error
    summary: dict[str, Any] | None = None
    error: str = ""
    out: bytes = b""

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "pid": self.proc.pid, "state": self.state}
        if self.summary is not None:
            out["summary"] = self.summary
        if self.error:
            out["error"] = self.error
        return out

    def collect(self) -> None:
        """Read what it printed; once it exited, its last word (done with a summary, or an error)."""
        if self.state in ("done", "error"):
            return
        stdout = self.proc.stdout
        assert stdout is not None
        while select.select([stdout], [], [], 0)[0]:
            chunk = os.read(stdout.fileno(), 1 << 16)
            if not chunk:
                break
            self.out += chunk
        if self.proc.poll() is None:
            return
        self.state, self.error = "error", f"{self.kind} {self.name} exited with status {self.proc.returncode}"
        for line in self.out.decode(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "done":
                self.state, self.summary, self.error = "done", event.get("summary"), ""
            elif event.get("event") == "error":
                self.error = str(event.get("message"))
        try:
            os.unlink(self.spec_path)
        except OSError:
            pass


class Observers:
    """The traces and watches of every experiment on this agent."""

    def __init__(self, store: DataStore, host: str) -> None:
        self.store = store
        self.host = host.split(".")[0]
        self.items: list[Observer] = []
        self._n = 0
        self._remove_leftovers()

    @staticmethod
    def _remove_leftovers() -> None:
        """tracefs instances of agents that died before their traces ended (their events still on)."""
        from netesto.collectors.tracefs import INSTANCE_PREFIX, Instance, leftover_instances

        for name in leftover_instances(""):
            pid = name[len(INSTANCE_PREFIX):].split("-", 1)[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    Instance(name).remove()
                    log.warning("removed tracefs instance %s, left by agent pid %s", name, pid)
                except NetestoError as exc:
                    log.warning("%s", exc.message)

    def _start(self, exp: str, kind: str, name: str, module: str, spec_json: str) -> Observer:
        self._n += 1
        spec_path = self.store.write_private_json(f"{kind}-{exp}-{os.getpid()}-{self._n}.json", spec_json)
        errlog = open(self.store.private / f"{kind}-{exp}-{self._n}.stderr", "wb")
        try:
            proc = subprocess.Popen([sys.executable, "-m", module, "--spec", str(spec_path)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=errlog, preexec_fn=parent_death_signal())
        except OSError as exc:
            raise AgentError(f"cannot start the {kind} collector: {exc}", kind="Unavailable") from exc
        finally:
            errlog.close()
        obs = Observer(exp, kind, name, proc, str(spec_path))
        deadline = time.monotonic() + READY_WAIT
        assert proc.stdout is not None
        while b"\n" not in obs.out and proc.poll() is None and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 0.05)[0]:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                obs.out += chunk
        first = obs.out.split(b"\n", 1)[0]
        try:
            event = json.loads(first) if first else {}
        except ValueError:
            event = {}
        if event.get("event") != "ready":
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            obs.collect()
            why = event.get("message") or obs.error or "not ready in time"
            raise AgentError(f"{kind} {name} on {self.host} failed to start: {why}", kind="Unavailable")
        self.items.append(obs)
        return obs

    def trace_start(self, args: TraceStartArgs) -> TraceStartReply:
        from netesto.collectors.tcpprobe import DEFAULT_EVENTS, TraceSpec

        name = exp_name(args.exp)  # another trace of the experiment may run: the controller gives each new ports
        instance = f"netesto-{os.getpid()}-{name}-{self._n + 1}"[:64]
        try:
            spec = TraceSpec(exp=name, datadir=str(self.store.root), host=self.host, instance=instance,
                             ports=tuple(int(p) for p in args.ports), buffer_kb=args.buffer_kb,
                             spool=str(self.store.private / f"{instance}.spool"),
                             events=tuple(args.events or DEFAULT_EVENTS))
        except (NetestoError, TypeError, ValueError) as exc:
            raise AgentError(f"bad trace request: {getattr(exc, 'message', exc)}", kind="UsageError") from exc
        self.store.exp_dir(name)
        obs = self._start(name, "trace", instance, "netesto.collectors.tcpprobe", spec.to_json())
        return TraceStartReply(name, True, [obs.report()])

    def watch_start(self, args: WatchStartArgs) -> WatchStartReply:
        from netesto.collectors.watchspec import FlowMatch, WatchSpec

        name = exp_name(args.exp)
        if any(o.exp == name and o.kind == "watch" and o.name == args.name and o.state == "running"
               for o in self.items):
            raise AgentError(f"watch {args.name} of experiment {name} already runs on {self.host}", kind="Busy")
        try:
            flows = tuple(FlowMatch(**f) for f in args.flows or ())
            spec = WatchSpec(exp=name, datadir=str(self.store.root), host=self.host, name=args.name,
                             interval=float(args.interval), ports=tuple(args.ports or ()),
                             local_ports=tuple(args.local_ports or ()), remote_ports=tuple(args.remote_ports or ()),
                             addresses=tuple(args.addresses or ()), cgroup=args.cgroup, pid=args.pid, flows=flows,
                             moves=tuple(args.moves or ()))
        except (NetestoError, TypeError, ValueError) as exc:
            raise AgentError(f"bad watch request: {getattr(exc, 'message', exc)}", kind="UsageError") from exc
        self.store.exp_dir(name)
        obs = self._start(name, "watch", args.name, "netesto.collectors.sockwatch", spec.to_json())
        return WatchStartReply(name, True, [obs.report()])

    def _stop(self, exp: str | None, kind: str | None, name: str | None = None) -> tuple[bool, list[Observer]]:
        mine = [o for o in self.items if (exp is None or o.exp == exp) and (kind is None or o.kind == kind)
                and (name is None or o.name == name)]
        for obs in mine:
            if obs.state == "running":
                try:
                    obs.proc.terminate()
                except ProcessLookupError:
                    pass
                obs.state = "stopping"
        deadline = time.monotonic() + STOP_WAIT
        while True:
            for obs in mine:
                obs.collect()
            done = all(o.state in ("done", "error") for o in mine)
            if done or time.monotonic() >= deadline:
                return done, mine
            time.sleep(0.02)

    def trace_stop(self, args: TraceStopArgs) -> TraceStopReply:
        name = exp_name(args.exp)
        done, mine = self._stop(name, "trace")
        return TraceStopReply(name, done, [o.report() for o in mine])

    def watch_stop(self, args: WatchStopArgs) -> WatchStopReply:
        name = exp_name(args.exp)
        done, mine = self._stop(name, "watch", args.name)
        return WatchStopReply(name, done, [o.report() for o in mine])

    def signal(self, exp: str | None) -> None:
        """Ask ``exp``'s collectors (every one if None) to end, without waiting (a stop request)."""
        for obs in self.items:
            if (exp is None or obs.exp == exp) and obs.state == "running":
                obs.proc.terminate()
                obs.state = "stopping"

    def running(self, exp: str) -> list[str]:
        """What still writes files of ``exp`` (its data is not complete while these run)."""
        for obs in self.items:
            obs.collect()
        return [f"{o.kind} {o.name} pid {o.proc.pid}" for o in self.items
                if o.exp == exp and o.state in ("running", "stopping")]

    def forget(self, exp: str) -> None:
        self.items = [o for o in self.items if o.exp != exp or o.state in ("running", "stopping")]

    def stop_all(self) -> list[str]:
        """Stop every collector (a lapsed lease, the agent's end); what was stopped. Each finishes its files
        on its own (a trace decodes after the stop, and outlives an agent that exits meanwhile): nothing
        collected is lost by killing it."""
        _, mine = self._stop(None, None)
        for obs in mine:
            if obs.proc.poll() is None:
                log.info("%s %s (pid %d) still writing its files", obs.kind, obs.name, obs.proc.pid)
        return [f"{o.kind} {o.name}" for o in mine]


class ObserveHandlers:
    """The agent commands of traces and watches (mixed into :class:`netesto.agent.handlers.Handlers`)."""

    agent: Any

    def cmd_trace_start(self, args: TraceStartArgs) -> TraceStartReply:
        return self.agent.observers.trace_start(args)

    def cmd_trace_stop(self, args: TraceStopArgs) -> TraceStopReply:
        return self.agent.observers.trace_stop(args)

    def cmd_watch_start(self, args: WatchStartArgs) -> WatchStartReply:
        return self.agent.observers.watch_start(args)

    def cmd_watch_stop(self, args: WatchStopArgs) -> WatchStopReply:
        return self.agent.observers.watch_stop(args)


__all__ = ["ObserveHandlers", "Observer", "ObserverReply", "Observers"]
