"""Error kinds: the closed set of ``ErrorInfo.type`` values and the exception class each one raises.

An agent's failed reply names its error by kind (a string on the wire); the
controller's client raises the class this table maps it to, keeping the kind in
``AgentError.kind``. One table serves both sides: :func:`error_kind` is what
the agent sends for an exception, :func:`error_from_reply` what a client raises
for a reply. A kind from a newer agent that is not in the table still raises an
:class:`~netesto.errors.AgentError` carrying it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from netesto.errors import AgentError, NetestoError, PolicyError, VersionMismatch
from netesto.protocol.messages import ErrorInfo
from netesto.protocol.text import printable

# kind -> the class a client raises for it (every one an AgentError but VersionMismatch).
ERROR_KINDS: Mapping[str, type[NetestoError]] = MappingProxyType({
    "AgentError": AgentError,  # a failure with no more precise kind (also an agent's internal error)
    "AuthFailed": AgentError,  # controller side: the CURVE handshake failed (never sent by an agent)
    "Busy": AgentError,  # the lab, an experiment or a capture is in use
    "CongestionControlError": AgentError,  # an unknown or disallowed congestion control
    "ControlError": AgentError,  # tc, a sysctl or a module parameter write failed
    "EngineError": AgentError,  # the flow engine failed to start or died
    "FlowFailed": AgentError,  # controller side: a flow ended with an error (never sent by an agent)
    "LeftoverData": AgentError,  # controller side: an agent holds unfetched data (never sent by an agent)
    "NotFound": AgentError,  # no such experiment or file
    "PolicyError": PolicyError,  # refused by the allowlist (netesto.policy)
    "ProtocolError": AgentError,  # the reply could not be encoded, or a message was refused
    "ToolError": AgentError,  # an external tool (tcpdump, ping) failed
    "TrafficError": AgentError,  # a flow spec or ping the engine refused
    "Unavailable": AgentError,  # a tool, module or feature this host lacks
    "UnknownCommand": AgentError,  # a request type this agent does not know
    "UsageError": AgentError,  # a missing, mistyped or out-of-range argument
    "VersionMismatch": VersionMismatch,  # the request's protocol major version differs
})


def error_kind(exc: BaseException) -> str:
    """The kind an agent sends for ``exc``: an AgentError's own kind, else the nearest class
    (itself or a base) the table names, else ``"AgentError"``."""
    if type(exc) is AgentError and exc.kind:
        return exc.kind if exc.kind in ERROR_KINDS else "AgentError"
    if isinstance(exc, NetestoError):
        for cls in type(exc).__mro__:
            if cls.__name__ in ERROR_KINDS:
                return cls.__name__
    return "AgentError"


def error_from_reply(info: ErrorInfo, *, host: str = "", where: str = "", what: str = "") -> NetestoError:
    """The exception a client raises for a failed reply's ``info``: ``host`` names the agent,
    ``where`` its address (a version mismatch names it) and ``what`` the request. The agent's
    message is made :func:`~netesto.protocol.text.printable` here, where it enters the controller."""
    cls = ERROR_KINDS.get(info.type, AgentError)
    if cls is VersionMismatch:
        d = info.detail if isinstance(info.detail, dict) else {}
        # The agent's "ours" is its own version, "theirs" ours.
        return VersionMismatch(printable(d.get("theirs", "?"), 40), printable(d.get("ours", "?"), 40),
                               host=where or host)
    assert issubclass(cls, AgentError)
    text = printable(info.message)  # a peer's text: no escape sequences, no forged lines, bounded
    message = f"{what}: {text}" if what else text
    return cls(message, host=host, kind=info.type, detail=info.detail)


__all__ = ["ERROR_KINDS", "error_from_reply", "error_kind"]
