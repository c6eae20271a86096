"""A testbed router link as the router agent's link backend: htb rate and bfifo queue by tc, the rest by the delay line.

The router agent of a testbed runs with ``NETESTO_LINK_BACKEND=
netesto.testbed.linkctl:backend`` (and ``NETESTO_TESTBED_STATE``), so its
link schedules (:mod:`netesto.agent.links`) change the testbed's own
bottleneck: ``rate`` is the htb class's, ``buffer`` the bfifo leaf's limit,
``delay``/``jitter``/``loss`` the delay line's queue toward that host (one
way), and a trace turns that queue into a trace-driven link (the htb rate
then goes to :data:`TRACE_RATE`, so it never queues what the trace lets out).

A tc change costs a process start, 3-10 ms on these machines; the agent
asks for it ahead of time (:meth:`TestbedLink.prepare`): a ``tc -batch -``
is started and waits on its input, and at the instant the command is
written to it, so the change is in force about 1 ms after its instant.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from netesto.errors import TestbedError
from netesto.testbed import shaping
from netesto.testbed.delaycontrol import send_control
from netesto.testbed.state import load_state
from netesto.vocab import parse_rate

TRACE_RATE = 10_000_000_000  # bit/s: the htb class's rate under a trace (it must not shape)
_TC = ("rate", "buffer")
_DELAY_LINE = {"delay": "delay", "jitter": "jitter", "loss": "loss"}  # parameter -> control key
_RATE = re.compile(r"\brate (\S+)")


class TestbedLink:
    """The router link ``dev`` of the testbed whose state file ``state_path`` is."""

    __test__ = False

    def __init__(self, dev: str, state_path: str) -> None:
        state = load_state(Path(state_path))
        link = next((lk for lk in state.get("links", []) if lk.get("router_dev") == dev), None)
        if link is None:
            raise TestbedError(f"{dev!r} is not a router link of testbed {state.get('name')!r}")
        self.dev = dev
        self.queue = int(link["queue"])
        self.control = state.get("delayline_control") if state.get("delay_mode") == "delayline" else None
        self.name = state.get("name", "")
        self.ready: list[subprocess.Popen[bytes]] = []
        self.settings: dict[str, Any] = {}

    def _delay_line(self, what: str) -> str:
        if not self.control:
            raise TestbedError(f"testbed {self.name!r} has no delay line (delay by netem): {what} needs one")
        return str(self.control)

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = send_control(self._delay_line(str(request.get("op", "a delay change"))), {"queue": self.queue, **request})
        if not reply.get("ok"):
            raise TestbedError(f"delay line refused {request}: {reply.get('error')}")
        self.settings = dict(reply.get("settings") or {})  # type: ignore[call-overload]
        return self.settings

    def read(self) -> dict[str, float]:
        """The link's shape now: rate (bit/s), buffer (bytes), delay and jitter (ms), loss (%)."""
        shape = {"rate": self._rate(), "buffer": self._buffer()}
        if self.control:
            s = self._send({"op": "settings"})
            shape.update(delay=float(s["delay_ms"]), jitter=float(s["jitter_ms"]), loss=float(s["loss"]) * 100)
        return shape

    def _rate(self) -> float:
        out = shaping.tc(None, ["class", "show", "dev", self.dev, "classid", shaping.BOTTLENECK_CLASS]).stdout
        m = _RATE.search(out)
        if m is None:
            raise TestbedError(f"no htb class {shaping.BOTTLENECK_CLASS} on {self.dev}: {out.strip()!r}")
        return float(parse_rate(m.group(1)))

    def _buffer(self) -> float:
        out = shaping.tc(None, ["-j", "qdisc", "show", "dev", self.dev, "parent", shaping.BOTTLENECK_CLASS]).stdout
        for q in json.loads(out or "[]"):
            if q.get("kind") == "bfifo":
                return float(q["options"]["limit"])
        raise TestbedError(f"no bfifo under {shaping.BOTTLENECK_CLASS} on {self.dev}")

    def prepare(self, params: list[str]) -> None:
        """One waiting ``tc -batch -`` for each tc change coming (rate, buffer)."""
        want = sum(1 for p in params if p in _TC)
        self.ready = [p for p in self.ready if p.poll() is None]
        while len(self.ready) < want:
            self.ready.append(subprocess.Popen(["tc", "-batch", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE))

    def _tc_now(self, args: list[str]) -> None:
        if not self.ready:
            self.prepare(["rate"])
        proc = self.ready.pop(0)
        try:
            _, err = proc.communicate((" ".join(args) + "\n").encode(), timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            proc.kill()
            raise TestbedError(f"tc {' '.join(args)}: {exc}") from exc
        if proc.returncode != 0:
            raise TestbedError(f"tc {' '.join(args)}: {err.decode(errors='replace').strip()}")

    def apply(self, param: str, value: float) -> None:
        if param == "rate":
            self._tc_now(shaping.rate_args(self.dev, int(value)))
        elif param == "buffer":
            self._tc_now(shaping.buffer_args(self.dev, int(value)))
        elif param in _DELAY_LINE:
            self._send({_DELAY_LINE[param]: value / 100 if param == "loss" else value})
        else:
            raise TestbedError(f"unknown link parameter {param!r}")

    def readback(self, param: str) -> float | None:
        if param == "rate":
            return self._rate()
        if param == "buffer":
            return self._buffer()
        s = self.settings  # what the delay line answered to the change
        value = s.get(f"{param}_ms", s.get(param))
        return None if value is None else float(value) * (100 if param == "loss" else 1)

    def trace(self, path: str | None, name: str, epoch_ns: int, limit_bytes: int, limit_packets: int) -> dict[str, Any]:
        """The link delivers at the trace's opportunities from ``epoch_ns`` (None: no more)."""
        if path is not None:
            self._delay_line("a trace link")
            shaping.change_rate(None, self.dev, TRACE_RATE)
        return self._send({"op": "trace", "file": path, "name": name, "epoch_ns": epoch_ns,
                           "limit_bytes": limit_bytes, "limit_packets": limit_packets})

    def restore(self, base: dict[str, float]) -> list[str]:
        """``base`` back (as :meth:`read` gave it), the queue a plain delay link again; errors."""
        errors = []
        if self.control:
            try:
                self._send({"op": "trace", "file": None})
            except TestbedError as exc:
                errors.append(str(exc))
        for param, change in (("rate", shaping.change_rate), ("buffer", shaping.change_buffer)):
            if param in base:
                try:
                    change(None, self.dev, int(base[param]))
                except TestbedError as exc:
                    errors.append(str(exc))
        back = {_DELAY_LINE[p]: base[p] / 100 if p == "loss" else base[p] for p in _DELAY_LINE if p in base}
        if back:
            try:
                self._send(back)
            except TestbedError as exc:
                errors.append(str(exc))
        return errors

    def close(self) -> None:
        for proc in self.ready:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # no command: it exits
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        self.ready = []


def backend(dev: str) -> TestbedLink:
    """The router agent's link backend (``NETESTO_LINK_BACKEND=netesto.testbed.linkctl:backend``)."""
    path = os.environ.get("NETESTO_TESTBED_STATE", "")
    if not path:
        raise TestbedError("link backend: NETESTO_TESTBED_STATE is not set (not a testbed's router agent?)")
    return TestbedLink(dev, path)


__all__ = ["TRACE_RATE", "TestbedLink", "backend"]
