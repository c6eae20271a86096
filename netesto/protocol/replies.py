"""Command replies: one frozen dataclass per request type's result, read from and written to the wire.

The agent builds each reply as its class and sends ``to_wire()``: the map it
always sent, the same keys in the same order. The controller reads the result
back with ``XReply.from_wire(result)``: a result that is not a map, or a field
that is missing or of the wrong type, is a :class:`~netesto.errors.ProtocolError`
("malformed <command> reply: ...") naming the field. A field with a default
may be absent; the ones marked ``omit`` leave the map when they are None.
Fields that are free-form by nature (host facts, sysctl values, flow progress)
stay maps.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Mapping, Self

from netesto.errors import ProtocolError
from netesto.protocol.messages import COMMANDS

_NUMBER = (int, float)


def _wire(kinds: type | tuple[type, ...], default: Any = MISSING, *, omit: bool = False,
          items: type | tuple[type, ...] | None = None, factory: Callable[[], Any] | None = None) -> Any:
    """A field read from the wire as one of ``kinds`` (a bool only if ``kinds`` names bool); a list's
    elements as one of ``items``."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    items = items if isinstance(items, tuple) or items is None else (items,)
    meta = {"kinds": kinds, "omit": omit, "items": items, "factory": factory}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _bad(command: str, problem: str) -> ProtocolError:
    return ProtocolError(f"malformed {command} reply: {problem}")


_Spec = tuple[str, tuple[type, ...], Any, bool, "tuple[type, ...] | None", "Callable[[], Any] | None"]


class CommandReply:
    """Base of the reply classes: ``from_wire`` and ``to_wire`` driven by the fields' ``kinds``."""

    command: ClassVar[str]
    _spec: ClassVar[tuple[_Spec, ...]] = ()

    @classmethod
    def from_wire(cls, result: Any) -> Self:
        """The reply in a result; ProtocolError naming the command and a missing or mistyped field."""
        if not isinstance(result, dict):
            raise _bad(cls.command, f"expected a map, got {type(result).__name__}")
        return cls(**cls._fields(result))

    @classmethod
    def _fields(cls, result: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for name, kinds, default, _, items, factory in cls._spec:
            value = result.get(name)
            if value is None:
                if factory is not None:
                    value = factory()
                elif default is MISSING:
                    raise _bad(cls.command, f"{name} is missing")
                else:
                    value = default
            elif not _is(value, kinds):
                raise _bad(cls.command, f"{name}={value!r:.80} is not {' or '.join(k.__name__ for k in kinds)}")
            elif items is not None and not all(_is(x, items) for x in value):
                raise _bad(cls.command, f"{name}={value!r:.80}: expected a list of "
                                        f"{' or '.join(k.__name__ for k in items)}")
            out[name] = value
        return out

    def to_wire(self) -> dict[str, Any]:
        """The result map the agent sends."""
        out = {}
        for name, _, _, omit, _, _ in self._spec:
            value = getattr(self, name)
            if not (omit and value is None):
                out[name] = value
        return out


@dataclass(frozen=True)
class HelloReply(CommandReply):
    """``hello``: who the agent is (versions, host, clocks, lease), what it still holds and can do.

    Every field has a default: the controller reads what the agent told."""

    command: ClassVar[str] = "hello"
    protocol: str = _wire(str, "")
    package: str = _wire(str, "")
    agent: str = _wire(str, "")
    hostname: str = _wire(str, "")
    kernel: str = _wire(str, "")
    time: float = _wire(_NUMBER, 0.0)
    monotonic: float = _wire(_NUMBER, 0.0)
    clock: str = _wire(str, "")
    pid: int = _wire(int, 0)
    lease: float = _wire(_NUMBER, 0.0)
    unfetched: list[str] = _wire(list, items=str, factory=list)
    commands: list[str] = _wire(list, items=str, factory=list)
    journal_pending: bool = _wire(bool, False)
    tools: Mapping[str, str] = _wire(dict, factory=dict)
    congestion: list[str] = _wire(list, items=str, factory=list)  # algorithms a flow may ask for ([]: not said)
    qdiscs: list[str] = _wire(list, items=str, factory=list)  # root qdiscs its kernel can install ([]: not said)
    interfaces: list[str] = _wire(list, items=str, factory=list)  # its network devices ([]: not said)
    # processes an earlier agent on the host left running, which this one stopped as it started
    stopped_at_start: list[str] = _wire(list, items=str, factory=list)


@dataclass(frozen=True)
class TimeReply(CommandReply):
    """``time``: the agent's clock (``time.time()``)."""

    command: ClassVar[str] = "time"
    time: float = _wire(_NUMBER)


@dataclass(frozen=True)
class HeartbeatReply(CommandReply):
    """``heartbeat``: the lease the request renewed, and the agent's clock."""

    command: ClassVar[str] = "heartbeat"
    lease: float = _wire(_NUMBER)
    time: float = _wire(_NUMBER)


@dataclass(frozen=True)
class SnapshotReply(CommandReply):
    """``snapshot``: the files written, relative to the experiment's directory."""

    command: ClassVar[str] = "snapshot"
    files: list[str] = _wire(list, items=str)


@dataclass(frozen=True)
class ServerReply(CommandReply):
    """``prepare_server``: the test ``port``; the engine's says if it was ``reused``, a peer tool's
    lists its ``ports`` and ``pids``."""

    command: ClassVar[str] = "prepare_server"
    port: int = _wire(int)
    ports: list[int] | None = _wire(list, None, omit=True, items=int)
    pids: list[int] | None = _wire(list, None, omit=True, items=int)
    driver: str = _wire(str, "builtin")
    reused: bool | None = _wire(bool, None, omit=True)


@dataclass(frozen=True)
class StartFlowsReply(CommandReply):
    """``start_flows``: the flow ids started, the engine client's pid and spec file, pings that failed."""

    command: ClassVar[str] = "start_flows"
    flows: list[str] = _wire(list, items=str)
    pid: int = _wire(int)
    specs: str = _wire(str)
    ping_errors: list[str] | None = _wire(list, None, omit=True, items=str)


@dataclass(frozen=True)
class StatusReply(CommandReply):
    """``status``: an experiment's flows by state, their progress and errors, the server ends running."""

    command: ClassVar[str] = "status"
    exp: str = _wire(str)
    running: list[str] = _wire(list, items=str)
    done: list[str] = _wire(list, items=str)
    failed: list[str] = _wire(list, items=str)
    progress: Mapping[str, Any] = _wire(dict)
    errors: Mapping[str, str] = _wire(dict)
    finished: bool = _wire(bool)
    server_running: list[str] = _wire(list, items=str)


@dataclass(frozen=True)
class StopReply(CommandReply):
    """``stop``: the flows stopped and the pids of the captures stopped."""

    command: ClassVar[str] = "stop"
    stopped: list[str] = _wire(list, items=str)
    tcpdump: list[int] = _wire(list, items=int)


@dataclass(frozen=True)
class FileEntry:
    """One file of a ``fetch_list``: its relative '/'-separated path, size and sha256."""

    path: str
    size: int
    sha256: str

    @classmethod
    def from_wire(cls, entry: Any) -> "FileEntry":
        if (not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or "\0" in entry["path"]
                or type(entry.get("size")) is not int or entry["size"] < 0
                or not isinstance(entry.get("sha256"), str)):
            raise _bad("fetch_list", f"bad file entry {entry!r:.200} (expected path, size, sha256)")
        return cls(entry["path"], entry["size"], entry["sha256"])

    def to_wire(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class FetchListReply(CommandReply):
    """``fetch_list``: an experiment's files, the chunk size to ask for, what still writes to them."""

    command: ClassVar[str] = "fetch_list"
    exp: str = _wire(str, "")
    files: list[FileEntry] = _wire(list, factory=list)  # required: from_wire checks it first
    chunk: int = _wire(int, 0)
    flows_running: list[str] = _wire(list, items=str, factory=list)

    @classmethod
    def from_wire(cls, result: Any) -> Self:
        if not isinstance(result, dict):
            raise _bad(cls.command, f"expected a map, got {type(result).__name__}")
        files = result.get("files")
        if not isinstance(files, list):
            raise _bad(cls.command, f"files={files!r:.80} is not a list")
        entries = [FileEntry.from_wire(f) for f in files]  # all checked before anything is written
        chunk = result.get("chunk")
        if chunk is not None and (type(chunk) is not int or chunk <= 0):
            raise _bad(cls.command, f"chunk={chunk!r} is not a positive integer")
        return cls(**{**cls._fields({**result, "files": []}), "files": entries})

    def to_wire(self) -> dict[str, Any]:
        out = super().to_wire()
        out["files"] = [f.to_wire() for f in self.files]
        return out


@dataclass(frozen=True)
class ChunkReply(CommandReply):
    """``fetch_chunk``: ``data`` of ``path`` from ``offset``, its crc32, and whether the file ended."""

    command: ClassVar[str] = "fetch_chunk"
    path: str = _wire(str)
    offset: int = _wire(int)
    data: bytes = _wire(bytes)
    crc32: int = _wire(int)
    eof: bool = _wire(bool, False)


@dataclass(frozen=True)
class AckReply(CommandReply):
    """``ack``: the experiment deleted (False if the agent held nothing of it)."""

    command: ClassVar[str] = "ack"
    exp: str = _wire(str)
    deleted: bool = _wire(bool)


@dataclass(frozen=True)
class AppliedReply(CommandReply):
    """A change of kernel settings: name -> the value read back after writing it."""

    applied: Mapping[str, str] = _wire(dict)


class SysctlReply(AppliedReply):
    """``set_sysctl``: each sysctl's value read back."""

    command = "set_sysctl"


class ModuleParamsReply(AppliedReply):
    """``set_module_params``: each parameter's value read back."""

    command = "set_module_params"


@dataclass(frozen=True)
class QdiscReply(CommandReply):
    """``set_qdisc``: the device, the tc command lines run, the root qdisc now, what restore cannot rebuild."""

    command: ClassVar[str] = "set_qdisc"
    dev: str = _wire(str)
    argv: list[list[str]] = _wire(list, items=list)
    kind: str = _wire(str)
    warnings: list[str] | None = _wire(list, None, omit=True, items=str)


@dataclass(frozen=True)
class NetemReply(CommandReply):
    """``set_netem``: the device and the tc command lines run, or the userspace ``fallback`` that did the
    work and its ``result`` (free-form); ``warnings`` as for set_qdisc."""

    command: ClassVar[str] = "set_netem"
    dev: str = _wire(str)
    argv: list[list[str]] | None = _wire(list, None, omit=True, items=list)
    fallback: str | None = _wire(str, None, omit=True)
    result: Any = None  # sent (even nil) exactly when there is a fallback
    warnings: list[str] | None = _wire(list, None, omit=True, items=str)

    @classmethod
    def from_wire(cls, result: Any) -> Self:
        reply = super().from_wire(result)
        return cls(**{**reply.__dict__, "result": result.get("result")})

    def to_wire(self) -> dict[str, Any]:
        out = super().to_wire()
        if self.fallback is None:
            return out
        return {"dev": out.pop("dev"), "fallback": out.pop("fallback"), "result": self.result, **out}


@dataclass(frozen=True)
class TcpdumpStartReply(CommandReply):
    """``tcpdump_start``: the capture's pid, its file in the experiment, its command line."""

    command: ClassVar[str] = "tcpdump_start"
    pid: int = _wire(int)
    path: str = _wire(str)
    argv: list[str] = _wire(list, items=str)


@dataclass(frozen=True)
class TcpdumpStopReply(CommandReply):
    """``tcpdump_stop``: the pids of the captures stopped."""

    command: ClassVar[str] = "tcpdump_stop"
    stopped: list[int] = _wire(list, items=int)


@dataclass(frozen=True)
class PingReply(CommandReply):
    """``ping_start``: the ping's file, relative to the experiment's directory."""

    command: ClassVar[str] = "ping_start"
    path: str = _wire(str)


@dataclass(frozen=True)
class RestoreReply(CommandReply):
    """``restore``: what was put back, and what could not be."""

    command: ClassVar[str] = "restore"
    restored: list[str] = _wire(list, items=str)
    errors: list[str] = _wire(list, items=str)


@dataclass(frozen=True)
class ClaimReply(CommandReply):
    """``claim``: the run that owns the agent and since when (the agent's clock)."""

    command: ClassVar[str] = "claim"
    run: str = _wire(str)
    since: float = _wire(_NUMBER)


@dataclass(frozen=True)
class ReleaseReply(CommandReply):
    """``release``: whether this controller owned the agent, and the peer-tool servers then stopped."""

    command: ClassVar[str] = "release"
    released: bool = _wire(bool)
    tool_servers_stopped: list[str] | None = _wire(list, None, omit=True, items=str)


@dataclass(frozen=True)
class ObserverReply(CommandReply):
    """``trace_*``/``watch_*``: the experiment's collectors of that kind, each a map (``kind``, ``name``,
    ``pid``, ``state``: running/stopping/done/error, ``summary`` once done, ``error``), and ``done``: all
    of them have finished (a stop asks again until then)."""

    command: ClassVar[str] = ""
    exp: str = _wire(str)
    done: bool = _wire(bool)
    observers: list[Any] = _wire(list, factory=list)


class TraceStartReply(ObserverReply):
    command = "trace_start"


class TraceStopReply(ObserverReply):
    command = "trace_stop"


class WatchStartReply(ObserverReply):
    command = "watch_start"


class WatchStopReply(ObserverReply):
    command = "watch_stop"


@dataclass(frozen=True)
class LinkScheduleReply(CommandReply):
    """``link_schedule``: the link's shape before the schedule (what it takes back: ``rate`` bit/s,
    ``buffer`` bytes, ``delay``/``jitter`` ms, ``loss`` %), its steps, its trace's ``sha256`` (or None)."""

    command: ClassVar[str] = "link_schedule"
    dev: str = _wire(str)
    base: Mapping[str, Any] = _wire(dict, factory=dict)
    steps: int = _wire(int, 0)
    trace: str | None = _wire(str, None, omit=True)


@dataclass(frozen=True)
class LinkStopReply(CommandReply):
    """``link_stop``: the links whose schedules ended (each back as it was), and what could not be put back."""

    command: ClassVar[str] = "link_stop"
    stopped: list[str] = _wire(list, items=str)
    errors: list[str] = _wire(list, items=str, factory=list)


@dataclass(frozen=True)
class ShapeReply(CommandReply):
    """``shape``: per device, what the kernel says shapes it (rate_bps, buffer_bytes, delay_ms,
    jitter_ms, loss 0..1: each only when shown) and tc's text."""

    command: ClassVar[str] = "shape"
    devs: Mapping[str, Any] = _wire(dict)


_CLASSES: tuple[type[CommandReply], ...] = (
    HelloReply, TimeReply, HeartbeatReply, SnapshotReply, ServerReply, StartFlowsReply, StatusReply, StopReply,
    FetchListReply, ChunkReply, AckReply, SysctlReply, ModuleParamsReply, QdiscReply, NetemReply,
    TcpdumpStartReply, TcpdumpStopReply, PingReply, RestoreReply, ClaimReply, ReleaseReply,
    TraceStartReply, TraceStopReply, WatchStartReply, WatchStopReply, LinkScheduleReply, LinkStopReply, ShapeReply)
# The reply class of each command, in COMMANDS order.
COMMAND_REPLIES: Mapping[str, type[CommandReply]] = {
    cls.command: cls for cls in sorted(_CLASSES, key=lambda c: COMMANDS.index(c.command))}
for _cls in COMMAND_REPLIES.values():
    _cls._spec = tuple((f.name, f.metadata["kinds"], f.default, f.metadata["omit"], f.metadata["items"],
                        f.metadata["factory"])
                       for f in fields(_cls) if "kinds" in f.metadata)  # type: ignore[arg-type]
assert tuple(COMMAND_REPLIES) == COMMANDS, "one reply class per command"

__all__ = [
    "AckReply",
    "AppliedReply",
    "COMMAND_REPLIES",
    "ChunkReply",
    "ClaimReply",
    "CommandReply",
    "FetchListReply",
    "FileEntry",
    "HeartbeatReply",
    "HelloReply",
    "LinkScheduleReply",
    "LinkStopReply",
    "ModuleParamsReply",
    "NetemReply",
    "ObserverReply",
    "PingReply",
    "QdiscReply",
    "ReleaseReply",
    "RestoreReply",
    "ServerReply",
    "ShapeReply",
    "SnapshotReply",
    "StartFlowsReply",
    "StatusReply",
    "StopReply",
    "SysctlReply",
    "TcpdumpStartReply",
    "TcpdumpStopReply",
    "TimeReply",
    "TraceStartReply",
    "TraceStopReply",
    "WatchStartReply",
    "WatchStopReply",
]
