"""The flow engine's long-lived test server and the peer tools' servers (iperf3, netserver) of one agent."""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError, NetestoError
from netesto.policy import MAX_PORTS_PER_REQUEST, MAX_TOOL_SERVERS, TOOL_PORTS
from netesto.procs import parent_death_signal
from netesto.protocol.replies import ServerReply

log = logging.getLogger("netesto.agent.flows")


def engine_argv(*args: str) -> list[str]:
    """``python -m netesto.engine`` with ``args``."""
    return [sys.executable, "-m", "netesto.engine", *args]


def kill(proc: subprocess.Popen, grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
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


class EngineServer:
    """The engine's test server (started once, token-checked, followed through its output
    file) and the iperf3/netserver servers a run asked for."""

    def __init__(self, store: DataStore, *, test_bind: str = "0.0.0.0", flow_port: int = 0) -> None:
        self.store = store
        self.test_bind = test_bind
        self.flow_port = flow_port
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.tokens: list[str] = []
        self.tokenless = False
        self.flows: dict[str, str] = {}  # flow id -> started|done|error (server side)
        self._pos = 0
        # Peer-tool servers by (driver, port): iperf3 (one per concurrent flow) and netserver.
        self.tool_servers: dict[tuple[str, int], subprocess.Popen] = {}

    def prepare(self, exp: Any, token: str, driver: str = "builtin", ports: list[int] | None = None) -> ServerReply:
        """A test server for ``exp``: the engine's (reused when it takes ``token``) or a peer tool's."""
        name = exp_name(exp)
        if driver in ("iperf3", "netperf"):
            return self._prepare_tool(driver, ports)
        if driver != "builtin":
            raise AgentError(f"unknown driver {driver!r}: builtin, iperf3 or netperf", kind="UsageError")
        alive = self.proc is not None and self.proc.poll() is None
        if alive and (self.tokenless or token in self.tokens):
            return ServerReply(self.port, driver="builtin", reused=True)
        token_file = self.store.private / "tokens"
        if alive and token and not self.tokenless:
            # The engine re-reads its token file when it changes: no restart needed.
            self.tokens.append(token)
            self.store.write_private_json("tokens", "\n".join(self.tokens) + "\n")
            return ServerReply(self.port, driver="builtin", reused=True)
        if alive:  # an empty token asks for an open server: restart without a token file
            busy = self.ends_running()
            if busy:  # a restart would cut them (and their data) short
                flows = ", ".join(f"{flow} (experiment {e})" for e, flow in busy[:5])
                raise AgentError(f"cannot restart the flow engine server without a token: server ends of {flows} "
                                 "are running; wait for them or give the token", kind="Busy")
            kill(self.proc)  # type: ignore[arg-type]
        self.tokenless = not token
        self.tokens = [token] if token else []
        argv = engine_argv("server", "--bind", self.test_bind, "--port", str(self.port or self.flow_port),
                                "--datadir", str(self.store.root))
        if token:
            self.store.write_private_json("tokens", token + "\n")
            argv += ["--token-file", str(token_file)]
        out_path = self.store.private / "server.out"
        out_path.write_bytes(b"")
        self._pos = 0
        out = open(out_path, "ab")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
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
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = out_path.read_text(errors="replace")[-800:].strip()
                kill(self.proc)
                raise AgentError(f"the flow engine server did not start (status {self.proc.returncode}): {tail}",
                                 kind="EngineError")
            time.sleep(0.02)
        self.port = port
        log.info("flow engine server pid %d on %s:%d (exp %s)", self.proc.pid, self.test_bind, port, name)
        return ServerReply(port, driver="builtin", reused=False)

    def _prepare_tool(self, driver: str, ports: list[int] | None) -> ServerReply:
        """Start ``iperf3 -s`` (one per port, default 5201) or ``netserver`` (default 12865) once per port.

        They get SIGTERM when the agent dies, even by SIGKILL: a server left behind would
        hold its port against the restarted agent.
        """
        low, high = TOOL_PORTS
        # Servers start one after another inside the agent's loop: a bound on them is a bound
        # on how long the agent does not answer (hello, heartbeats, SIGTERM).
        if ports is not None and len(ports) > MAX_PORTS_PER_REQUEST:
            raise AgentError(f"{len(ports)} {driver} server ports in one request; at most {MAX_PORTS_PER_REQUEST} "
                             "(netesto.policy.MAX_PORTS_PER_REQUEST)", kind="UsageError")
        for port in ports or ():
            if type(port) is not int or not low <= port <= high:  # never a privileged port
                raise AgentError(f"bad port {port!r} for the {driver} server: expected {low}..{high}", kind="UsageError")
        try:
            module = importlib.import_module(f"netesto.drivers.{driver}")
        except ImportError as exc:
            raise AgentError(f"the {driver} driver is not available on this agent: {exc}", kind="Unavailable") from exc
        tool = "iperf3" if driver == "iperf3" else "netserver"
        self.tool_servers = {k: p for k, p in self.tool_servers.items() if p.poll() is None}
        wanted = ports or [5201 if driver == "iperf3" else 12865]
        new = {(driver, port) for port in wanted} - self.tool_servers.keys()
        if len(self.tool_servers) + len(new) > MAX_TOOL_SERVERS:
            raise AgentError(f"{len(new)} more {tool} servers would make {len(self.tool_servers) + len(new)} on this "
                             f"agent; at most {MAX_TOOL_SERVERS} (netesto.policy.MAX_TOOL_SERVERS); they end with "
                             "the run that started them", kind="Busy")
        bind = None if self.test_bind in ("0.0.0.0", "::", "") else self.test_bind
        started, pids = [], []
        for port in wanted:
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
        return ServerReply(started[0], started, pids, driver)
    def _events(self) -> None:
        """Follow the engine server's event lines (started/done per flow) in its output file."""
        if self.proc is None:
            return
        path = self.store.private / "server.out"
        try:
            with open(path, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._pos += end
        for line in data[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("flow") and event.get("event") in ("started", "done", "error"):
                self.flows[str(event["flow"])] = str(event["event"])

    def ends_running(self) -> list[tuple[str, str]]:
        """``(exp, flow)`` of every server end the engine server has open now, any experiment."""
        self._events()
        exps = {p.parent.parent.name for flow, state in self.flows.items() if state == "started"
                for p in self.store.root.glob(f"*/flows/{flow}.server.nflow")}
        return [(exp, flow) for exp in sorted(exps) for flow in self.running(exp)]

    def _open_files(self) -> set[str] | None:
        """Paths the engine server and its workers hold open (None if /proc cannot tell)."""
        if self.proc is None or self.proc.poll() is not None:
            return set()
        from netesto.collectors.sockowner import fd_targets

        pids = [self.proc.pid]
        try:
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                with open(f"/proc/{self.proc.pid}/task/{task}/children") as f:
                    pids += [int(x) for x in f.read().split()]
        except OSError:  # no CONFIG_PROC_CHILDREN, or it just ended
            return None
        return fd_targets(pids)

    def running(self, exp: str) -> list[str]:
        """Server ends of ``exp``'s flows still open here (their files still being written)."""
        self._events()
        flows = self.store.root / exp / "flows"
        started = sorted(f for f, state in self.flows.items()
                         if state == "started" and (flows / f"{f}.server.nflow").exists())
        if not started:
            return started
        # A worker that dies (killed, OOM) never reports its flows' end: without this check
        # they would count as running forever (status never finished, ack refused for good).
        # Their files are open in a live worker while they run.
        held = self._open_files()
        if held is None:
            return started
        running = []
        for flow in started:
            if str((flows / f"{flow}.server.nflow").resolve()) in held:
                running.append(flow)
            else:
                self._events()  # its "done" may have been written just now
                if self.flows.get(flow) == "started":
                    self.flows[flow] = "error"
                    log.warning("exp %s: the server end of %s ended without reporting (engine worker died?); "
                                "its data up to then is kept", exp, flow)
        return running
    def stop_tool_servers(self) -> list[str]:
        """Kill the iperf3/netserver servers started for a run (they outlived runs and leases)."""
        stopped = [f"{driver}:{port}" for driver, port in self.tool_servers]
        for proc in self.tool_servers.values():
            kill(proc)
        self.tool_servers.clear()
        return stopped

    def shutdown(self) -> None:
        if self.proc is not None:
            kill(self.proc)
            self.proc = None
        self.stop_tool_servers()


__all__ = ["EngineServer", "engine_argv", "kill"]
