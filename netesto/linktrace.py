"""Delivery traces in Mahimahi's format: one millisecond timestamp per line, one 1500-byte opportunity each.

A trace lists the instants (ms from its start) at which the link may deliver
:data:`MTU` bytes; several lines with the same timestamp are several
opportunities in that millisecond; timestamps never decrease; the trace
loops, its period being its last timestamp (which must be > 0), as
Mahimahi's ``mm-link`` reads it. ``12`` on every line of a 1 ms trace is
12 Mbit/s; an empty millisecond delivers nothing.

netesto ships a few traces it generates itself (``python -m
netesto.testbed.tracegen``, reproducible), found by name; any other file is
read by its path. The script checks a trace at plan time, the router agent
and the delay line read it again, and tests compare what a link delivered
with :func:`bytes_between`.

>>> t = parse_trace("1\\n1\\n3\\n", "x")
>>> t.period_ms, t.opportunities, t.mean_bps
(3, 3, 12000000.0)
>>> bytes_between(t, 0, 6)   # two periods: 6 opportunities of 1500 bytes
9000
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

MTU = 1500  # bytes one delivery opportunity carries
MAX_TRACE_BYTES = 8 * 2**20  # a trace file's text (Mahimahi's longest shipped traces are ~3 MB)
MAX_PERIOD_MS = 3_600_000  # one hour before it loops
SUFFIX = ".trace"


@dataclass(frozen=True)
class Trace:
    """A parsed trace: its opportunity times (ms, non-decreasing), its period, where it came from."""

    name: str
    times: tuple[int, ...]
    sha256: str = ""

    @property
    def period_ms(self) -> int:
        return self.times[-1]

    @property
    def opportunities(self) -> int:
        return len(self.times)

    @property
    def mean_bps(self) -> float:
        """The rate the trace offers over one period, bit/s."""
        return self.opportunities * MTU * 8 / (self.period_ms / 1000)

    def peak_bps(self, window_ms: int = 100) -> float:
        """The highest rate over any ``window_ms`` window starting on a millisecond of one period."""
        best = max(bytes_between(self, s, s + window_ms) for s in range(0, self.period_ms, max(1, window_ms // 10)))
        return best * 8 / (window_ms / 1000)


def parse_trace(text: str, name: str = "<trace>") -> Trace:
    """The trace in ``text``; ValueError naming ``name:line`` and what is wrong there."""
    if len(text) > MAX_TRACE_BYTES:
        raise ValueError(f"{name}: {len(text)} bytes is more than a trace may have ({MAX_TRACE_BYTES})")
    times: list[int] = []
    last = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        word = line.strip()
        if not word:
            raise ValueError(f"{name}:{lineno}: an empty line (a trace has one timestamp in ms on every line)")
        if not word.isascii() or not word.isdigit() or len(word) > 10:
            raise ValueError(f"{name}:{lineno}: {word[:20]!r} is not a timestamp in whole milliseconds")
        ms = int(word)
        if ms < last:
            raise ValueError(f"{name}:{lineno}: {ms} comes after {last}: timestamps never decrease")
        if ms > MAX_PERIOD_MS:
            raise ValueError(f"{name}:{lineno}: {ms} ms is past the longest period of {MAX_PERIOD_MS} ms")
        times.append(ms)
        last = ms
    if not times:
        raise ValueError(f"{name}: no timestamps (a trace has one in ms on every line)")
    if times[-1] == 0:
        raise ValueError(f"{name}: the last timestamp is 0: a trace must last more than 0 ms (it loops at its last)")
    return Trace(name, tuple(times), hashlib.sha256(text.encode()).hexdigest())


def opportunities_between(trace: Trace, start_ms: float, end_ms: float) -> int:
    """How many opportunities fall in ``(start_ms, end_ms]`` of the looping trace (ms from its start)."""
    def upto(t: float) -> int:  # opportunities at instants <= t: whole loops, then part of one
        loops, within = divmod(t, trace.period_ms)
        return int(loops) * trace.opportunities + bisect.bisect_right(trace.times, within)
    return upto(end_ms) - upto(start_ms)


def bytes_between(trace: Trace, start_ms: float, end_ms: float) -> int:
    """The bytes the trace lets through in ``(start_ms, end_ms]``, a link always backlogged."""
    return opportunities_between(trace, start_ms, end_ms) * MTU


def builtin_dir() -> Path:
    """Where the traces netesto ships live (package data)."""
    return Path(str(resources.files("netesto"))) / "data" / "traces"


def builtin_names() -> list[str]:
    """The names of the traces netesto ships (``const12``, ``onoff``, ...)."""
    return sorted(p.name[: -len(SUFFIX)] for p in builtin_dir().glob(f"*{SUFFIX}"))


def find_trace(word: str, dirs: Iterable[Path]) -> Path:
    """The file ``word`` names: a path (absolute, or relative to one of ``dirs`` in order) or the name of
    a shipped trace. LookupError with where it looked and a "did you mean" when there is none."""
    looked: list[str] = []
    candidate = Path(word).expanduser()
    places = [candidate] if candidate.is_absolute() else [Path(d) / candidate for d in dirs]
    for place in places:
        looked.append(str(place.parent))
        if place.is_file():
            return place.resolve()
    if "/" not in word:
        shipped = builtin_dir() / f"{word.removesuffix(SUFFIX)}{SUFFIX}"
        if shipped.is_file():
            return shipped
    names = builtin_names()
    near = difflib.get_close_matches(word.removesuffix(SUFFIX), names, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    where = ", ".join(dict.fromkeys(looked))
    raise LookupError(f"trace {word!r} not found (looked in {where or 'nowhere'}); {hint}"
                      f"shipped traces: {', '.join(names) or 'none'}")


def read_trace(path: Path) -> Trace:
    """The trace file at ``path`` (ValueError for a file that is not one, naming it and the line)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise ValueError(f"{path}: {len(data)} bytes is more than a trace may have ({MAX_TRACE_BYTES})")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a trace (not ASCII text: one timestamp in ms per line)") from None
    name = path.name[: -len(SUFFIX)] if path.parent == builtin_dir() and path.name.endswith(SUFFIX) else str(path)
    return parse_trace(text, name)


__all__ = [
    "MAX_TRACE_BYTES",
    "MTU",
    "Trace",
    "builtin_dir",
    "builtin_names",
    "bytes_between",
    "find_trace",
    "opportunities_between",
    "parse_trace",
    "read_trace",
]
