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
DRIVERS = ("builtin", "iperf3", "netperf")

MAX_BYTES = 2**40
MAX_BITS = 10**13
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?\s*$")
_SIZE_SCALE = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "k": 10**3, "m": 10**6, "g": 10**9}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(bit/s|bit|bps|b)?\s*$", re.IGNORECASE)
_RATE_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*$")
_TIME_SCALE = {"us": 0.001, "ms": 1.0, "s": 1000.0, None: 1.0}


def parse_size(text: str | int) -> int:
    """Bytes from a number with netperf's suffixes: K/M/G = 2^10/2^20/2^30,
    k/m/g = 10^3/10^6/10^9, an optional ``b``/``B``; 0..2^40.

    >>> parse_size("10K"), parse_size("1M"), parse_size("1m"), parse_size("1.5K"), parse_size(64)
    (10240, 1048576, 1000000, 1536, 64)
    """
    if isinstance(text, int):
        value: float = text
    else:
        m = _SIZE.match(text)
        if not m:
            raise ValueError("expected a size like 100, 10K or 1M")
        value = float(m.group(1)) * _SIZE_SCALE[m.group(2)]
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
    if isinstance(text, int):
        value: float = text
    else:
        m = _RATE.match(text)
        if not m:
            raise ValueError("expected a rate in bits/s like 100M, 100mbit or 1gbit")
        value = float(m.group(1)) * _RATE_SCALE[m.group(2).lower()]
        if (m.group(3) or "").lower() == "bps":
            value *= 8
    if not 0 <= value <= MAX_BITS:
        raise ValueError(f"a rate must be in 0..{MAX_BITS:g} bits/s")
    return int(value)


def parse_time_ms(text: str | float) -> float:
    """Milliseconds from ``20ms``, ``0.5s``, ``800us`` or a bare number of ms; >= 0.

    >>> parse_time_ms("20ms"), parse_time_ms("0.1s"), parse_time_ms("500us"), parse_time_ms(3)
    (20.0, 100.0, 0.5, 3.0)
    """
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _TIME.match(text)
        if not m:
            raise ValueError("expected a time like 20ms, 0.1s or 500us")
        value = float(m.group(1)) * _TIME_SCALE[m.group(2)]
    if not (math.isfinite(value) and value >= 0):
        raise ValueError("a time must be a finite number >= 0")
    return value


__all__ = [
    "DRIVERS",
    "MAX_BITS",
    "MAX_BYTES",
    "RR_TESTS",
    "STREAM_TESTS",
    "TEST_TYPES",
    "parse_rate",
    "parse_size",
    "parse_time_ms",
]
