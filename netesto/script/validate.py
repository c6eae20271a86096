"""Value parsing and allowlists for command arguments (sizes, rates, sysctls, qdiscs).

Every function raises ``ValueError`` with a message saying what was expected;
the interpreter turns it into a ScriptError pointing at the argument.
"""

from __future__ import annotations

import math
import re

from typing import Callable

from netesto.policy import MODULE_PARAMS, QDISC_ACTIONS, QDISCS, SYSCTL_ALIASES, SYSCTLS, check_sysctl, describe
from netesto.vocab import parse_number, parse_rate, parse_size

_WORD = re.compile(r"^[A-Za-z0-9_.:-]+$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_TC_RATE = re.compile(r"^\d+(?:\.\d+)?(?:[kmgt]?(?:bit|bps)|[kmgt])?$", re.IGNORECASE)
_TC_SIZE = re.compile(r"^\d+(?:\.\d+)?(?:b|k|kb|m|mb|g|gb|kbit|mbit|gbit)?$", re.IGNORECASE)


def _not_huge(text: str, what: str) -> None:
    """Refuse numbers longer than 40 characters before parsing them (int() of a
    100,000-digit string takes seconds: scripts must not be able to hang us)."""
    if len(text) > 40:
        raise ValueError(f"expected {what}, got {text[:40]!r}...")


def to_int(text: str, *, low: int | None = None, high: int | None = None) -> int:
    _not_huge(text, "an integer")
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
        if not math.isfinite(f) or f != int(f):
            raise ValueError(f"expected an integer, got {text!r}") from None
        value = int(f)
    _check_range(value, low, high)
    return value


def to_float(text: str, *, low: float | None = None, high: float | None = None) -> float:
    _not_huge(text, "a number")
    value = parse_number(text)
    _check_range(value, low, high)
    return value


def _num(value: float) -> str:
    """``value`` for a message: integers in full (``:g`` made 2**31 and 2**31-1 look alike)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _check_range(value: float, low: float | None, high: float | None) -> None:
    if low is not None and value < low:
        raise ValueError(f"{_num(value)} is below the minimum {_num(low)}")
    if high is not None and value > high:
        raise ValueError(f"{_num(value)} is above the maximum {_num(high)}")


def _got(parse: Callable[[str], int], text: str) -> int:
    """``parse(text)`` (a :mod:`netesto.vocab` parser), its error saying what it got."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{exc}, got {text!r}") from None


def to_size(text: str) -> int:
    """Bytes, netperf style: ``10K`` = 10240, ``1M`` = 1048576, ``1m`` = 10^6."""
    return _got(parse_size, text)


def to_bits(text: str) -> int:
    """Bits/s with SI suffixes: ``100M``, ``100mbit``, ``2.5G``, ``500k`` (k=10^3)."""
    return _got(parse_rate, text)


def _matching(pattern: "re.Pattern[str]", text: str, message: str) -> str:
    """``text`` if ``pattern`` matches it, else ValueError(``message``)."""
    if not pattern.match(text):
        raise ValueError(message)
    return text


def word(text: str, what: str) -> str:
    """A plain word (host names, ca names): no shell or tc metacharacters."""
    return _matching(_WORD, text, f"bad {what} {text!r}: letters, digits, '_', '.', ':', '-' only")


def name(text: str, what: str) -> str:
    return _matching(_NAME, text, f"bad {what} {text!r}: letters, digits, '_', '.', '-' only")


def sysctl_setting(key: str, value: str) -> tuple[str, tuple[str, ...]]:
    """Check one ``name=v[,v,v]`` pair against the allowlist and its ranges."""
    canon = SYSCTL_ALIASES.get(key, key)
    if canon not in SYSCTLS:
        raise KeyError(canon)
    values = tuple(v for v in value.split(",") if v != "")
    if not values:
        raise ValueError(f"{canon} needs a value")
    try:
        check_sysctl(canon, list(values))  # the agent's own rule (netesto.policy)
    except ValueError as exc:
        raise ValueError(f"{canon}: {exc} (allowed: {describe(canon)})") from None
    return canon, values


def tc_rate(text: str) -> str:
    return _matching(_TC_RATE, text, f"expected a tc rate like 100mbit, 1gbit or 500kbit, got {text!r}")


def tc_size(text: str, what: str) -> str:
    return _matching(_TC_SIZE, text, f"expected a {what} like 1514, 32k or 10kb, got {text!r}")


__all__ = [
    "MODULE_PARAMS",
    "QDISCS",
    "QDISC_ACTIONS",
    "SYSCTLS",
    "SYSCTL_ALIASES",
    "name",
    "sysctl_setting",
    "tc_rate",
    "tc_size",
    "to_bits",
    "to_float",
    "to_int",
    "to_size",
    "word",
]
