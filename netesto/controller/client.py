"""AgentClient: the agent's commands, as blocking calls over one :class:`AgentConnection`.

Each method sends one request (``wait_flows`` polls ``status``; ``fetch`` runs the
chunked transfer of :mod:`netesto.controller.fetch`) and returns the agent's reply
as its :mod:`netesto.protocol.replies` class (ProtocolError naming the host and the
field when the reply is malformed), or raises its error: AgentError naming the host (PolicyError for a refused
setting), AgentUnreachable after ``timeout`` without an answer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from netesto.controller.connection import AgentConnection, EventCallback
from netesto.controller.fetch import fetch_experiment
from netesto.protocol.commands import (
    ClaimArgs,
    LinkScheduleArgs,
    LinkStopArgs,
    PingStartArgs,
    PrepareServerArgs,
    ReleaseArgs,
    SetModuleParamsArgs,
    SetNetemArgs,
    SetQdiscArgs,
    SetSysctlArgs,
    ShapeArgs,
    SnapshotArgs,
    StartFlowsArgs,
    StatusArgs,
    StopArgs,
    TcpdumpStartArgs,
    TcpdumpStopArgs,
)
from netesto.protocol.replies import (
    ClaimReply,
    HelloReply,
    LinkScheduleReply,
    LinkStopReply,
    ModuleParamsReply,
    NetemReply,
    PingReply,
    QdiscReply,
    ReleaseReply,
    RestoreReply,
    ServerReply,
    ShapeReply,
    SnapshotReply,
    StartFlowsReply,
    StatusReply,
    StopReply,
    SysctlReply,
    TcpdumpStartReply,
    TcpdumpStopReply,
    TimeReply,
)


@dataclass(frozen=True)
class WaitResult(StatusReply):
    """``wait_flows``: the experiment's last status, and whether its flows ended in time (``complete``)."""

    complete: bool = False


class AgentClient(AgentConnection):
    """Talks to one agent. Methods block until the reply (or ``timeout`` -> AgentUnreachable)."""

    def hello(self) -> HelloReply:
        result = self.call(HelloReply)
        self.lease = float(result.lease) or None
        return result

    def clock_offset(self, samples: int = 8) -> tuple[float, float]:
        """``(agent_time - our_time, rtt)`` from the lowest-RTT of ``samples`` round trips."""
        best: tuple[float, float] | None = None
        for _ in range(max(1, samples)):
            t0 = time.time()
            agent_time = self.call(TimeReply).time
            t1 = time.time()
            rtt = t1 - t0
            if best is None or rtt < best[1]:
                best = (agent_time - (t0 + t1) / 2, rtt)
        assert best is not None
        return best

    def snapshot(self, exp: int | str, order: int, host: str | None = None) -> SnapshotReply:
        return self.call(SnapshotReply, SnapshotArgs(exp, order, host or None), timeout=max(self.timeout, 30.0))

    def prepare_server(self, exp: int | str, token: str = "", *, driver: str = "builtin",
                       ports: Sequence[int] | None = None) -> ServerReply:
        return self.call(ServerReply, PrepareServerArgs(exp, token, driver, list(ports) if ports else None),
                         timeout=max(self.timeout, 15.0))

    def start_flows(self, exp: int | str, specs: Iterable[Any], at: float | None = None, *, ping: bool = False,
                    ping_interval: float = 0.2) -> StartFlowsReply:
        """Start flows (FlowSpecs or their dicts); ``at`` is the start time in the AGENT's clock."""
        dicts = [s.to_dict() if hasattr(s, "to_dict") else dict(s) for s in specs]
        return self.call(StartFlowsReply, StartFlowsArgs(exp, dicts, at, ping, ping_interval))

    def ping_start(self, exp: int | str, target: str, name: str | None = None, *, interval: float = 0.2,
                   duration: float = 10.0) -> PingReply:
        return self.call(PingReply, PingStartArgs(exp, target, name or target, interval, duration))

    def claim(self, run: str, controller: str) -> ClaimReply:
        """Own the agent for run ``run`` (AgentError kind "Busy" naming the owner if another run does)."""
        return self.call(ClaimReply, ClaimArgs(run, controller))

    def release(self, *, timeout: float | None = None) -> ReleaseReply:
        return self.call(ReleaseReply, ReleaseArgs(), timeout=timeout)

    def status(self, exp: int | str) -> StatusReply:
        return self.call(StatusReply, StatusArgs(exp))

    def wait_flows(self, exp: int | str, timeout: float, *, poll: float = 0.2,
                   stop: threading.Event | None = None) -> WaitResult:
        """Poll status until the experiment's flows ended (``complete`` True), ``timeout`` passed
        or ``stop`` was set (both: ``complete`` False).

        On a server host this waits for the server ends (``server_running``) too,
        so a fetch afterwards does not race the engine's last writes."""
        end = time.monotonic() + timeout
        while True:
            st = self.status(exp)
            if st.finished and not st.running and not st.server_running:
                return WaitResult(**vars(st), complete=True)
            if time.monotonic() >= end or (stop is not None and stop.is_set()):
                return WaitResult(**vars(st), complete=False)
            pause = min(poll, max(0.0, end - time.monotonic()))
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)

    def stop(self, exp: int | str | None = None) -> StopReply:
        return self.call(StopReply, StopArgs(exp))

    def set_sysctl(self, settings: Mapping[str, Any] | Sequence[Any]) -> SysctlReply:
        """``{"net.ipv4.tcp_wmem": "4096 32768 8388608"}`` or ``[(name, values)]``."""
        items = settings.items() if isinstance(settings, Mapping) else settings
        wire = {str(k): (list(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in items}
        return self.call(SysctlReply, SetSysctlArgs(wire))

    def set_module_params(self, module: str, params: Mapping[str, Any] | Sequence[Any]) -> ModuleParamsReply:
        items = params.items() if isinstance(params, Mapping) else params
        return self.call(ModuleParamsReply, SetModuleParamsArgs(module, {str(k): str(v) for k, v in items}))

    def set_qdisc(self, dev: str, qdisc: str, action: str = "", rate: str = "", burst: str = "", limit: str = "",
                  other: str = "") -> QdiscReply:
        return self.call(QdiscReply, SetQdiscArgs(dev, qdisc, action, str(rate), str(burst), str(limit), other))

    def set_netem(self, dev: str, delay: float, jitter: float = 0.0, loss: float = 0.0, rate: int = 0,
                  limit: int = 1000) -> NetemReply:
        return self.call(NetemReply, SetNetemArgs(dev, delay, jitter, loss, int(rate), int(limit)))

    def tcpdump_start(self, exp: int | str, dev: str = "", server: str = "X",
                      packets: int = 10000) -> TcpdumpStartReply:
        return self.call(TcpdumpStartReply, TcpdumpStartArgs(exp, dev, server, packets))

    def tcpdump_stop(self, exp: int | str | None = None) -> TcpdumpStopReply:
        return self.call(TcpdumpStopReply, TcpdumpStopArgs(exp))

    def restore(self) -> RestoreReply:
        return self.call(RestoreReply)

    def link_schedule(self, exp: int | str, dev: str, t0: float, until: float, steps: Sequence[Sequence[Any]],
                      trace: Mapping[str, Any] | None = None, host: str = "") -> LinkScheduleReply:
        """Steps ``[seconds after t0, parameter, value]`` on link ``dev`` from ``t0`` to ``until`` (the AGENT's
        clock); ``host``: the lab's name of the agent, for its record."""
        wire = [[float(at), str(p), float(v)] for at, p, v in steps]
        return self.call(LinkScheduleReply, LinkScheduleArgs(exp, dev, float(t0), float(until), wire,
                                                             dict(trace) if trace is not None else None, host),
                         timeout=max(self.timeout, 30.0))

    def link_stop(self, exp: int | str | None = None) -> LinkStopReply:
        return self.call(LinkStopReply, LinkStopArgs(exp), timeout=max(self.timeout, 30.0))

    def shape(self, devs: Sequence[str]) -> ShapeReply:
        """What shapes ``devs`` on the agent's host now, read from its kernel (see netesto.agent.shape)."""
        return self.call(ShapeReply, ShapeArgs(list(devs)))

    def fetch(self, exp: int | str, dest_dir: str | Path, *, ack: bool = True) -> list[Path]:
        """Copy every file of ``<agent datadir>/<exp>/`` into ``dest_dir`` (same relative paths).

        Chunks are checked against their crc32 and each file against its whole
        digest; files are written to ``.part`` and renamed, and an interrupted
        fetch resumes from the ``.part`` length. The agent deletes its copy only
        after ``ack`` (sent once everything is on our disk).
        """
        return fetch_experiment(self, exp, dest_dir, ack=ack)

    def __repr__(self) -> str:
        return f"AgentClient({self.name!r}, {self.address!r}, {self.port})"


__all__ = ["AgentClient", "EventCallback", "WaitResult"]
