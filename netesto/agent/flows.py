"""Flow engine subprocesses: the long-lived test server and one client process per start."""

from __future__ import annotations

import importlib
import ipaddress
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from netesto.agent.diag import TcpDiag
from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError, NetestoError
from netesto.policy import TOOL_PORTS
from netesto.protocol.names import is_name
from netesto.procs import parent_death_signal

log = logging.getLogger("netesto.agent.flows")
Push = Callable[[str, dict[str, Any]], None]


def free_port(bind: str) -> int:
    """A TCP port the kernel says is free on ``bind`` right now."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((bind, 0))
        return s.getsockname()[1]


def _kill(proc: subprocess.Popen, grace: float = 1.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


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
        self.test_bind = test_bind
        self.flow_port = flow_port
        self.server: subprocess.Popen | None = None
        self.server_port = 0
        self.server_tokens: list[str] = []
        self.server_open = False
        self.server_flows: dict[str, str] = {}  # flow id -> started|done|error (server side)
        self._server_pos = 0
        # Peer-tool servers by (driver, port): iperf3 (one per concurrent flow) and netserver.
        self.tool_servers: dict[tuple[str, int], subprocess.Popen] = {}
        self.runs: list[ClientRun] = []
        self.pings: dict[str, list[tuple[float, Any]]] = {}
        self._n = 0
        self._closing = False
        self.diag = TcpDiag()
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

    def engine_argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "netesto.engine", *args]

    def prepare_server(self, exp: Any, token: str, driver: str = "builtin", ports: list[int] | None = None) -> dict[str, Any]:
        name = exp_name(exp)
        if driver in ("iperf3", "netperf"):
            return self._prepare_tool_server(driver, ports)
        if driver != "builtin":
            raise AgentError(f"unknown driver {driver!r}: builtin, iperf3 or netperf", kind="UsageError")
        alive = self.server is not None and self.server.poll() is None
        if alive and (self.server_open or token in self.server_tokens):
            return {"port": self.server_port, "driver": "builtin", "reused": True}
        token_file = self.store.private / "tokens"
        if alive and token and not self.server_open:
            # The engine re-reads its token file when it changes: no restart needed.
            self.server_tokens.append(token)
            self.store.write_private_json("tokens", "\n".join(self.server_tokens) + "\n")
            return {"port": self.server_port, "driver": "builtin", "reused": True}
        if alive:  # an empty token asks for an open server: restart without a token file
            busy = self._server_ends_running()
            if busy:  # a restart would cut them (and their data) short
                flows = ", ".join(f"{flow} (experiment {e})" for e, flow in busy[:5])
                raise AgentError(f"cannot restart the flow engine server without a token: server ends of {flows} "
                                 "are running; wait for them or give the token", kind="Busy")
            _kill(self.server)  # type: ignore[arg-type]
        self.server_open = not token
        self.server_tokens = [token] if token else []
        argv = self.engine_argv("server", "--bind", self.test_bind, "--port", str(self.server_port or self.flow_port),
                                "--datadir", str(self.store.root))
        if token:
            self.store.write_private_json("tokens", token + "\n")
            argv += ["--token-file", str(token_file)]
        out_path = self.store.private / "server.out"
        out_path.write_bytes(b"")
        self._server_pos = 0
        out = open(out_path, "ab")
        try:
            self.server = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                           preexec_fn=parent_death_signal())
        except OSError as exc:
            raise AgentError(f"cannot start the flow engine server: {exc}", kind="EngineError") from exc
        finally:
            out.close()
        # The engine prints {"event": "listening", "port": P} first (stdout goes to a file so
        # the engine never blocks on a pipe nobody reads).
        deadline = time.monotonic() + 15
        port = 0
        while not port:
            for line in out_path.read_bytes().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "listening":
                    port = int(event["port"])
                    break
            if port:
                break
            if self.server.poll() is not None or time.monotonic() > deadline:
                tail = out_path.read_text(errors="replace")[-800:].strip()
                _kill(self.server)
                raise AgentError(f"the flow engine server did not start (status {self.server.returncode}): {tail}",
                                 kind="EngineError")
            time.sleep(0.02)
        self.server_port = port
        log.info("flow engine server pid %d on %s:%d (exp %s)", self.server.pid, self.test_bind, port, name)
        return {"port": port, "driver": "builtin", "reused": False}

    def _prepare_tool_server(self, driver: str, ports: list[int] | None) -> dict[str, Any]:
        """Start ``iperf3 -s`` (one per port, default 5201) or ``netserver`` (default 12865) once per port.

        They get SIGTERM when the agent dies, even by SIGKILL: a server left behind would
        hold its port against the restarted agent.
        """
        low, high = TOOL_PORTS
        for port in ports or ():
            if type(port) is not int or not low <= port <= high:  # never a privileged port
                raise AgentError(f"bad port {port!r} for the {driver} server: expected {low}..{high}", kind="UsageError")
        try:
            module = importlib.import_module(f"netesto.drivers.{driver}")
        except ImportError as exc:
            raise AgentError(f"the {driver} driver is not available on this agent: {exc}", kind="Unavailable") from exc
        tool = "iperf3" if driver == "iperf3" else "netserver"
        bind = None if self.test_bind in ("0.0.0.0", "::", "") else self.test_bind
        started, pids = [], []
        for port in ports or [5201 if driver == "iperf3" else 12865]:
            proc = self.tool_servers.get((driver, port))
            if proc is None or proc.poll() is not None:
                try:
                    proc = module.start_server(port, bind, die_with_parent=True)
                except NetestoError as exc:
                    raise AgentError(f"{tool} server on port {port}: {exc.message}", kind="EngineError") from exc
                self.tool_servers[(driver, port)] = proc
                log.info("%s server pid %d on port %d", tool, proc.pid, port)
            started.append(port)
            pids.append(proc.pid)
        return {"port": started[0], "ports": started, "pids": pids, "driver": driver}

    def start_flows(self, exp: Any, specs: list[dict[str, Any]], at: float | None, ping: bool = False,
                    ping_interval: float = 0.2) -> dict[str, Any]:
        from netesto.protocol.flowspec import FlowSpec

        name = exp_name(exp)
        # The engine files a flow under <datadir>/<its spec's exp>/flows: that must be
        # this experiment's directory, or fetch/ack of ``exp`` would never see the flow.
        if not name.isdigit() or str(int(name)) != name:
            raise AgentError(f"experiment {name!r} cannot run flows: flows need a number without leading zeros "
                             "(their files go to <datadir>/<number>/flows)", kind="UsageError")
        number = int(name)
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
        argv = self.engine_argv("client", "--specs", str(specs_path), "--datadir", str(self.store.root))
        errlog = open(self.store.private / f"client-{name}-{self._n}.stderr", "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errlog,
                                    preexec_fn=parent_death_signal())
        except OSError as exc:
            raise AgentError(f"cannot start the flow engine client: {exc}", kind="EngineError") from exc
        finally:
            errlog.close()
        os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        run = ClientRun(name, proc, [f.flow_id for f in flows], stderr=self.store.private / f"client-{name}-{self._n}.stderr",
                        specs=specs_path)
        run.state = {f.flow_id: "scheduled" for f in flows}
        self.runs.append(run)
        out: dict[str, Any] = {"flows": run.flows, "pid": proc.pid, "specs": specs_path.name}
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
                    out.setdefault("ping_errors", []).append(exc.message)
        log.info("exp %s: started %d flows (pid %d)", name, len(flows), proc.pid)
        return out

    def ping_start(self, exp: Any, target: str, label: str, *, interval: float = 0.2, duration: float = 10.0) -> dict[str, Any]:
        try:
            from netesto.collectors.ping import PingCollector
        except ImportError as exc:
            raise AgentError(f"ping collection is not available on this agent: {exc}", kind="Unavailable") from exc
        name = exp_name(exp)
        if not 0 < duration <= 10**6:  # also NaN: ping's -w takes whole seconds
            raise AgentError(f"ping {target}: duration {duration} is outside (0, 1000000] s", kind="UsageError")
        for what, value in (("name", label), ("target", target)):  # never a path, never an option to ping
            if not is_name(value, 253):
                raise AgentError(f"bad ping {what} {str(value)[:80]!r}: expected a host name or address",
                                 kind="UsageError")
        try:  # an address stays whole: its first label would give 10.0.0.2 and 10.0.0.3 one file
            label = str(ipaddress.ip_address(label)).replace(":", "_")
        except ValueError:
            label = label.split(".")[0]
        short = self.host.split(".")[0]
        dest = self.store.exp_dir(name) / "ping" / f"{short}-{label}.nflow"
        if dest.exists():  # running or done, unfetched: the collector would truncate it
            raise AgentError(f"ping/{dest.name} already has data in experiment {name} on this agent: fetch and "
                             "acknowledge it first, or use another name or experiment", kind="Busy")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            collector = PingCollector(target, dest, interval, duration)
            if hasattr(collector, "start"):
                collector.start()
        except NetestoError as exc:
            raise AgentError(f"ping {target}: {exc.message}", kind=type(exc).__name__) from exc
        except OSError as exc:
            raise AgentError(f"ping {target}: {exc}", kind="Unavailable") from exc
        self.pings.setdefault(name, []).append((time.monotonic() + duration + 2.0, collector))
        return {"path": dest.relative_to(self.store.exp_dir(name)).as_posix()}

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
        if rc != 0 and run.stderr is not None:
            try:
                tail = run.stderr.read_text(errors="replace").strip()[-600:]
            except OSError:
                pass
        for flow, state in run.state.items():
            if state not in ("done", "error"):
                run.state[flow] = "done" if rc == 0 else "error"
                if rc != 0:
                    run.errors.setdefault(flow, _engine_end(run.proc.pid, rc) + (f": {tail}" if tail else ""))
        if run.proc.stdout:
            run.proc.stdout.close()
        if run.specs is not None and not self._closing:  # kept when the agent stops: the next one reports them
            run.specs.unlink(missing_ok=True)
        log.info("exp %s: flow engine pid %d exited with %s", run.exp, run.proc.pid, rc)
        self.push("flows_done", {"exp": run.exp, "host": self.host, **self.status(run.exp)})

    def reap(self) -> None:
        for run in self.runs:
            if not run.finished and run.proc.poll() is not None:
                self._drain(run)  # the last events before declaring the run over
                self._finish(run)
        if self.pings:
            self.reap_pings()

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

    @staticmethod
    def _stop_ping(collector: Any) -> None:
        try:
            collector.stop()  # returns at once if ping already ended; closes its file
        except Exception as exc:  # a collector failing to stop must not stop the stop
            log.warning("stopping ping: %s", exc)

    def reap_pings(self, exp: str | None = None) -> None:
        """Close ping collectors whose duration is over (or all of ``exp``'s)."""
        now = time.monotonic()
        for key in list(self.pings):
            keep = []
            for end, collector in self.pings[key]:
                if key == exp or now > end:
                    self._stop_ping(collector)
                else:
                    keep.append((end, collector))
            if keep:
                self.pings[key] = keep
            else:
                del self.pings[key]

    def _server_events(self) -> None:
        """Follow the engine server's event lines (started/done per flow) in its output file."""
        if self.server is None:
            return
        path = self.store.private / "server.out"
        try:
            with open(path, "rb") as f:
                f.seek(self._server_pos)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._server_pos += end
        for line in data[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("flow") and event.get("event") in ("started", "done", "error"):
                self.server_flows[str(event["flow"])] = str(event["event"])

    def _server_ends_running(self) -> list[tuple[str, str]]:
        """``(exp, flow)`` of every server end the engine server has open now, any experiment."""
        self._server_events()
        exps = {p.parent.parent.name for flow, state in self.server_flows.items() if state == "started"
                for p in self.store.root.glob(f"*/flows/{flow}.server.nflow")}
        return [(exp, flow) for exp in sorted(exps) for flow in self.server_running(exp)]

    def _server_open_files(self) -> set[str] | None:
        """Paths the engine server and its workers hold open (None if /proc cannot tell)."""
        if self.server is None or self.server.poll() is not None:
            return set()
        pids, out = [self.server.pid], set()
        try:
            for task in os.listdir(f"/proc/{self.server.pid}/task"):
                with open(f"/proc/{self.server.pid}/task/{task}/children") as f:
                    pids += [int(x) for x in f.read().split()]
        except OSError:  # no CONFIG_PROC_CHILDREN, or it just ended
            return None
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    pass
        return out

    def server_running(self, exp: str) -> list[str]:
        """Server ends of ``exp``'s flows still open here (their files still being written)."""
        self._server_events()
        flows = self.store.root / exp / "flows"
        started = sorted(f for f, state in self.server_flows.items()
                         if state == "started" and (flows / f"{f}.server.nflow").exists())
        if not started:
            return started
        # A worker that dies (killed, OOM) never reports its flows' end: without this check
        # they would count as running forever (status never finished, ack refused for good).
        # Their files are open in a live worker while they run.
        held = self._server_open_files()
        if held is None:
            return started
        running = []
        for flow in started:
            if str((flows / f"{flow}.server.nflow").resolve()) in held:
                running.append(flow)
            else:
                self._server_events()  # its "done" may have been written just now
                if self.server_flows.get(flow) == "started":
                    self.server_flows[flow] = "error"
                    log.warning("exp %s: the server end of %s ended without reporting (engine worker died?); "
                                "its data up to then is kept", exp, flow)
        return running

    def status(self, exp: Any) -> dict[str, Any]:
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
        server_running = self.server_running(name)
        finished = all(r.finished for r in self.runs if r.exp == name) and not server_running
        return {"exp": name, "running": running, "done": done, "failed": failed, "progress": progress,
                "errors": errors, "finished": finished, "server_running": server_running}

    def forget(self, exp: Any) -> None:
        """Drop the finished runs of ``exp`` (after its data was acknowledged)."""
        name = exp_name(exp)
        self.runs = [r for r in self.runs if r.exp != name or not r.finished]
        if self.interrupted.pop(name, None) is not None:
            for path in self.store.private.glob(f"specs-{name}-*.json"):
                path.unlink(missing_ok=True)

    def running(self) -> bool:
        return any(not r.finished for r in self.runs)

    def stop(self, exp: Any = None, reason: str = "stopped by a stop request") -> dict[str, Any]:
        name = None if exp is None else exp_name(exp)
        stopped = []
        for run in self.runs:
            if (name is None or run.exp == name) and not run.finished:
                _kill(run.proc)
                for flow, state in run.state.items():
                    if state not in ("done", "error"):
                        run.state[flow] = "error"
                        run.errors[flow] = reason
                self._finish(run)
                stopped.extend(run.flows)
        for key in list(self.pings):
            if name is None or key == name:
                for _, collector in self.pings.pop(key):
                    self._stop_ping(collector)
        return {"stopped": stopped}

    def stop_tool_servers(self) -> list[str]:
        """Kill the iperf3/netserver servers started for a run (they outlived runs and leases)."""
        stopped = [f"{driver}:{port}" for driver, port in self.tool_servers]
        for proc in self.tool_servers.values():
            _kill(proc)
        self.tool_servers.clear()
        return stopped

    def shutdown(self) -> None:
        self._closing = True
        self.stop(reason="stopped: the agent was shut down")
        if self.server is not None:
            _kill(self.server)
            self.server = None
        self.stop_tool_servers()
        self.diag.close()


__all__ = ["ClientRun", "FlowManager", "free_port"]
