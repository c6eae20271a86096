"""Error kinds: one closed table, used by the agent to send and by clients to raise."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from netesto import errors
from netesto.errors import AgentError, PolicyError, VersionMismatch
from netesto.protocol.errorkinds import ERROR_KINDS, error_from_reply, error_kind
from netesto.protocol.messages import ErrorInfo

PACKAGE = Path(__file__).resolve().parents[2] / "netesto"


def _kinds_in_source() -> dict[str, str]:
    """Every literal ``kind="..."`` and ``ErrorInfo("...", ...)`` in the package -> where it is."""
    found: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            values = [k.value for k in node.keywords if k.arg == "kind" and name.endswith("Error")]
            if name == "ErrorInfo" and node.args:
                values.append(node.args[0])
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.setdefault(value.value, f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_every_kind_the_code_names_is_in_the_table() -> None:
    found = _kinds_in_source()
    assert {"Busy", "ControlError", "NotFound", "PolicyError", "UsageError", "VersionMismatch"} <= found.keys()
    unknown = {k: where for k, where in found.items() if k not in ERROR_KINDS}
    assert not unknown, unknown


def test_every_class_in_the_table_is_an_agent_error_or_the_version_mismatch() -> None:
    for kind, cls in ERROR_KINDS.items():
        assert issubclass(cls, AgentError) or cls is VersionMismatch, kind
        assert cls.__name__ in (kind, "AgentError"), (kind, cls)


@pytest.mark.parametrize("exc, kind", [
    (AgentError("x", kind="Busy"), "Busy"),
    (AgentError("x"), "AgentError"),
    (AgentError("x", kind="NotInTheTable"), "AgentError"),
    (PolicyError("x", kind="PolicyError"), "PolicyError"),
    (errors.UsageError("x"), "UsageError"),
    (errors.TrafficError("x"), "TrafficError"),
    (errors.CongestionControlError("vegas", ["cubic"]), "CongestionControlError"),
    (errors.ProtocolError("x"), "ProtocolError"),
    (VersionMismatch("1.0", "2.0"), "VersionMismatch"),
    (errors.RawDataError("x"), "AgentError"),  # not a kind: the closed set's catch-all
    (ValueError("x"), "AgentError"),
])
def test_the_agent_sends_a_kind_from_the_table(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind and kind in ERROR_KINDS


@pytest.mark.parametrize("kind", sorted(ERROR_KINDS))
def test_a_client_raises_the_class_the_table_names(kind: str) -> None:
    detail = {"ours": "2.0", "theirs": "1.0"} if kind == "VersionMismatch" else {"n": 1}
    exc = error_from_reply(ErrorInfo(kind, "refused", detail), host="h1", where="h1:12870", what="set_qdisc")
    assert type(exc) is ERROR_KINDS[kind]
    if isinstance(exc, VersionMismatch):
        assert (exc.ours, exc.theirs, exc.host) == ("1.0", "2.0", "h1:12870")
    else:
        assert isinstance(exc, AgentError)
        assert exc.kind == kind and exc.host == "h1" and exc.detail == {"n": 1}
        assert str(exc) == "h1: set_qdisc: refused"


def test_a_kind_from_a_newer_agent_is_still_an_agent_error_carrying_it() -> None:
    exc = error_from_reply(ErrorInfo("Overheated", "too hot"), host="h2")
    assert type(exc) is AgentError and exc.kind == "Overheated" and str(exc) == "h2: too hot"


@pytest.mark.parametrize("kind", sorted(ERROR_KINDS) + ["Overheated"])
def test_the_controller_client_raises_what_the_table_says(kind: str) -> None:
    # Until the client calls error_from_reply itself, it must agree with it.
    from types import SimpleNamespace

    from netesto.controller.connection import AgentConnection

    client = SimpleNamespace(name="h1", where="h1:12870")
    info = ErrorInfo(kind, "refused", {"ours": "2.0", "theirs": "1.0"})
    theirs = AgentConnection._error(client, info, "set_qdisc")  # type: ignore[arg-type]
    ours = error_from_reply(info, host="h1", where="h1:12870", what="set_qdisc")
    assert type(theirs) is type(ours) and str(theirs) == str(ours)
    assert getattr(theirs, "kind", None) == getattr(ours, "kind", None)
    assert getattr(theirs, "host", None) == getattr(ours, "host", None)
