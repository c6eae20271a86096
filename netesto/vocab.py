"""The words every layer shares: test types, drivers, and the one parser each for sizes, rates and times.

Stdlib only (the agent imports it). The parsers raise ``ValueError`` saying what
was expected, without the text: each caller names the argument and where it
was (the script: ``DO_CLIENT: bad req: ..., got 'lots'`` at the token; the
testbed: ``bad rate 'fast': ...``; the command line: ``--req: ...``).

>>> parse_size("10K"), parse_rate("100mbit"), parse_time_ms("0.1s")
(10240, 100000000, 100.0)
"""

from __future__ import annotations

import math
import re

TEST_TYPES = ("TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR", "TCP_RR", "TCP_CRR", "UDP_STREAM", "UDP_RR")
STREAM_TESTS = frozenset({"TCP_STREAM", "TCP_MAERTS", "TCP_BIDIR", "UDP_STREAM"})
RR_TESTS = frozenset({"TCP_RR", "TCP_CRR", "UDP_RR"})
SERVER_SENDS = frozenset({"TCP_MAERTS", "TCP_BIDIR"})  # the server end sends the stream
DRIVERS = ("builtin", "iperf3", "netperf")

MAX_BYTES = 2**40
MAX_BITS = 10**13
# A number, then a unit: each pattern names its units, each table says what one is worth.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?P<unit>[kKmMgG]?)[bB]?\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]?)(?:(?P<bytes>bps)|bit/s|bit|b)?\s*$", re.IGNORECASE)
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?P<unit>us|ms|s|)\s*$")
_SCALES: dict[re.Pattern[str], dict[str, float]] = {
    _SIZE: {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "k": 10**3, "m": 10**6, "g": 10**9},
    _RATE: {prefix + bps: scale * (8 if bps else 1)  # bps: BYTES per second, as in tc
            for prefix, scale in {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}.items()
            for bps in ("", "bps")},
    _TIME: {"us": 0.001, "ms": 1.0, "s": 1000.0, "": 1.0},
}


def _scaled(pattern: "re.Pattern[str]", text: str, expected: str) -> float:
    """The number ``pattern`` finds in ``text`` times what its unit is worth, else ValueError(``expected``)."""
    m = pattern.match(text)
    if m is None:
        raise ValueError(expected)
    unit = m.group("unit") + (m.groupdict().get("bytes") or "")
    return float(m.group(1)) * _SCALES[pattern][unit.lower() if pattern.flags & re.IGNORECASE else unit]


def parse_number(text: str) -> float:
    """A finite number, else ValueError saying what was expected and what came.

    >>> parse_number("2.5e3")
    2500.0
    """
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def parse_size(text: str | int) -> int:
    """Bytes from a number with netperf's suffixes: K/M/G = 2^10/2^20/2^30,
    k/m/g = 10^3/10^6/10^9, an optional ``b``/``B``; 0..2^40.

    >>> parse_size("10K"), parse_size("1M"), parse_size("1m"), parse_size("1.5K"), parse_size(64)
    (10240, 1048576, 1000000, 1536, 64)
    """
    value: float = text if isinstance(text, int) else _scaled(_SIZE, text, "expected a size like 100, 10K or 1M")
    if not 0 <= value <= MAX_BYTES:  # also inf, from a number with hundreds of digits
        raise ValueError(f"a size must be in 0..{MAX_BYTES} bytes")
    return int(value)


def parse_rate(text: str | int) -> int:
    """Bits per second with decimal suffixes (k/M/G/T = 10^3..10^12, any case) and an
    optional ``bit``, ``bit/s`` or ``b``: ``100M``, ``100mbit``, ``2.5g``; ``bps`` means
    BYTES per second, as in tc. 0..10^13 (a caller that needs a rate refuses 0).

    >>> parse_rate("100mbit"), parse_rate("1G"), parse_rate("2.5g"), parse_rate("10MBps"), parse_rate(5000)
    (100000000, 1000000000, 2500000000, 80000000, 5000)
    """
    value: float = (text if isinstance(text, int)
                    else _scaled(_RATE, text, "expected a rate in bits/s like 100M, 100mbit or 1gbit"))
    if not 0 <= value <= MAX_BITS:
        raise ValueError(f"a rate must be in 0..{MAX_BITS:g} bits/s")
    return int(value)


def parse_time_ms(text: str | float) -> float:
    """Milliseconds from ``20ms``, ``0.5s``, ``800us`` or a bare number of ms; >= 0.

    >>> parse_time_ms("20ms"), parse_time_ms("0.1s"), parse_time_ms("500us"), parse_time_ms(3)
    (20.0, 100.0, 0.5, 3.0)
    """
    value = float(text) if isinstance(text, (int, float)) else _scaled(_TIME, text, "expected a time like 20ms, 0.1s or 500us")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError("a time must be a finite number >= 0")
    return value


_HOST = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$")


def parse_host_times(text: "str | dict[str, str | float]") -> dict[str, float]:
    """Milliseconds per host from ``h2:20ms+h3:40ms`` (``=`` also separates; ``+`` joins hosts that
    hold together, as a mix does) or a mapping; each time as :func:`parse_time_ms` reads it.

    >>> parse_host_times("h2:20ms+h3:0.04s"), parse_host_times({"h3": "40ms"}), parse_host_times("")
    ({'h2': 20.0, 'h3': 40.0}, {'h3': 40.0}, {})
    """
    pairs: list[tuple[str, str | float]] = []
    if isinstance(text, dict):
        pairs = [(str(k), v) for k, v in text.items()]
    else:
        for item in filter(None, (p.strip() for p in str(text).split("+"))):
            host, sep, time = item.replace("=", ":", 1).partition(":")
            if not sep:
                raise ValueError("expected HOST:TIME[+HOST:TIME...] such as h2:20ms+h3:40ms")
            pairs.append((host.strip(), time.strip()))
    out: dict[str, float] = {}
    for host, value in pairs:
        if not _HOST.match(host):
            raise ValueError(f"host {host!r}: a host name such as h3")
        if host in out:
            raise ValueError(f"host {host} given twice")
        out[host] = parse_time_ms(value)
    return out


__all__ = [
    "DRIVERS",
    "MAX_BITS",
    "MAX_BYTES",
    "RR_TESTS",
    "SERVER_SENDS",
    "STREAM_TESTS",
    "TEST_TYPES",
    "parse_host_times",
    "parse_number",
    "parse_rate",
    "parse_size",
    "parse_time_ms",
]
