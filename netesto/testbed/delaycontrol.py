"""The delay line's outside: its control socket's client, the router agent's SET_NETEM fallback, the bottleneck guard.

These run in other processes than the packet loop (``netesto.testbed.delayline``):
the controller, the router agent, the guard process.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from netesto.errors import TestbedError


def guard_links(guards: dict[str, tuple[int, int, str]], stop: "threading.Event", period: float = 1.0,
                state_path: str | None = None) -> None:
    """Put the testbed bottleneck back on router links left with no root qdisc.

    An agent's restore() deletes the root qdisc of a link it changed, which on
    a testbed link would remove the bottleneck itself; "nothing" on a testbed
    link means the testbed's own shaping. Runs in a thread; testbeds give it
    a process of its own (no queues), so its tc calls never take the GIL from
    a packet loop. With ``state_path`` the rate and buffer put back are the
    testbed's current ones (``netesto.testbed.reshape`` changes them in place).
    """
    from netesto.testbed import shaping
    from netesto.testbed.state import load_state

    while not stop.wait(period):
        for dev, (bw, buffer_bytes, subnet) in guards.items():
            out = shaping.tc(None, ["qdisc", "show", "dev", dev, "root"], check=False).stdout
            if out.strip() and not out.startswith("qdisc noqueue"):
                continue
            if state_path:
                try:
                    state = load_state(Path(state_path))
                    bw, buffer_bytes = int(state["bw_bps"]), int(state["config"]["buffer_bytes"])
                except (TestbedError, OSError, KeyError, TypeError, ValueError):
                    pass  # the testbed is going down: its first settings will do
            try:
                shaping.setup_bottleneck(None, dev, bw, buffer_bytes, subnet)
                print(f"delayline: re-installed the bottleneck on {dev} (its root qdisc had been removed)", flush=True)
            except TestbedError as exc:
                print(f"delayline: cannot re-install the bottleneck on {dev}: {exc}", flush=True)


UNIX_PATH_MAX = 107  # bytes of an AF_UNIX socket's path (sun_path is 108, with its NUL)


def send_control(path: str | os.PathLike[str], request: dict[str, object], *, timeout: float = 2.0) -> dict[str, object]:
    """Send one request to a running delay line's control socket; its reply."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    reply_path = f"{path}.{os.getpid()}.{time.monotonic_ns()}.reply"
    own_dir = None
    if len(os.fsencode(reply_path)) > UNIX_PATH_MAX:
        # a control socket whose path fits may still leave no room for the suffix (a pytest-xdist
        # worker's tmp_path: 85 bytes + 25): the reply socket goes in a short directory of its own
        # (a path, not an abstract name: the delay line may run in another network namespace)
        own_dir = tempfile.mkdtemp(prefix="netesto-reply-")
        reply_path = os.path.join(own_dir, "r")
    try:
        client.bind(reply_path)
        client.settimeout(timeout)
        client.sendto(json.dumps(request).encode(), str(path))
        data = client.recv(65536)
        result: dict[str, object] = json.loads(data)
        return result
    except OSError as exc:
        raise TestbedError(f"delay line control socket {path}: {exc}") from exc
    finally:
        client.close()
        try:
            os.unlink(reply_path)
        except FileNotFoundError:
            pass
        if own_dir is not None:
            os.rmdir(own_dir)


def delayline_stats(state: dict[str, Any], *, reset: bool = False) -> dict[str, Any]:
    """A running testbed's delay-line statistics (``state``: its state, as ``status()`` lists it).

    ``{"total": {...}, "queues": {queue: {...}}, "kernel": {...}, ...}``: per
    link (queue) and in all, packets held, passed at once, dropped, released
    early (0), and the added delay beyond each packet's hold (p50, p99, max,
    mean in ms); see :mod:`netesto.testbed.delaystats`. ``reset`` starts the
    counts over after this reading.
    """
    control = state.get("delayline_control")
    if not control:
        raise TestbedError(f"testbed {state.get('name')!r} has no delay line (delay by {state.get('delay_mode')})")
    reply = send_control(control, {"op": "stats", "reset": reset})
    if not reply.get("ok"):
        raise TestbedError(f"delay line of testbed {state.get('name')!r}: {reply.get('error')}")
    stats: dict[str, Any] = reply["stats"]  # type: ignore[assignment]
    return stats


def netem_fallback(dev: str, delay: float, jitter: float = 0.0, loss: float = 0.0, rate: int = 0, limit: int = 1000) -> dict[str, object]:
    """SET_NETEM for a testbed router link where the kernel has no netem.

    Called inside the router agent (``NETESTO_NETEM_FALLBACK=
    netesto.testbed.delayline:netem_fallback``; ``NETESTO_TESTBED_STATE``
    names the testbed's state file). ``dev`` is the router's link toward a
    host; ``delay``/``jitter`` are one-way milliseconds for packets leaving
    on it, ``loss`` is in percent (as in netem), ``rate`` in bit/s changes the
    link's htb rate (0 = back to the testbed's bandwidth). ``limit`` (netem's
    packet queue) has no counterpart here: the bottleneck queue stays the
    testbed's byte-sized bfifo. All zeros (netem removed, or the agent's
    restore) puts back the testbed's own delay, jitter, loss and rate.
    """
    from netesto.testbed import shaping
    from netesto.testbed.state import load_state

    state_path = os.environ.get("NETESTO_TESTBED_STATE", "")
    if not state_path:
        raise TestbedError("netem fallback: NETESTO_TESTBED_STATE is not set (not a testbed router agent?)")
    state = load_state(Path(state_path))
    link = next((lk for lk in state.get("links", []) if lk["router_dev"] == dev), None)
    if link is None:
        raise TestbedError(f"netem fallback: {dev!r} is not a router link of testbed {state.get('name')!r}")
    if not (delay or jitter or loss or rate):
        # "No netem" on a testbed link means the testbed's own link again
        # (the agent's restore() sends exactly this).
        from netesto.testbed.config import saved_one_way

        cfg = state.get("config", {})
        delay, jitter, loss = saved_one_way(cfg, link["host"]), cfg.get("jitter_ms", 0) / 2, cfg.get("loss", 0) * 100
    control = state.get("delayline_control")
    if not control:
        raise TestbedError(f"netem fallback: testbed {state.get('name')!r} has no delay line running")
    # netem keeps packets in order once it has a rate (each waits for the one before it);
    # without one, jitter reorders them. The delay line does the same.
    reply = send_control(control, {"queue": link["queue"], "delay": delay, "jitter": jitter, "loss": loss / 100.0,
                                   "ordered": bool(rate)})
    if not reply.get("ok"):
        raise TestbedError(f"netem fallback: delay line refused: {reply.get('error')}")
    bw = rate or state["bw_bps"]
    # Already inside the router namespace: plain tc, no -n.
    shaping.change_rate(None, dev, bw)
    return {"dev": dev, "delay_ms": delay, "jitter_ms": jitter, "loss_pct": loss, "rate_bps": bw, "via": "delayline"}


def netem_show(dev: str) -> dict[str, object]:
    """The delay line's settings for router link ``dev`` (delay_ms, jitter_ms one-way; loss 0..1),
    read from the running line itself: the router agent's ``shape`` reports them beside tc's
    (:mod:`netesto.agent.shape` finds this beside :func:`netem_fallback`)."""
    from netesto.testbed.state import load_state

    state = load_state(Path(os.environ.get("NETESTO_TESTBED_STATE", "") or "/nonexistent"))
    link = next((lk for lk in state.get("links", []) if lk["router_dev"] == dev), None)
    control = state.get("delayline_control")
    if link is None or not control:
        return {}
    reply = send_control(control, {"op": "stats"})
    settings = reply.get("settings")
    line = settings.get(str(link["queue"])) if isinstance(settings, dict) else None
    return dict(line) if isinstance(line, dict) else {}


__all__ = ["delayline_stats", "guard_links", "netem_fallback", "netem_show", "send_control"]
