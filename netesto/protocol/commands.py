"""Command payloads: one frozen dataclass per request type's arguments, read from and written to the wire.

``XArgs.from_wire(args)`` checks a request's argument map (a missing or
mistyped field is a :class:`~netesto.errors.UsageError` naming it) and
``to_wire()`` gives the map back: the same keys, in the same order, as the
controller's client sends. A field of a class below is optional when it has a
default; the ones marked ``omit`` leave the map when they are None.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Mapping

from netesto.errors import UsageError
from netesto.policy import MAX_CLAIM_CONTROLLER, MAX_CLAIM_RUN
from netesto.protocol.codec import CHUNK_SIZE
from netesto.protocol.messages import COMMANDS

_NUMBER = (int, float)
_EXP = (int, str)  # an experiment: a number or a name (netesto.agent.store checks which)


def _wire(kinds: type | tuple[type, ...], default: Any = MISSING, *, omit: bool = False) -> Any:
    """A field read from the wire as one of ``kinds`` (a bool only if ``kinds`` names bool)."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return field(default=default, metadata={"kinds": kinds, "omit": omit})


def _take(args: Mapping[str, Any], name: str, kinds: tuple[type, ...], default: Any) -> Any:
    if name not in args or args[name] is None:
        if default is MISSING:
            raise UsageError(f"missing argument {name!r}")
        return default
    value = args[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise UsageError(f"argument {name!r} has the wrong type {type(value).__name__}")
    return value


class CommandArgs:
    """Base of the payload classes: ``from_wire`` and ``to_wire`` driven by the fields' ``kinds``."""

    command: ClassVar[str]
    _spec: ClassVar[tuple[tuple[str, tuple[type, ...], Any, bool], ...]] = ()

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Any:
        """The payload of a request's ``args``; UsageError naming a missing or mistyped field."""
        spec = cls._spec
        if not spec:  # hello, time, heartbeat: per request, so no empty comprehension
            return cls()
        return cls(**{name: _take(args, name, kinds, default) for name, kinds, default, _ in spec})

    def to_wire(self) -> dict[str, Any]:
        """The argument map a request carries."""
        out = {}
        for name, _, _, omit in self._spec:
            value = getattr(self, name)
            if not (omit and value is None):
                out[name] = value
        return out


@dataclass(frozen=True)
class NoArgs(CommandArgs):
    """A command without arguments (any it is given are ignored)."""


@dataclass(frozen=True)
class ExpArgs(CommandArgs):
    """A command about one experiment ``exp``."""

    exp: int | str = _wire(_EXP)


@dataclass(frozen=True)
class AnyExpArgs(CommandArgs):
    """A command about one experiment ``exp``, or every one if None (then sent without ``exp``)."""

    exp: int | str | None = _wire(_EXP, None, omit=True)


class HelloArgs(NoArgs):
    """``hello``: no arguments."""

    command = "hello"


class TimeArgs(NoArgs):
    """``time``: no arguments."""

    command = "time"


class HeartbeatArgs(NoArgs):
    """``heartbeat``: no arguments."""

    command = "heartbeat"


@dataclass(frozen=True)
class SnapshotArgs(CommandArgs):
    """``snapshot``: host stats of ``exp`` at step ``order``; ``host`` names the files (the agent's
    short name if None), ``interfaces`` the devices (the ones up if None)."""

    command: ClassVar[str] = "snapshot"
    exp: int | str = _wire(_EXP)
    order: int = _wire(int, 0)
    host: str | None = _wire(str, None, omit=True)
    interfaces: list[Any] | None = _wire(list, None, omit=True)


@dataclass(frozen=True)
class PrepareServerArgs(CommandArgs):
    """``prepare_server``: a test server for ``exp``, the engine's (taking ``token``; "" = open) or
    a peer tool's on ``ports``."""

    command: ClassVar[str] = "prepare_server"
    exp: int | str = _wire(_EXP)
    token: str = _wire(str, "")
    driver: str = _wire(str, "builtin")
    ports: list[Any] | None = _wire(list, None, omit=True)


@dataclass(frozen=True)
class StartFlowsArgs(CommandArgs):
    """``start_flows``: FlowSpec maps of ``exp``, at ``at`` (the agent's clock; None = now), with
    an optional ping to every server."""

    command: ClassVar[str] = "start_flows"
    exp: int | str = _wire(_EXP)
    specs: list[Any] = _wire(list)
    at: float | None = _wire(_NUMBER, None)
    ping: bool = _wire(bool, False)
    ping_interval: float = _wire(_NUMBER, 0.2)


@dataclass(frozen=True)
class PingStartArgs(CommandArgs):
    """``ping_start``: ping ``target`` for ``duration`` s into a file labelled ``name`` (the target if None)."""

    command: ClassVar[str] = "ping_start"
    exp: int | str = _wire(_EXP)
    target: str = _wire(str)
    name: str | None = _wire(str, None, omit=True)
    interval: float = _wire(_NUMBER, 0.2)
    duration: float = _wire(_NUMBER, 10.0)


@dataclass(frozen=True)
class ClaimArgs(CommandArgs):
    """``claim``: run ``run`` of controller ``controller`` owns the agent. Both are what the
    claimer says of itself, shown (escaped) to other controllers the agent refuses; the
    request's claim token is what binds the claim to the run."""

    command: ClassVar[str] = "claim"
    run: str = _wire(str, "")
    controller: str = _wire(str, "")

    def __post_init__(self) -> None:
        for name, value, limit in (("run", self.run, MAX_CLAIM_RUN), ("controller", self.controller,
                                                                      MAX_CLAIM_CONTROLLER)):
            if len(value) > limit:
                raise UsageError(f"claim: {name} is {len(value)} characters long; at most {limit}")


class ReleaseArgs(NoArgs):
    """``release``: no arguments."""

    command = "release"


class StatusArgs(ExpArgs):
    """``status``: the flows of ``exp``."""

    command = "status"


class StopArgs(AnyExpArgs):
    """``stop``: the flows and captures of ``exp`` (every one if None)."""

    command = "stop"


class FetchListArgs(ExpArgs):
    """``fetch_list``: the files of ``exp`` with sizes and digests."""

    command = "fetch_list"


@dataclass(frozen=True)
class FetchChunkArgs(CommandArgs):
    """``fetch_chunk``: ``length`` bytes of ``path`` in ``exp`` from ``offset``."""

    command: ClassVar[str] = "fetch_chunk"
    exp: int | str = _wire(_EXP)
    path: str = _wire(str)
    offset: int = _wire(int, 0)
    length: int = _wire(int, CHUNK_SIZE)


class AckArgs(ExpArgs):
    """``ack``: ``exp`` was fetched whole; the agent deletes it."""

    command = "ack"


@dataclass(frozen=True)
class SetSysctlArgs(CommandArgs):
    """``set_sysctl``: a map of name -> value(s), or ``[[name, value], ...]``."""

    command: ClassVar[str] = "set_sysctl"
    settings: dict[str, Any] | list[Any] = _wire((dict, list))


@dataclass(frozen=True)
class SetModuleParamsArgs(CommandArgs):
    """``set_module_params``: ``params`` (name -> value) of kernel module ``module``."""

    command: ClassVar[str] = "set_module_params"
    module: str = _wire(str)
    params: dict[str, Any] = _wire(dict)


@dataclass(frozen=True)
class SetQdiscArgs(CommandArgs):
    """``set_qdisc``: root qdisc ``qdisc`` on ``dev`` ("" = the default route's) with tc's fields."""

    command: ClassVar[str] = "set_qdisc"
    dev: str = _wire(str, "")
    qdisc: str = _wire(str, "")
    action: str = _wire(str, "")
    rate: str = _wire(str, "")
    burst: str = _wire(str, "")
    limit: str = _wire(str, "")
    other: str = _wire(str, "")


@dataclass(frozen=True)
class SetNetemArgs(CommandArgs):
    """``set_netem``: netem on ``dev``: delay and jitter in ms, loss in %, rate in bit/s, limit in packets."""

    command: ClassVar[str] = "set_netem"
    dev: str = _wire(str, "")
    delay: float = _wire(_NUMBER, 0.0)
    jitter: float = _wire(_NUMBER, 0.0)
    loss: float = _wire(_NUMBER, 0.0)
    rate: int = _wire(int, 0)
    limit: int = _wire(int, 1000)


@dataclass(frozen=True)
class TcpdumpStartArgs(CommandArgs):
    """``tcpdump_start``: capture ``packets`` on ``dev`` of ``server`` ("X" = any) into ``exp``."""

    command: ClassVar[str] = "tcpdump_start"
    exp: int | str = _wire(_EXP)
    dev: str = _wire(str, "")
    server: str = _wire(str, "X")
    packets: int = _wire(int, 10000)


class TcpdumpStopArgs(AnyExpArgs):
    """``tcpdump_stop``: the captures of ``exp`` (every one if None)."""

    command = "tcpdump_stop"


class RestoreArgs(NoArgs):
    """``restore``: no arguments."""

    command = "restore"


@dataclass(frozen=True)
class TraceStartArgs(CommandArgs):
    """``trace_start``: record tcp_probe (and retransmission, congestion-state) events of ``ports`` for
    ``exp`` with ``buffer_kb`` of ring buffer per CPU; ``events`` (None: all three) by name."""

    command: ClassVar[str] = "trace_start"
    exp: int | str = _wire(_EXP)
    ports: list[Any] = _wire(list)
    buffer_kb: int = _wire(int, 4096)
    events: list[Any] | None = _wire(list, None, omit=True)


class TraceStopArgs(ExpArgs):
    """``trace_stop``: end ``exp``'s traces (their files are written after; ask until ``done``)."""

    command = "trace_stop"


@dataclass(frozen=True)
class WatchStartArgs(CommandArgs):
    """``watch_start``: sample every ``interval`` s the TCP sockets a filter matches (``ports``: either
    end's, ``local_ports``, ``remote_ports``, ``addresses`` with prefixes, a ``cgroup`` directory, a ``pid``
    and its children) as watch ``name`` of ``exp``; ``flows``: flow ends to find among them
    (:class:`~netesto.collectors.sockwatch.FlowMatch` maps); ``moves``: ``flows/`` files to set aside."""

    command: ClassVar[str] = "watch_start"
    exp: int | str = _wire(_EXP)
    name: str = _wire(str)
    interval: float = _wire(_NUMBER, 0.01)
    ports: list[Any] | None = _wire(list, None, omit=True)
    local_ports: list[Any] | None = _wire(list, None, omit=True)
    remote_ports: list[Any] | None = _wire(list, None, omit=True)
    addresses: list[Any] | None = _wire(list, None, omit=True)
    cgroup: str = _wire(str, "")
    pid: int = _wire(int, 0)
    flows: list[Any] | None = _wire(list, None, omit=True)
    moves: list[Any] | None = _wire(list, None, omit=True)


@dataclass(frozen=True)
class WatchStopArgs(CommandArgs):
    """``watch_stop``: end ``exp``'s watches (only ``name`` if given; ask until ``done``)."""

    command: ClassVar[str] = "watch_stop"
    exp: int | str = _wire(_EXP)
    name: str | None = _wire(str, None, omit=True)


@dataclass(frozen=True)
class LinkScheduleArgs(CommandArgs):
    """``link_schedule``: the link ``dev`` of ``exp`` takes each step ``[seconds after t0, parameter, value]``
    (:mod:`netesto.linkshape`) from ``t0`` until ``until`` (both the agent's clock), then its shape
    before; ``trace`` (``{"name", "text", "limit_bytes", "limit_packets"}``) makes it trace-driven;
    ``host`` is the lab's name of the agent."""

    command: ClassVar[str] = "link_schedule"
    exp: int | str = _wire(_EXP)
    dev: str = _wire(str)
    t0: float = _wire(_NUMBER)
    until: float = _wire(_NUMBER)
    steps: list[Any] = _wire(list)
    trace: dict[str, Any] | None = _wire(dict, None, omit=True)
    host: str = _wire(str, "")  # the lab's name of this agent (its record says whose clock it is)


class LinkStopArgs(AnyExpArgs):
    """``link_stop``: end the link schedules of ``exp`` (every one if None), the links back as they were."""

    command = "link_stop"


@dataclass(frozen=True)
class ShapeArgs(CommandArgs):
    """``shape``: what shapes ``devs`` now (rate, queue, delay, jitter, loss), read from the kernel."""

    command: ClassVar[str] = "shape"
    devs: list[Any] = _wire(list)


_CLASSES: tuple[type[CommandArgs], ...] = (
    HelloArgs, TimeArgs, HeartbeatArgs, SnapshotArgs, PrepareServerArgs, StartFlowsArgs, StatusArgs, StopArgs,
    FetchListArgs, FetchChunkArgs, AckArgs, SetSysctlArgs, SetModuleParamsArgs, SetQdiscArgs, SetNetemArgs,
    TcpdumpStartArgs, TcpdumpStopArgs, PingStartArgs, RestoreArgs, ClaimArgs, ReleaseArgs,
    TraceStartArgs, TraceStopArgs, WatchStartArgs, WatchStopArgs, LinkScheduleArgs, LinkStopArgs, ShapeArgs)
# The payload class of each command, in COMMANDS order.
COMMAND_ARGS: Mapping[str, type[CommandArgs]] = {
    cls.command: cls for cls in sorted(_CLASSES, key=lambda c: COMMANDS.index(c.command))}
for _cls in COMMAND_ARGS.values():
    _cls._spec = tuple((f.name, f.metadata["kinds"], f.default, f.metadata["omit"])
                       for f in fields(_cls) if "kinds" in f.metadata)  # type: ignore[arg-type]
assert tuple(COMMAND_ARGS) == COMMANDS, "one payload class per command"

__all__ = [
    "AckArgs",
    "AnyExpArgs",
    "COMMAND_ARGS",
    "ClaimArgs",
    "CommandArgs",
    "ExpArgs",
    "FetchChunkArgs",
    "FetchListArgs",
    "HeartbeatArgs",
    "HelloArgs",
    "LinkScheduleArgs",
    "LinkStopArgs",
    "NoArgs",
    "PingStartArgs",
    "PrepareServerArgs",
    "ReleaseArgs",
    "RestoreArgs",
    "SetModuleParamsArgs",
    "SetNetemArgs",
    "SetQdiscArgs",
    "SetSysctlArgs",
    "ShapeArgs",
    "SnapshotArgs",
    "StartFlowsArgs",
    "StatusArgs",
    "StopArgs",
    "TcpdumpStartArgs",
    "TcpdumpStopArgs",
    "TimeArgs",
    "TraceStartArgs",
    "TraceStopArgs",
    "WatchStartArgs",
    "WatchStopArgs",
]
