"""What a testbed is asked for (:class:`TestbedConfig`, validated) and what ``up`` built (:class:`UpResult`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.errors import UsageError
from netesto.testbed import shaping, topology

WANTED_CC = ("reno", "cubic", "bbr")


@dataclass(frozen=True)
class TestbedConfig:
    """What `netesto testbed up` was asked for, validated."""

    __test__ = False

    name: str = "tb"
    hosts: int = 3
    bw_bps: int = 100_000_000
    rtt_ms: float = 20.0
    buffer_bytes: int = 250_000
    loss: float = 0.0  # probability per packet, each direction
    jitter_ms: float = 0.0
    ca: str = "cubic"
    dir: str = ""
    agents: bool = True
    loopback: bool = False  # force the loopback lab even where namespaces work

    @classmethod
    def parse(
        cls,
        *,
        name: str = "tb",
        hosts: int = 3,
        bw: str | int = "100mbit",
        rtt: str | float = "20ms",
        buffer: str | int = "1bdp",
        loss: str | float = 0.0,
        jitter: str | float = 0.0,
        ca: str = "cubic",
        dir: str | os.PathLike[str] | None = None,
        agents: bool = True,
        loopback: bool = False,
    ) -> "TestbedConfig":
        topology.check_name(name)
        bw_bps = shaping.parse_rate(bw)
        rtt_ms = shaping.parse_time_ms(rtt)
        buffer_bytes = shaping.parse_buffer(buffer, bw_bps, rtt_ms)
        if ca not in WANTED_CC:
            raise UsageError(f"--ca {ca!r}: one of {', '.join(WANTED_CC)}")
        base = Path(dir).expanduser() if dir else default_dir()
        return cls(name, hosts, bw_bps, rtt_ms, buffer_bytes, parse_loss(loss), shaping.parse_time_ms(jitter), ca, str(base.resolve()), agents, loopback)


def parse_loss(text: str | float) -> float:
    """A loss probability from a percentage: ``1`` or ``1%`` is 1 % (as netem).

    >>> parse_loss("1%"), parse_loss("0.5"), parse_loss(0)
    (0.01, 0.005, 0.0)
    """
    raw = str(text).strip().rstrip("%")
    try:
        pct = float(raw)
    except ValueError as exc:
        raise UsageError(f"bad --loss {text!r}: a percentage such as 1 or 0.5%") from exc
    if not 0 <= pct <= 100:
        raise UsageError(f"bad --loss {text!r}: must be within 0..100 %")
    return pct / 100.0


def default_dir() -> Path:
    return Path(os.environ.get("NETESTO_TESTBED_DIR", "~/.netesto/testbeds")).expanduser()


@dataclass(frozen=True)
class UpResult:
    """What `up` built, for printing."""

    name: str
    lab: Path
    mode: str  # "netns" | "loopback"
    delay_mode: str
    notes: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


__all__ = ["TestbedConfig", "UpResult", "WANTED_CC", "default_dir", "parse_loss"]
