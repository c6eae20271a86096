"""The one exception tree of netesto.

Every error netesto raises on purpose derives from :class:`NetestoError`::

    NetestoError
    ├── UsageError              bad command-line or API argument
    ├── ScriptError             script language: file, line, column, offending text
    ├── LabError                lab file / testbed: unknown host, bad address, missing key
    ├── TestbedError            namespaces, veths, qdiscs, delay line on one machine
    ├── TrafficError            flow engine: bad flow spec, connect failure, flow died
    │   └── CongestionControlError   unknown or disallowed congestion control
    ├── ProtocolError           malformed, oversized or wrong-version wire message
    │   └── VersionMismatch     protocol major version differs (names both)
    ├── AgentError              an agent refused or failed a request (names the host)
    │   ├── AgentUnreachable    no answer within the timeout (names host:port)
    │   └── PolicyError         refused by the agent's allowlist (sysctl, module, qdisc)
    ├── RawDataError            truncated or corrupted raw flow file (names the file)
    ├── ResultsError            processing results: datasets, exp.csv, analysis
    ├── StorageError            the controller cannot write its workdir (disk full): agents keep the data
    ├── SweepError              a sweep's notebook, grid, manifest or criteria (names the point)
    └── RunInterrupted          Ctrl-C, SIGTERM/SIGHUP or a cancel stopped a run: hosts restored,
                                what was collected kept and processed, in ``.result``

Errors from libraries underneath (zmq, msgpack, OSError from subprocesses) are
translated at the boundary with ``raise X(...) from exc`` so callers catch one
root. Each error renders itself with :meth:`NetestoError.format_message` and
knows the process exit status the command line uses for it.
"""

from __future__ import annotations

from typing import Any


MAX_MESSAGE = 2000  # characters of a message shown; a 6 MB FOR line must not print 6 MB
EXCERPT = 160  # characters of a script line shown around the error's column


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was left out.

    >>> clip("x" * 10, 4)
    'xxxx... (6 more characters)'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


class NetestoError(Exception):
    """Root of every error netesto raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def format_message(self) -> str:
        """The one-paragraph text shown to users (no traceback), bounded in size."""
        return clip(self.message)

    def __str__(self) -> str:
        return self.format_message()


class UsageError(NetestoError):
    """A bad command-line or API argument."""

    exit_code = 2


class ScriptError(NetestoError):
    """An error in a script: where it is, what was there, what was expected.

    ``file``, ``line`` and ``column`` are 1-based; ``text`` is the offending
    source line (after continuation joining) and ``hint`` an optional
    "did you mean ..." suggestion.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str = "<script>",
        line: int = 0,
        column: int = 0,
        text: str = "",
        hint: str = "",
    ) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.text = text
        self.hint = hint
        super().__init__(message)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def format_message(self) -> str:
        out = [f"{self.where}: error: {clip(self.message, EXCERPT * 2)}"]
        if self.text:
            text, column = self._excerpt()
            out.append(f"    {text}")
            if column > 0:
                # the text's own tabs under it: a terminal expands both lines alike
                lead = "".join(c if c == "\t" else " " for c in text[: column - 1])
                out.append("    " + lead.ljust(column - 1) + "^")
        if self.hint:
            out.append(f"    {clip(self.hint, EXCERPT * 2)}")
        return "\n".join(out)

    def _excerpt(self) -> tuple[str, int]:
        """The part of a long line around the column (with "..." where cut), and the column in it."""
        text, column = self.text, self.column
        if len(text) <= EXCERPT:
            return text, column
        start = max(0, min(column - 1 - EXCERPT // 2, len(text) - EXCERPT))
        piece = text[start:start + EXCERPT]
        head = "..." if start > 0 else ""
        tail = "..." if start + EXCERPT < len(text) else ""
        return head + piece + tail, (column - start + len(head)) if column > 0 else 0


class LabError(NetestoError):
    """A lab description problem: unknown host, bad address, missing key."""

    exit_code = 2


class TestbedError(NetestoError):
    """Setting up or tearing down a one-machine testbed failed."""

    __test__ = False  # not a pytest test class despite the name


class TrafficError(NetestoError):
    """The flow engine failed: bad flow spec, connect failure, a flow died."""


class CongestionControlError(TrafficError):
    """An unknown or disallowed congestion control was asked for."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = list(available)
        super().__init__(
            f"congestion control {name!r} is not available; "
            f"available: {', '.join(self.available) or '(none)'}"
        )


class ProtocolError(NetestoError):
    """A malformed, oversized or otherwise unacceptable wire message."""


class VersionMismatch(ProtocolError):
    """The peer speaks a protocol with another major version."""

    def __init__(self, ours: str, theirs: str, *, host: str = "") -> None:
        self.ours = ours
        self.theirs = theirs
        self.host = host
        where = f" from {host}" if host else ""
        super().__init__(
            f"protocol version mismatch{where}: we speak {ours}, peer speaks {theirs}"
        )


class AgentError(NetestoError):
    """An agent refused or failed a request; ``host`` names the agent."""

    def __init__(self, message: str, *, host: str = "", kind: str = "", detail: Any = None) -> None:
        self.host = host
        self.kind = kind
        super().__init__(f"{host}: {message}" if host else message, detail=detail)


class AgentUnreachable(AgentError):
    """An agent did not answer within the timeout."""


class PolicyError(AgentError):
    """Refused by an allowlist (sysctl, module parameter, qdisc field)."""


class RawDataError(NetestoError):
    """A raw flow file is truncated or corrupted; ``path`` names it."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class ResultsError(NetestoError):
    """Processing results failed: datasets, exp.csv, analysis."""


class StorageError(NetestoError):
    """The controller cannot write its working directory (disk full, permissions).

    What was not stored stays on the agents (nothing is acknowledged before it is
    written): ``netesto run --collect`` into a directory with room fetches it.
    """


class SweepError(NetestoError):
    """A sweep cannot start or go on: its notebook has no parameters cell, a
    parameter is unknown, the grid is empty, the output directory holds another
    sweep, a criterion does not parse. Failures of single points are not errors:
    they are recorded in the manifest and the sweep goes on."""

    exit_code = 2


class RunInterrupted(NetestoError):
    """A run was stopped before its end (Ctrl-C, SIGTERM, SIGHUP, a cancel).

    By the time it is raised the flows are stopped, the hosts restored and the data
    collected so far fetched, processed and kept; ``result`` is the run's
    :class:`~netesto.controller.result.RunResult` (``interrupted`` is true).
    """

    exit_code = 130

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message, detail=result)

    @property
    def result(self) -> Any:
        """The interrupted run's RunResult (the error's ``detail``)."""
        return self.detail


__all__ = [
    "AgentError",
    "AgentUnreachable",
    "CongestionControlError",
    "LabError",
    "NetestoError",
    "PolicyError",
    "ProtocolError",
    "RawDataError",
    "ResultsError",
    "RunInterrupted",
    "ScriptError",
    "StorageError",
    "SweepError",
    "TestbedError",
    "TrafficError",
    "UsageError",
    "VersionMismatch",
]
