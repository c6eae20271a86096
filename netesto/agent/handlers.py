"""The agent's command handlers: one method per request type, each quick (the loop must stay responsive)."""

from __future__ import annotations

import os
import platform
import re
import socket
import time
import zlib
from dataclasses import replace
from typing import Any, Mapping, Protocol

from netesto._version import __version__
from netesto.agent.config import AgentConfig
from netesto.agent.control import HostControl
from netesto.agent.facts import interfaces, qdiscs, tool_versions
from netesto.collectors.tcpinfo import congestion_controls
from netesto.agent.flows import FlowManager
from netesto.agent.lease import Lease
from netesto.agent.observe import ObserveHandlers, Observers
from netesto.agent.links import LinkShaper
from netesto.agent.owner import Ownership, Peer
from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError
from netesto.protocol.codec import CHUNK_SIZE
from netesto.protocol.commands import (
    COMMAND_ARGS,
    AckArgs,
    ClaimArgs,
    FetchChunkArgs,
    FetchListArgs,
    HeartbeatArgs,
    HelloArgs,
    LinkScheduleArgs,
    LinkStopArgs,
    PingStartArgs,
    PrepareServerArgs,
    ReleaseArgs,
    RestoreArgs,
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
    TimeArgs,
)
from netesto.protocol.messages import COMMANDS
from netesto.protocol.replies import (
    AckReply,
    ChunkReply,
    ClaimReply,
    CommandReply,
    FetchListReply,
    HeartbeatReply,
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
from netesto.protocol.version import PROTOCOL_VERSION

MAX_CHUNK = 8 * CHUNK_SIZE
_IFACE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")


class AgentState(Protocol):
    """What the handlers use of the agent: its configuration, its parts, the requesting peer."""

    config: AgentConfig
    store: DataStore
    lease: Lease
    control: HostControl
    flows: FlowManager
    links: LinkShaper
    ownership: Ownership
    observers: Observers
    peer: Peer


class Handlers(ObserveHandlers):
    """``cmd_<type>(payload) -> reply``, the payload read by its :mod:`netesto.protocol.commands` class,
    the reply one of :mod:`netesto.protocol.replies`; errors are NetestoErrors the server turns into replies."""

    def __init__(self, agent: AgentState) -> None:
        self.agent = agent
        self.table = {name: getattr(self, f"cmd_{name}") for name in COMMANDS}
        # exp -> {path: (size, sha256)} of its last fetch_list: ack deletes only what was listed.
        self.listed: dict[str, dict[str, tuple[int, str]]] = {}

    def dispatch(self, type: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """The result map of command ``type`` with ``args`` (its reply's ``to_wire()``)."""
        method = self.table.get(type)
        if method is None:
            raise AgentError(f"unknown command {type!r}; this agent knows: {', '.join(COMMANDS)}", kind="UnknownCommand")
        reply: CommandReply = method(COMMAND_ARGS[type].from_wire(args))
        return reply.to_wire()

    # ---- session
    def cmd_hello(self, args: HelloArgs) -> HelloReply:
        a = self.agent
        return HelloReply(
            protocol=PROTOCOL_VERSION,
            package=__version__,
            agent=a.config.name,
            hostname=socket.gethostname(),
            kernel=platform.release(),
            time=time.time(),
            monotonic=time.monotonic(),
            clock="CLOCK_REALTIME (time.time)",
            pid=os.getpid(),
            lease=a.lease.seconds,
            unfetched=a.store.experiments(),
            commands=list(COMMANDS),
            journal_pending=not a.control.journal.empty(),
            tools=tool_versions(),
            congestion=congestion_controls(),
            qdiscs=qdiscs(),
            interfaces=interfaces(),
            stopped_at_start=list(a.stopped_at_start),
        )

    def cmd_claim(self, args: ClaimArgs) -> ClaimReply:
        """The run ``run`` of controller ``controller`` owns the agent (AgentError "lab busy" if another does).

        What the agent stopped as it started was told in the hello before (:meth:`cmd_hello`): to this run, not
        to every run after it."""
        out = self.agent.ownership.claim(self.agent.peer, args.run, args.controller)
        self.agent.stopped_at_start = []
        return out

    def cmd_release(self, args: ReleaseArgs) -> ReleaseReply:
        """The run is over: the agent is free, and the tool servers started for the run go."""
        out = self.agent.ownership.release(self.agent.peer)
        if out.released:
            out = replace(out, tool_servers_stopped=self.agent.flows.stop_tool_servers())
        return out

    def cmd_time(self, args: TimeArgs) -> TimeReply:
        return TimeReply(time.time())

    def cmd_heartbeat(self, args: HeartbeatArgs) -> HeartbeatReply:
        return HeartbeatReply(self.agent.lease.seconds, time.time())

    # ---- data collection
    def cmd_snapshot(self, args: SnapshotArgs) -> SnapshotReply:
        exp = exp_name(args.exp)
        order = args.order
        host = self.agent.config.name.split(".")[0] if args.host is None else args.host
        if not _FILE_NAME.match(host):  # it names files: <exp>/<order>/<host>.snmp, never a path
            raise AgentError(f"bad host name {host!r} for snapshot: expected [A-Za-z0-9_.-], no '/'", kind="UsageError")
        interfaces = args.interfaces
        for iface in interfaces or ():  # names under /sys/class/net and ethtool arguments, never paths
            if not isinstance(iface, str) or not _IFACE.match(iface):
                raise AgentError(f"bad interface {iface!r} for snapshot: expected a device name like eth0",
                                 kind="UsageError")
        try:
            from netesto.collectors.hoststats import snapshot
        except ImportError as exc:
            raise AgentError(f"host stats collection is not available on this agent: {exc}", kind="Unavailable") from exc
        # interfaces=None: hoststats' default, the non-loopback interfaces that are up
        # (down ifb devices would cost three ethtool runs each for nothing).
        dest = self.agent.store.exp_dir(exp) / str(order)
        dest.mkdir(parents=True, exist_ok=True)
        paths = snapshot(dest, host, interfaces)
        base = self.agent.store.exp_dir(exp)
        return SnapshotReply([os.path.relpath(p, base) for p in paths])

    def cmd_prepare_server(self, args: PrepareServerArgs) -> ServerReply:
        return self.agent.flows.prepare_server(args.exp, args.token, args.driver, args.ports)

    def cmd_start_flows(self, args: StartFlowsArgs) -> StartFlowsReply:
        return self.agent.flows.start_flows(
            args.exp, args.specs, None if args.at is None else float(args.at), ping=args.ping,
            ping_interval=float(args.ping_interval))

    def cmd_ping_start(self, args: PingStartArgs) -> PingReply:
        return self.agent.flows.ping_start(
            args.exp, args.target, args.target if args.name is None else args.name,
            interval=float(args.interval), duration=float(args.duration))

    def cmd_status(self, args: StatusArgs) -> StatusReply:
        return self.agent.flows.status(args.exp)

    def cmd_stop(self, args: StopArgs) -> StopReply:
        exp = args.exp
        stopped = self.agent.flows.stop(exp)
        self.agent.observers.signal(None if exp is None else exp_name(exp))
        self.agent.links.stop(None if exp is None else exp_name(exp), "the run was stopped")
        return StopReply(stopped, self.agent.control.tcpdump_stop(None if exp is None else exp_name(exp)).stopped)

    # ---- bulk data
    def cmd_fetch_list(self, args: FetchListArgs) -> FetchListReply:
        exp = exp_name(args.exp)
        status = self.agent.flows.status(exp)
        if not status.running:
            self.agent.flows.reap_pings(exp)  # GET_DATA after the flows: close the ping files first
        files = self.agent.store.files(exp)
        self.listed[exp] = {f.path: (f.size, f.sha256) for f in files}
        # A running tcpdump still writes its pcap: like a running flow, the client must not ack.
        dumps = [f"tcpdump pid {pid}" for pid in self.agent.control.tcpdumps_running(exp)]
        dumps += self.agent.observers.running(exp)
        return FetchListReply(exp, files, CHUNK_SIZE, status.running + status.server_running + dumps)

    def cmd_fetch_chunk(self, args: FetchChunkArgs) -> ChunkReply:
        exp = exp_name(args.exp)
        path, offset, length = args.path, args.offset, args.length
        if not 0 <= offset < 2**62 or not 0 < length <= MAX_CHUNK:  # an off_t is 63 bits
            raise AgentError(f"bad chunk offset {offset} / length {length} (max {MAX_CHUNK})", kind="UsageError")
        data = self.agent.store.read_chunk(exp, path, offset, length)
        # crc32 per chunk (cheap, catches damage in transit); each file also has a
        # sha256 in fetch_list that the client checks before it acknowledges.
        crc = zlib.crc32(data)
        return ChunkReply(path, offset, data, crc, len(data) < length)

    def cmd_ack(self, args: AckArgs) -> AckReply:
        exp = exp_name(args.exp)
        status = self.agent.flows.status(exp)
        if status.running or status.server_running:
            raise AgentError(f"experiment {exp} still has running flows; not deleting its data", kind="Busy")
        if self.agent.control.tcpdumps_running(exp):
            raise AgentError(f"experiment {exp} still has a running tcpdump; not deleting its data", kind="Busy")
        if self.agent.observers.running(exp):
            raise AgentError(f"experiment {exp} still has a running trace or watch; not deleting its data",
                             kind="Busy")
        listed = self.listed.get(exp)
        if self.agent.store.exp_dir(exp, create=False).is_dir():
            if listed is None:
                raise AgentError(f"ack of experiment {exp} before any fetch_list of it: nobody was given its files; "
                                 "not deleting its data", kind="UsageError")
            now = {f.path: (f.size, f.sha256) for f in self.agent.store.files(exp)}
            changed = sorted(p for p in now.keys() | listed.keys() if now.get(p) != listed.get(p))
            if changed:
                raise AgentError(f"experiment {exp} changed since it was listed ({', '.join(changed[:10])}"
                                 f"{', ...' if len(changed) > 10 else ''}); not deleting its data: fetch it again",
                                 kind="Busy", detail={"changed": changed})
        deleted = self.agent.store.delete(exp)
        self.listed.pop(exp, None)
        self.agent.flows.forget(exp)
        self.agent.observers.forget(exp)
        return AckReply(exp, deleted)

    # ---- host control
    def cmd_set_sysctl(self, args: SetSysctlArgs) -> SysctlReply:
        return self.agent.control.set_sysctl(args.settings)

    def cmd_set_module_params(self, args: SetModuleParamsArgs) -> ModuleParamsReply:
        return self.agent.control.set_module_params(args.module, args.params)

    def cmd_set_qdisc(self, args: SetQdiscArgs) -> QdiscReply:
        return self.agent.control.set_qdisc(args.dev, args.qdisc, action=args.action, rate=args.rate,
                                            burst=args.burst, limit=args.limit, other=args.other)

    def cmd_set_netem(self, args: SetNetemArgs) -> NetemReply:
        return self.agent.control.set_netem(args.dev, args.delay, args.jitter, args.loss, args.rate, args.limit)

    def cmd_tcpdump_start(self, args: TcpdumpStartArgs) -> TcpdumpStartReply:
        exp = exp_name(args.exp)
        return self.agent.control.tcpdump_start(self.agent.store.exp_dir(exp), exp, args.dev, args.server, args.packets)

    def cmd_tcpdump_stop(self, args: TcpdumpStopArgs) -> TcpdumpStopReply:
        exp = args.exp
        return self.agent.control.tcpdump_stop(None if exp is None else exp_name(exp))

    def cmd_restore(self, args: RestoreArgs) -> RestoreReply:
        links = self.agent.links.stop(None, "the run restored its hosts")
        done = self.agent.control.restore()
        return RestoreReply([f"link {dev}" for dev in links.stopped] + done.restored, links.errors + done.errors)

    # ---- link schedules (netesto.agent.links)
    def cmd_link_schedule(self, args: LinkScheduleArgs) -> LinkScheduleReply:
        return self.agent.links.start(args, exp_name(args.exp))

    def cmd_link_stop(self, args: LinkStopArgs) -> LinkStopReply:
        return self.agent.links.stop(None if args.exp is None else exp_name(args.exp), "link_stop")

    def cmd_shape(self, args: ShapeArgs) -> ShapeReply:
        from netesto.agent.shape import shape_of

        if not 0 < len(args.devs) <= 64 or not all(isinstance(d, str) for d in args.devs):
            raise AgentError("shape: devs must be 1 to 64 device names", kind="UsageError")
        return ShapeReply({dev: shape_of(dev, self.agent.control.netem_fallback) for dev in args.devs})


__all__ = ["AgentState", "Handlers"]
