"""The bottleneck: htb + a byte-sized bfifo per router link, netem where it exists.

Queues are sized in BYTES: veth and forwarded traffic carry 64 KB GSO
packets, so a limit in packets would be effectively unbounded. The htb
recipe (``r2q 1000``, ``burst 15k cburst 15k``) is the one measured to give
~95 Mbit/s goodput on a 100mbit class (see docs/testbed.md). Control traffic
(from the controller's subnet) is classified into its own fast class so it
never waits behind the experiment's queue.
"""

from __future__ import annotations

import re
import subprocess
from typing import Sequence

from netesto import vocab
from netesto.errors import TestbedError, UsageError

_BDP = re.compile(r"^\s*(\d+(?:\.\d+)?)?\s*bdp\s*$", re.IGNORECASE)
BURST = "15k"
BOTTLENECK_CLASS = "1:10"
CONTROL_CLASS = "1:20"


def parse_rate(text: str | int) -> int:
    """The bottleneck's rate in bits/s (:func:`netesto.vocab.parse_rate`; > 0).

    >>> parse_rate("100mbit"), parse_rate(5000)
    (100000000, 5000)
    """
    try:
        value = vocab.parse_rate(text)
    except ValueError as exc:
        raise UsageError(f"bad rate {text!r}: {exc}") from None
    if value <= 0:
        raise UsageError(f"bad rate {text!r}: must be > 0")
    return value


def parse_time_ms(text: str | float) -> float:
    """An RTT or jitter in ms (:func:`netesto.vocab.parse_time_ms`).

    >>> parse_time_ms("20ms"), parse_time_ms(3)
    (20.0, 3.0)
    """
    try:
        return vocab.parse_time_ms(text)
    except ValueError as exc:
        raise UsageError(f"bad time {text!r}: {exc}") from None


def bdp_bytes(bw_bps: int, rtt_ms: float) -> int:
    """Bandwidth-delay product in bytes.

    >>> bdp_bytes(100_000_000, 20)
    250000
    """
    return int(bw_bps * rtt_ms / 1000 / 8)


def parse_buffer(text: str | int, bw_bps: int, rtt_ms: float) -> int:
    """Queue size in bytes: ``1bdp``, ``0.5bdp``, ``bdp`` or a size (``256k``, ``1M``).

    A BDP of a zero RTT is taken as one of 1 ms, so the queue is never empty.

    >>> parse_buffer("1bdp", 100_000_000, 20), parse_buffer("0.5bdp", 100_000_000, 20)
    (250000, 125000)
    >>> parse_buffer("64K", 100_000_000, 20), parse_buffer(30000, 100_000_000, 20)
    (65536, 30000)
    """
    if isinstance(text, int):
        value = text
    else:
        m = _BDP.match(text)
        if m:
            value = int(float(m.group(1) or 1) * bdp_bytes(bw_bps, rtt_ms or 1.0))
        else:
            try:
                value = vocab.parse_size(text.strip())
            except Exception as exc:
                raise UsageError(f"bad buffer {text!r}: expected e.g. 1bdp, 0.5bdp, 256k, 1M") from exc
    # Below two full-size GSO packets, a queue would drop every burst.
    if value < 3000:
        raise UsageError(f"buffer {text!r} is {value} bytes: use at least 3000")
    return value


def tc(ns: str | None, args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``tc`` (inside namespace ``ns`` when given)."""
    argv = ["tc", *(["-n", ns] if ns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        where = f" in namespace {ns}" if ns else ""
        raise TestbedError(f"`{' '.join(argv)}` failed{where}: {proc.stderr.strip() or proc.returncode}")
    return proc


def netem_available(ns: str) -> bool:
    """Whether this kernel's tc accepts netem (probed on ``lo`` of ``ns``)."""
    proc = tc(ns, ["qdisc", "add", "dev", "lo", "root", "handle", "1:", "netem", "delay", "1ms"], check=False)
    if proc.returncode == 0:
        tc(ns, ["qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False


def _rate(bps: int) -> str:
    return f"{bps}bit"


def setup_bottleneck(ns: str | None, dev: str, bw_bps: int, buffer_bytes: int, control_subnet: str) -> None:
    """htb root with the bottleneck class (bfifo leaf) and a fast class for control traffic."""
    tc(ns, ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "r2q", "1000", "default", "10"])
    tc(ns, ["class", "add", "dev", dev, "parent", "1:", "classid", BOTTLENECK_CLASS, "htb",
            "rate", _rate(bw_bps), "burst", BURST, "cburst", BURST])
    tc(ns, ["qdisc", "add", "dev", dev, "parent", BOTTLENECK_CLASS, "handle", "10:", "bfifo", "limit", str(buffer_bytes)])
    tc(ns, ["class", "add", "dev", dev, "parent", "1:", "classid", CONTROL_CLASS, "htb",
            "rate", "10gbit", "quantum", "60000", "burst", "64k", "cburst", "64k"])
    tc(ns, ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "src", control_subnet, "flowid", CONTROL_CLASS])


def rate_args(dev: str, bw_bps: int) -> list[str]:
    """The tc arguments that change the bottleneck class's rate (the bfifo leaf keeps its bytes)."""
    return ["class", "change", "dev", dev, "parent", "1:", "classid", BOTTLENECK_CLASS, "htb",
            "rate", _rate(bw_bps), "burst", BURST, "cburst", BURST]


def buffer_args(dev: str, buffer_bytes: int) -> list[str]:
    """The tc arguments that change the bottleneck queue's limit."""
    return ["qdisc", "change", "dev", dev, "parent", BOTTLENECK_CLASS, "handle", "10:", "bfifo", "limit", str(buffer_bytes)]


def change_rate(ns: str | None, dev: str, bw_bps: int) -> None:
    """Change the bottleneck class's rate (the bfifo leaf keeps its bytes)."""
    tc(ns, rate_args(dev, bw_bps))


def change_buffer(ns: str | None, dev: str, buffer_bytes: int) -> None:
    tc(ns, buffer_args(dev, buffer_bytes))


def setup_netem(ns: str | None, dev: str, delay_ms: float, jitter_ms: float = 0.0, loss: float = 0.0) -> None:
    """Host-egress netem (only where the kernel has it): delay, jitter, loss probability."""
    args = ["qdisc", "replace", "dev", dev, "root", "netem", "limit", "100000", "delay", f"{delay_ms}ms"]
    if jitter_ms:
        args.append(f"{jitter_ms}ms")
    if loss:
        args += ["loss", f"{loss * 100}%"]
    tc(ns, args)


def qdisc_stats(ns: str | None, dev: str) -> str:
    return tc(ns, ["-s", "qdisc", "show", "dev", dev], check=False).stdout


__all__ = [
    "bdp_bytes",
    "buffer_args",
    "change_buffer",
    "change_rate",
    "netem_available",
    "parse_buffer",
    "parse_rate",
    "parse_time_ms",
    "qdisc_stats",
    "rate_args",
    "setup_bottleneck",
    "setup_netem",
    "tc",
]
