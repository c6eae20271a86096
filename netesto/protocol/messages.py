"""Wire messages: requests, replies, pushed events and structured errors (frozen, validated)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from netesto.errors import ProtocolError
from netesto.policy import MAX_TOKEN
from netesto.protocol.version import PROTOCOL_VERSION, parse_version

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_ID = 2**63 - 1

# The agent's commands (the request ``type``). New commands only ever get added, at
# the end; an agent lists those it knows in ``hello`` (a controller asks an older agent
# nothing it does not list: claim, release and shape came so, the version staying 1.0)
# and answers an unknown one with a structured error.
COMMANDS = (
    "hello",
    "time",
    "heartbeat",
    "snapshot",
    "prepare_server",
    "start_flows",
    "status",
    "stop",
    "fetch_list",
    "fetch_chunk",
    "ack",
    "set_sysctl",
    "set_module_params",
    "set_qdisc",
    "set_netem",
    "tcpdump_start",
    "tcpdump_stop",
    "ping_start",
    "restore",
    "claim",
    "release",
    "trace_start",
    "trace_stop",
    "watch_start",
    "watch_stop",
    "link_schedule",
    "link_stop",
    "shape",
)

# Pushed events (agent -> controller between replies).
EVENTS = ("flow", "flows_done", "lease_warning", "lease_expired", "log")


_KNOWN = frozenset(COMMANDS) | frozenset(EVENTS)


# The checks run for every message in both directions: known names and the
# current version take the cheap path.
def _check_name(what: str, value: Any) -> None:
    if value in _KNOWN:
        return
    if not isinstance(value, str) or not _NAME.match(value):
        raise ProtocolError(f"bad {what} {value!r}: expected a lower-case name like 'hello'")


def _check_id(value: Any) -> None:
    if type(value) is not int or not 0 <= value <= MAX_ID:
        raise ProtocolError(f"bad request id {value!r}: expected an integer >= 0")


def _check_map(what: str, value: Any) -> None:
    if type(value) is not dict and not isinstance(value, Mapping):  # the ABC check is slow: dicts first
        raise ProtocolError(f"bad {what}: expected a map with text keys, got {type(value).__name__}")
    if value and not all(type(k) is str for k in value):
        raise ProtocolError(f"bad {what}: expected a map with text keys, got {type(value).__name__}")


def is_token(value: Any) -> bool:
    """Whether ``value`` can be a claim token: 16 to MAX_TOKEN ASCII letters and digits."""
    return type(value) is str and 16 <= len(value) <= MAX_TOKEN and value.isascii() and value.isalnum()


def _check_version(value: Any) -> None:
    if value != PROTOCOL_VERSION:
        parse_version(value)


@dataclass(frozen=True)
class ErrorInfo:
    """A structured error in a reply: exception class name, message, free detail."""

    type: str
    message: str
    detail: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise ProtocolError(f"bad error type {self.type!r}")
        if not isinstance(self.message, str):
            raise ProtocolError(f"bad error message {self.message!r}")


@dataclass(frozen=True)
class Request:
    """Controller -> agent: run command ``type`` with ``args``; answered by a Reply with the same id.

    ``claim`` is the run's claim token (optional, key ``c`` on the wire; agents of
    protocol 1.0 that predate it ignore it): the proof, in every request of a run, that
    the request belongs to the run that claimed the agent, whatever socket carries it."""

    id: int
    type: str
    args: Mapping[str, Any] = field(default_factory=dict)
    version: str = PROTOCOL_VERSION
    claim: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.id)
        _check_name("request type", self.type)
        _check_map(f"arguments of {self.type}", self.args)
        _check_version(self.version)
        if self.claim is not None and not is_token(self.claim):
            raise ProtocolError(f"bad claim token in request {self.id}: expected up to {MAX_TOKEN} letters and digits")


@dataclass(frozen=True)
class Reply:
    """Agent -> controller: ``ok`` with a ``result``, or not ok with an :class:`ErrorInfo`."""

    id: int
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    version: str = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        _check_id(self.id)
        if not isinstance(self.ok, bool):
            raise ProtocolError(f"bad reply flag ok={self.ok!r}")
        if self.ok and self.error is not None:
            raise ProtocolError("a successful reply cannot carry an error")
        if not self.ok and not isinstance(self.error, ErrorInfo):
            raise ProtocolError("a failed reply must carry an error")
        _check_version(self.version)

    @classmethod
    def success(cls, request_id: int, result: Any = None) -> "Reply":
        return cls(request_id, True, result)

    @classmethod
    def failure(cls, request_id: int, type: str, message: str, detail: Any = None) -> "Reply":
        return cls(request_id, False, None, ErrorInfo(type, message, detail))


@dataclass(frozen=True)
class Event:
    """Agent -> controller, unsolicited: flow progress, flows done, lease warnings."""

    event: str
    data: Mapping[str, Any] = field(default_factory=dict)
    version: str = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        _check_name("event name", self.event)
        _check_map(f"data of event {self.event}", self.data)
        _check_version(self.version)


Message = Union[Request, Reply, Event]

__all__ = ["COMMANDS", "EVENTS", "ErrorInfo", "Event", "Message", "Reply", "Request", "is_token"]
