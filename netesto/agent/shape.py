"""What shapes a device now, read back from the kernel: its rate, queue, delay, jitter and loss.

The ``shape`` command (read-only) answers it for the devices asked: ``tc qdisc show``
and ``tc class show`` parsed for an htb or tbf rate, a bfifo/pfifo limit and netem's
delay, jitter and loss; where the agent has a userspace delay line instead of netem
(``--netem-fallback MODULE:FUNCTION``), that module's ``netem_show(dev)`` reports the
line's settings for the device. A controller records the answers of an experiment's
hosts at its start: the shape it really ran under, not the one a lab file says.

>>> parse_tc("qdisc netem 8001: root refcnt 2 limit 1000 delay 5ms  1ms loss 1%", "")
{'delay_ms': 5.0, 'jitter_ms': 1.0, 'loss': 0.01}
>>> parse_tc("qdisc bfifo 10: parent 1:10 limit 100000b", "class htb 1:1 root prio 0 rate 10Gbit ceil 10Gbit\\n"
...          "class htb 1:10 root leaf 10: prio 0 rate 20Mbit ceil 20Mbit")
{'buffer_bytes': 100000, 'rate_bps': 20000000}
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable

from netesto.agent import tc
from netesto.errors import AgentError

_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")
_CLASS = re.compile(r"^class \S+ (\S+) .*?\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b", re.M)
_BYTES = re.compile(r"^qdisc bfifo \S+ (?:parent (\S+) |root ).*?\blimit (\d+)b\b", re.M)
_NETEM = re.compile(r"^qdisc netem .*$", re.M)
_DELAY = re.compile(r"\bdelay (\d+(?:\.\d+)?)(us|ms|s)(?:\s+(\d+(?:\.\d+)?)(us|ms|s))?")
_LOSS = re.compile(r"\bloss (\d+(?:\.\d+)?)%")
_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def parse_tc(qdiscs: str, classes: str) -> dict[str, Any]:
    """The shape ``tc qdisc show`` and ``tc class show`` of one device describe (keys only
    for what they show): rate_bps (the first htb class's or tbf's), buffer_bytes (bfifo),
    delay_ms, jitter_ms and loss (0..1, netem)."""
    out: dict[str, Any] = {}
    rates = {m.group(1): int(float(m.group(2)) * _UNITS[m.group(3)]) for m in _CLASS.finditer(classes)}
    limit = _BYTES.search(qdiscs)
    if limit:
        out["buffer_bytes"] = int(limit.group(2))
    if limit and limit.group(1) in rates:  # the class that feeds the byte queue is the bottleneck
        out["rate_bps"] = rates[limit.group(1)]
    elif rates:
        out["rate_bps"] = min(rates.values())
    elif rate := _RATE.search(qdiscs):  # tbf
        out["rate_bps"] = int(float(rate.group(1)) * _UNITS[rate.group(2)])
    netem = _NETEM.search(qdiscs)
    if netem:
        delay = _DELAY.search(netem.group())
        out["delay_ms"] = float(delay.group(1)) * _MS[delay.group(2)] if delay else 0.0
        out["jitter_ms"] = float(delay.group(3)) * _MS[delay.group(4)] if delay and delay.group(3) else 0.0
        loss = _LOSS.search(netem.group())
        out["loss"] = float(loss.group(1)) / 100 if loss else 0.0
    return out


def show_hook(spec: str) -> Callable[[str], dict[str, Any]] | None:
    """The delay line's ``netem_show`` beside its ``netem_fallback`` (``spec`` "module:function"), if it has one."""
    if not spec:
        return None
    try:
        hook = getattr(importlib.import_module(spec.partition(":")[0]), "netem_show", None)
    except ImportError:
        return None
    return hook if callable(hook) else None


def shape_of(dev: str, fallback: str = "") -> dict[str, Any]:
    """What shapes ``dev`` now (see :func:`parse_tc`), with the delay line's settings for it if
    the agent has one, and ``tc``'s own text (clipped) for the record."""
    dev = tc.check_dev(dev)
    qdiscs = tc.run(["tc", "qdisc", "show", "dev", dev], f"shape of {dev}").stdout
    classes = tc.run(["tc", "class", "show", "dev", dev], f"shape of {dev}").stdout
    out = {"dev": dev, **parse_tc(qdiscs, classes), "tc": (qdiscs + classes)[-2000:]}
    hook = show_hook(fallback)
    if hook is not None:
        try:
            line = hook(dev)
        except Exception as exc:  # the record says what could not be read rather than fail the run
            raise AgentError(f"shape of {dev}: the delay line's settings cannot be read: {exc}",
                             kind="Unavailable") from exc
        if line:
            out.update({k: line[k] for k in ("delay_ms", "jitter_ms", "loss") if k in line}, via="delayline")
    return out


__all__ = ["parse_tc", "shape_of", "show_hook"]
