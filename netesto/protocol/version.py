"""The wire-protocol version: separate from the package version, in every message."""

from __future__ import annotations

import functools
import re

from netesto.errors import ProtocolError, VersionMismatch

# Bump the minor number for backward-compatible additions (new commands, new
# optional fields); bump the major number when old peers cannot understand us.
PROTOCOL_VERSION = "1.0"


# ASCII digits only and a few of them: str.isdigit() also takes digits int() refuses
# ("\u00b2") and int() refuses more than 4300 digits, and a peer's text must never
# raise anything but ProtocolError.
_VERSION = re.compile(r"([0-9]{1,9})\.([0-9]{1,9})", re.ASCII)


@functools.lru_cache(maxsize=64)  # every message carries one: parse each distinct text once
def _parse(text: str) -> tuple[int, int]:
    match = _VERSION.fullmatch(text)
    if match is None:
        shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
        raise ProtocolError(f"bad protocol version {shown}: expected MAJOR.MINOR")
    return int(match[1]), int(match[2])


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
