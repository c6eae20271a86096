"""Flow engine client processes, one per start: started, followed through their events, stopped.

The engine's test server lives in :mod:`netesto.agent.engineserver`, ping
collectors in :mod:`netesto.agent.pings`; :class:`FlowManager` holds both.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from netesto.agent.diag import TcpDiag
from netesto.agent.engineserver import EngineServer, engine_argv, kill
from netesto.agent.pings import Pings
from netesto.agent.spare import SpareClient
from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError, NetestoError
from netesto.policy import MAX_FLOWS_PER_REQUEST
from netesto.procs import parent_death_signal
from netesto.protocol.replies import PingReply, ServerReply, StartFlowsReply, StatusReply

log = logging.getLogger("netesto.agent.flows")
Push = Callable[[str, dict[str, Any]], None]


def _engine_end(pid: int, rc: int) -> str:
    """How the engine process ended, for a flow's error: the signal's name if one killed it."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"flow engine (pid {pid}) was killed by {name}"
    return f"flow engine (pid {pid}) exited with status {rc}"


@dataclass
class ClientRun:
    """One ``python -m netesto.engine client`` process and what it has told us."""

    exp: str
    proc: subprocess.Popen
    flows: list[str]
    buffer: bytes = b""
    state: dict[str, str] = field(default_factory=dict)  # flow -> started|done|error
    progress: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    finished: bool = False
    returncode: int | None = None
    stderr: Path | None = None
    specs: Path | None = None  # removed when the run ends here: one left at start was cut short
    addresses: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # flow -> (local, remote)


class FlowManager:
    """Starts, watches and stops the flow engine on behalf of the agent's ROUTER loop.

    Everything here is non-blocking: the loop polls :meth:`fds`, calls
    :meth:`on_readable` and :meth:`reap`, and gets events through ``push``.
    """
    def __init__(self, store: DataStore, host: str, push: Push, *, test_bind: str = "0.0.0.0", flow_port: int = 0) -> None:
        self.store = store
        self.host = host
        self.push = push
        self.server = EngineServer(store, test_bind=test_bind, flow_port=flow_port)
        self.runs: list[ClientRun] = []
        self.pings = Pings(store, host)
        self._n = 0
        self._closing = False
        self.diag = TcpDiag()
        self.spare = SpareClient(store)  # the next start_flows' engine client, started ahead
        self.spare.refill()
        # exp -> {flow: error} of flows a previous agent process started and never saw end.
        self.interrupted: dict[str, dict[str, str]] = self._leftover_runs()

    def _leftover_runs(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for path in sorted(self.store.private.glob("specs-*-*-*.json")):  # specs-<exp>-<pid>-<n>.json
            try:
                specs = json.loads(path.read_text())
                exp = exp_name(specs[0]["exp"])
                flows = [str(spec["flow_id"]) for spec in specs]
            except (OSError, ValueError, LookupError, TypeError, AgentError) as exc:
                log.warning("unreadable leftover flow specs %s: %s", path.name, exc)
                continue
            if not (self.store.root / exp).is_dir():  # its data was acknowledged since: nothing to report
                path.unlink(missing_ok=True)
                continue
            for flow in flows:
                out.setdefault(exp, {})[flow] = ("interrupted: the agent stopped while this flow ran "
                                                 "(killed or restarted); its data up to then is kept")
            log.warning("exp %s: %d flow(s) were cut short by the previous agent's end: %s", exp, len(flows),
                        ", ".join(flows))
        return out

    def prepare_server(self, exp: Any, token: str, driver: str = "builtin", ports: list[int] | None = None) -> ServerReply:
        return self.server.prepare(exp, token, driver, ports)

    def start_flows(self, exp: Any, specs: list[dict[str, Any]], at: float | None, ping: bool = False,
                    ping_interval: float = 0.2) -> StartFlowsReply:
        from netesto.protocol.flowspec import FlowSpec

        name = exp_name(exp)
        # The engine files a flow under <datadir>/<its spec's exp>/flows: that must be
        # this experiment's directory, or fetch/ack of ``exp`` would never see the flow.
        if not name.isdigit() or str(int(name)) != name:
            raise AgentError(f"experiment {name!r} cannot run flows: flows need a number without leading zeros "
                             "(their files go to <datadir>/<number>/flows)", kind="UsageError")
        number = int(name)
        if len(specs) > MAX_FLOWS_PER_REQUEST:  # refused before any is read: each costs time and memory here
            raise AgentError(f"{len(specs)} flows in one start_flows request; at most {MAX_FLOWS_PER_REQUEST} "
                             "(netesto.policy.MAX_FLOWS_PER_REQUEST)", kind="UsageError")
        if at is not None and not math.isfinite(at):  # inf would hold the flows "scheduled" forever
            raise AgentError(f"start time {at} is not a finite number", kind="UsageError")
        flows = []
        for raw in specs:
            if not isinstance(raw, dict):
                raise AgentError(f"bad flow spec {raw!r}: expected a map of FlowSpec fields", kind="UsageError")
            data = dict(raw)
            if at is not None and data.get("start_at") is None:
                data["start_at"] = float(at)
            data.setdefault("exp", number)
            if data["exp"] != number or isinstance(data["exp"], bool):
                raise AgentError(f"flow {data.get('flow_id', '?')} says exp {data['exp']!r} but start_flows is for "
                                 f"experiment {number}", kind="UsageError")
            try:
                flows.append(FlowSpec.from_dict(data))
            except NetestoError as exc:
                raise AgentError(f"bad flow spec: {exc.message}", kind="UsageError") from exc
        if not flows:
            raise AgentError("start_flows needs at least one flow spec", kind="UsageError")
        # The engine truncates a flow's file when it opens it: a second start of a flow id
        # (a replayed or retried request, another run with the same experiment number)
        # would destroy data nobody has fetched yet.
        ids = [f.flow_id for f in flows]
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            raise AgentError(f"flow id {dups[0]} appears twice in start_flows for experiment {name}", kind="UsageError")
        known = {flow for r in self.runs if r.exp == name for flow in r.flows} | set(self.interrupted.get(name, ()))
        flows_dir = self.store.root / name / "flows"
        for flow_id in ids:
            if flow_id in known or (flows_dir / f"{flow_id}.client.nflow").exists():
                raise AgentError(f"flow {flow_id} already has data in experiment {name} on this agent: fetch and "
                                 "acknowledge it first, or use another experiment number", kind="Busy")
        if ping and not 0.002 <= ping_interval <= 60:  # checked before anything starts
            raise AgentError(f"ping_interval {ping_interval} is outside 0.002..60 s", kind="UsageError")
        self.store.exp_dir(name)
        self._n += 1
        # The pid keeps a restarted agent from overwriting a leftover (cut-short) run's specs.
        specs_path = self.store.write_private_json(f"specs-{name}-{os.getpid()}-{self._n}.json",
                                                   json.dumps([f.to_dict() for f in flows]))
        proc, stderr = self.spare.take(specs_path) or self._new_client(name, specs_path)
        os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        run = ClientRun(name, proc, [f.flow_id for f in flows], stderr=stderr, specs=specs_path)
        run.state = {f.flow_id: "scheduled" for f in flows}
        self.runs.append(run)
        ping_errors: list[str] = []
        if ping:
            dur = max(f.dur for f in flows)
            start = min((f.start_at or time.time()) for f in flows)
            for server in sorted({f.server for f in flows}):
                try:
                    self.ping_start(name, server, server, interval=ping_interval,
                                    duration=dur + max(0.0, start - time.time()))
                except AgentError as exc:
                    # The flows already run: an error reply would hide them from the controller.
                    log.warning("exp %s: %s", name, exc.message)
                    ping_errors.append(exc.message)
        log.info("exp %s: started %d flows (pid %d)", name, len(flows), proc.pid)
        return StartFlowsReply(run.flows, proc.pid, specs_path.name, ping_errors or None)

    def _new_client(self, name: str, specs_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
        """An engine client process for ``specs_path`` started now (no spare was waiting), and its stderr file."""
        argv = engine_argv("client", "--specs", str(specs_path), "--datadir", str(self.store.root))
        path = self.store.private / f"client-{name}-{self._n}.stderr"
        errlog = open(path, "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errlog,
                                    preexec_fn=parent_death_signal())
        except OSError as exc:
            raise AgentError(f"cannot start the flow engine client: {exc}", kind="EngineError") from exc
        finally:
            errlog.close()
        return proc, path

    def ping_start(self, exp: Any, target: str, label: str, *, interval: float = 0.2, duration: float = 10.0) -> PingReply:
        return self.pings.start(exp, target, label, interval=interval, duration=duration)

    def reap_pings(self, exp: str | None = None) -> None:
        """Close ping collectors whose duration is over (or all of ``exp``'s)."""
        self.pings.reap(exp)

    def fds(self) -> dict[int, ClientRun]:
        return {r.proc.stdout.fileno(): r for r in self.runs if not r.finished and r.proc.stdout}  # type: ignore[union-attr]

    def on_readable(self, run: ClientRun) -> None:
        try:
            data = os.read(run.proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
        except BlockingIOError:
            return
        except (OSError, ValueError):
            data = b""
        if not data:
            self._finish(run)
            return
        run.buffer += data
        *lines, run.buffer = run.buffer.split(b"\n")
        for line in lines:
            self._event_line(run, line)

    def _event_line(self, run: ClientRun, line: bytes) -> None:
        if not line.strip():
            return
        try:
            event = json.loads(line)
        except ValueError:
            log.warning("exp %s: unparsable engine line %r", run.exp, line[:200])
            return
        if not isinstance(event, dict):
            return
        flow, kind = str(event.get("flow", "")), str(event.get("event", ""))
        if flow:
            if kind in ("started", "done", "error"):
                run.state[flow] = kind
            if kind == "started" and event.get("local") and event.get("remote"):
                run.addresses[flow] = (event["local"], event["remote"])
            if kind == "progress":
                if flow in run.addresses:  # the live view's cwnd and RTT: read here, the engine is not asked
                    event.update(self.diag.summary(*run.addresses[flow]))
                run.progress[flow] = {k: v for k, v in event.items() if k not in ("event", "flow")}
            if kind == "error":
                run.errors[flow] = str(event.get("message") or event.get("error") or "")
        self.push("flow", {**event, "exp": run.exp, "host": self.host})

    def _finish(self, run: ClientRun) -> None:
        if run.finished:
            return
        try:
            rc = run.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return
        if run.buffer:
            self._event_line(run, run.buffer)
            run.buffer = b""
        run.finished, run.returncode = True, rc
        tail = ""
        if run.stderr is not None:
            if rc != 0:
                try:
                    tail = run.stderr.read_text(errors="replace").strip()[-600:]
                except OSError:
                    pass
            # Its tail lives on in the flows' errors (and the log): one file per start was kept for ever.
            run.stderr.unlink(missing_ok=True)
        for flow, state in run.state.items():
            if state not in ("done", "error"):
                run.state[flow] = "done" if rc == 0 else "error"
                if rc != 0:
                    run.errors.setdefault(flow, _engine_end(run.proc.pid, rc) + (f": {tail}" if tail else ""))
        if run.proc.stdout:
            run.proc.stdout.close()
        if run.specs is not None and not self._closing:  # kept when the agent stops: the next one reports them
            run.specs.unlink(missing_ok=True)
        log.info("exp %s: flow engine pid %d exited with %s%s", run.exp, run.proc.pid, rc, f": {tail}" if tail else "")
        self.push("flows_done", {"exp": run.exp, "host": self.host, **self.status(run.exp).to_wire()})
        if not self._closing and all(r.finished for r in self.runs):  # no flows left here whose CPU it would take
            self.spare.refill()

    def reap(self) -> None:
        for run in self.runs:
            if not run.finished and run.proc.poll() is not None:
                self._drain(run)  # the last events before declaring the run over
                self._finish(run)
        if self.pings.collectors:
            self.pings.reap()

    def _drain(self, run: ClientRun) -> None:
        while run.proc.stdout and not run.proc.stdout.closed:
            try:
                data = os.read(run.proc.stdout.fileno(), 65536)
            except (BlockingIOError, OSError, ValueError):
                return
            if not data:
                return
            run.buffer += data
            *lines, run.buffer = run.buffer.split(b"\n")
            for line in lines:
                self._event_line(run, line)

    def status(self, exp: Any) -> StatusReply:
        name = exp_name(exp)
        running: list[str] = []
        done: list[str] = []
        failed: list[str] = []
        progress: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for run in self.runs:
            if run.exp != name:
                continue
            for flow, state in run.state.items():
                (done if state == "done" else failed if state == "error" else running).append(flow)
            progress.update(run.progress)
            errors.update(run.errors)
        for flow, error in self.interrupted.get(name, {}).items():
            failed.append(flow)
            errors[flow] = error
        server_running = self.server.running(name)
        finished = all(r.finished for r in self.runs if r.exp == name) and not server_running
        return StatusReply(name, running, done, failed, progress, errors, finished, server_running)

    def forget(self, exp: Any) -> None:
        """Drop the finished runs of ``exp`` (after its data was acknowledged)."""
        name = exp_name(exp)
        self.runs = [r for r in self.runs if r.exp != name or not r.finished]
        if self.interrupted.pop(name, None) is not None:
            for path in self.store.private.glob(f"specs-{name}-*.json"):
                path.unlink(missing_ok=True)

    def running(self) -> bool:
        return any(not r.finished for r in self.runs)

    def stop(self, exp: Any = None, reason: str = "stopped by a stop request") -> list[str]:
        """Stop ``exp``'s flows and pings (every experiment's if None); the flows stopped."""
        name = None if exp is None else exp_name(exp)
        stopped = []
        for run in self.runs:
            if (name is None or run.exp == name) and not run.finished:
                kill(run.proc)
                for flow, state in run.state.items():
                    if state not in ("done", "error"):
                        run.state[flow] = "error"
                        run.errors[flow] = reason
                self._finish(run)
                stopped.extend(run.flows)
        self.pings.stop(name)
        return stopped
    def stop_tool_servers(self) -> list[str]:
        """Kill the iperf3/netserver servers started for a run (they outlived runs and leases)."""
        return self.server.stop_tool_servers()

    def shutdown(self) -> None:
        self._closing = True
        self.spare.close()
        self.stop(reason="stopped: the agent was shut down")
        self.server.shutdown()
        self.diag.close()


__all__ = ["ClientRun", "FlowManager"]
