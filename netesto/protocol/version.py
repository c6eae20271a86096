"""The wire-protocol version: separate from the package version, in every message."""

from __future__ import annotations

import functools

from netesto.errors import ProtocolError, VersionMismatch

# Bump the minor number for backward-compatible additions (new commands, new
# optional fields); bump the major number when old peers cannot understand us.
PROTOCOL_VERSION = "1.0"


@functools.lru_cache(maxsize=64)  # every message carries one: parse each distinct text once
def _parse(text: str) -> tuple[int, int]:
    major, dot, minor = text.partition(".")
    if not dot or not major.isdigit() or not minor.isdigit():
        raise ProtocolError(f"bad protocol version {text!r}: expected MAJOR.MINOR")
    return int(major), int(minor)


def parse_version(text: str) -> tuple[int, int]:
    """``"1.2"`` -> ``(1, 2)``; anything else is a :class:`ProtocolError`.

    >>> parse_version("1.0")
    (1, 0)
    """
    if not isinstance(text, str):
        raise ProtocolError(f"protocol version must be text like '1.0', got {text!r}")
    return _parse(text)


def check_compatible(theirs: str, *, ours: str = PROTOCOL_VERSION, host: str = "") -> None:
    """Raise :class:`VersionMismatch` (naming both versions) if the majors differ."""
    if theirs == ours:
        return
    if parse_version(theirs)[0] != parse_version(ours)[0]:
        raise VersionMismatch(ours, theirs, host=host)


__all__ = ["PROTOCOL_VERSION", "check_compatible", "parse_version"]
