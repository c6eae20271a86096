"""What a testbed is asked for (:class:`TestbedConfig`, validated) and what ``up`` built (:class:`UpResult`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.errors import UsageError
from netesto.testbed import shaping, topology
from netesto.vocab import parse_host_times

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
    # (host, RTT in ms) of the hosts whose paths have an RTT of their own (docs/testbed.md "Per-host RTT")
    host_rtt: tuple[tuple[str, float], ...] = ()

    def one_way_ms(self, host: str) -> float:
        """The delay of packets toward ``host`` (ms): see :func:`one_way_delays`."""
        return one_way_delays(self.rtt_ms, dict(self.host_rtt), [host])[host]

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
        host_rtt: str | dict[str, Any] | None = None,
    ) -> "TestbedConfig":
        topology.check_name(name)
        bw_bps = shaping.parse_rate(bw)
        rtt_ms = shaping.parse_time_ms(rtt)
        buffer_bytes = shaping.parse_buffer(buffer, bw_bps, rtt_ms)
        if ca not in WANTED_CC:
            raise UsageError(f"--ca {ca!r}: one of {', '.join(WANTED_CC)}")
        own = parse_host_rtt(host_rtt, hosts, rtt_ms)
        base = Path(dir).expanduser() if dir else default_dir()
        return cls(name, hosts, bw_bps, rtt_ms, buffer_bytes, parse_loss(loss), shaping.parse_time_ms(jitter), ca,
                   str(base.resolve()), agents, loopback, tuple(sorted(own.items())))


def parse_host_rtt(text: str | dict[str, Any] | None, hosts: int, rtt_ms: float) -> dict[str, float]:
    """``h3:40ms`` (``h2:20ms+h3:60ms``, or a mapping) checked against the testbed: hosts h1..hN, and each
    RTT at least half the testbed's (the delay toward the host, ``r - rtt/2``, cannot be negative).

    >>> parse_host_rtt("h3:40ms", 3, 20.0), parse_host_rtt(None, 3, 20.0)
    ({'h3': 40.0}, {})
    """
    try:
        own = parse_host_times(text or "")
    except ValueError as exc:
        raise UsageError(f"bad --host-rtt {text!r}: {exc}") from None
    names = {f"h{i}" for i in range(1, hosts + 1)}
    for host, ms in own.items():
        if host not in names:
            raise UsageError(f"--host-rtt {host}: the testbed's hosts are h1..h{hosts}")
        if ms < rtt_ms / 2:
            raise UsageError(f"--host-rtt {host}:{ms:g}ms: at least half the testbed's rtt ({rtt_ms / 2:g} ms): the "
                             "delay toward a host is its RTT less half the base rtt; lower --rtt")
    return own


def one_way_delays(rtt_ms: float, host_rtt: dict[str, float], hosts: list[str]) -> dict[str, float]:
    """The delay (ms) each host's link adds to packets toward it (the delay line's queue, or netem on the
    host's egress: either way one delay per host), so that the RTT between hosts i and j is
    ``t_i + t_j``: ``rtt/2`` for a host without an RTT of its own, ``r - rtt/2`` for one with ``r``.
    A host with its own RTT ``r`` thus has RTT ``r`` to every host without one, and two such hosts
    ``r_i + r_j - rtt``.

    >>> one_way_delays(20.0, {"h3": 40.0}, ["h1", "h2", "h3"])
    {'h1': 10.0, 'h2': 10.0, 'h3': 30.0}
    """
    return {h: host_rtt[h] - rtt_ms / 2 if h in host_rtt else rtt_ms / 2 for h in hosts}


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


def saved_one_way(cfg: dict[str, Any], host: str) -> float:
    """The delay toward ``host`` (ms) of a testbed's saved config (its state's ``config``)."""
    own = {str(h): float(ms) for h, ms in cfg.get("host_rtt", []) or []}
    return one_way_delays(float(cfg.get("rtt_ms", 0.0)), own, [host])[host]


__all__ = ["TestbedConfig", "UpResult", "WANTED_CC", "default_dir", "one_way_delays", "parse_host_rtt", "parse_loss",
           "saved_one_way"]
