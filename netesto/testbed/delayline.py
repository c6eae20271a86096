"""A userspace delay line: holds NFQUEUE'd packets for a delay, then accepts them.

This kernel has no netem, so the testbed's router namespace sends forwarded
packets to netfilter queues (``iptables -A FORWARD -o r-h1 -j NFQUEUE
--queue-num 1``) and this process, speaking the nfnetlink_queue protocol over
a raw ``AF_NETLINK`` socket with the standard library only, holds each packet
for ``delay`` (+ uniform ``jitter``) milliseconds before the ``NF_ACCEPT``
verdict; with probability ``loss`` it drops the packet at once (``NF_DROP``).

One single-threaded loop serves every bound queue: packets are read as they
arrive, their release times go into a heap, and the loop sleeps in
``select`` until the next release or the next packet. Each queue has its own
settings, so one process emulates every link of a testbed; a unix datagram
control socket (``--control PATH``) changes them while it runs, which is how
the router agent's SET_NETEM fallback (:func:`netem_fallback`) reaches it.

Run inside the router namespace::

    python -m netesto.testbed.delayline --queue 1 --queue 2 --delay 10 [--jitter 1] [--loss 0.01]
"""

from __future__ import annotations

import argparse
import collections
import heapq
import json
import os
import random
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from netesto.errors import TestbedError
from netesto.testbed.nfqueue import NF_ACCEPT, NF_DROP, NfQueue, parse_packet_ids, verdict_message

EARLY = 50e-6
PR_SET_TIMERSLACK = 29


@dataclass(frozen=True)
class LinkSettings:
    """What one queue does to its packets: one-way delay/jitter in ms, loss probability."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise TestbedError(f"delay line: delay and jitter must be >= 0, got {self}")
        if not 0.0 <= self.loss <= 1.0:
            raise TestbedError(f"delay line: loss is a probability in [0, 1], got {self.loss}")


class DelayLine:
    """The loop: receive, drop or schedule, release due packets in batches."""

    def __init__(self, nfq: NfQueue, settings: dict[int, LinkSettings], *, control: str | None = None, seed: int | None = None) -> None:
        self.nfq = nfq
        self.settings = dict(settings)
        self.rng = random.Random(seed)
        self.heap: list[tuple[float, int, int]] = []  # (release time, packet id, queue)
        self.buf = bytearray(65536)
        self.view = memoryview(self.buf)
        self.running = True
        self.stats = {"packets": 0, "dropped": 0, "released": 0}
        self.errors: list[int] = []  # errno of netlink error replies (bounded below)
        # How late each held packet left, in s (the loop's own error, without ping's).
        self.lateness: collections.deque[float] = collections.deque(maxlen=100_000)
        self.control: socket.socket | None = None
        self.control_path = control
        if control:
            try:
                os.unlink(control)
            except FileNotFoundError:
                pass
            self.control = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.control.bind(control)
            self.control.setblocking(False)

    def _receive(self, now: float, out: list[bytes]) -> None:
        sock = self.nfq.sock
        heap = self.heap
        for _ in range(256):  # bounded, so due releases are not starved by a flood
            try:
                n = sock.recv_into(self.buf)
            except BlockingIOError:
                return
            for queue, packet_id in parse_packet_ids(self.view, n, self.errors):
                self.stats["packets"] += 1
                link = self.settings.get(queue) or LinkSettings()
                if link.loss and self.rng.random() < link.loss:
                    self.stats["dropped"] += 1
                    out.append(verdict_message(queue, packet_id, NF_DROP))
                    continue
                hold = link.delay_ms
                if link.jitter_ms:
                    hold = max(0.0, hold + self.rng.uniform(-link.jitter_ms, link.jitter_ms))
                if hold <= 0:
                    out.append(verdict_message(queue, packet_id, NF_ACCEPT))
                    self.stats["released"] += 1
                else:
                    heapq.heappush(heap, (now + hold / 1000.0, packet_id, queue))

    def _release(self, now: float, out: list[bytes]) -> None:
        heap = self.heap
        # Up to EARLY s ahead: the verdict takes about that long to reach the kernel.
        due = now + EARLY
        while heap and heap[0][0] <= due:
            t, packet_id, queue = heapq.heappop(heap)
            out.append(verdict_message(queue, packet_id, NF_ACCEPT))
            self.stats["released"] += 1
            self.lateness.append(now - t)

    def _handle_control(self) -> None:
        assert self.control is not None
        while True:
            try:
                data, addr = self.control.recvfrom(65536)
            except BlockingIOError:
                return
            reply: dict[str, object]
            try:
                req = json.loads(data)
                if req.get("op") == "stats":
                    late = sorted(self.lateness)
                    if req.get("reset"):
                        self.lateness.clear()
                    pct = {f"late_p{p}_ms": round(late[min(len(late) - 1, int(p / 100 * len(late)))] * 1000, 4) if late else None
                           for p in (50, 99)}
                    reply = {"ok": True, "stats": {**self.stats, **pct, "late_samples": len(late), "netlink_errors": len(self.errors)},
                             "settings": {str(q): vars(s) for q, s in self.settings.items()}}
                else:
                    queue = int(req["queue"])
                    old = self.settings.get(queue, LinkSettings())
                    self.settings[queue] = replace(
                        old,
                        delay_ms=float(req.get("delay", old.delay_ms)),
                        jitter_ms=float(req.get("jitter", old.jitter_ms)),
                        loss=float(req.get("loss", old.loss)),
                    )
                    reply = {"ok": True}
            except (ValueError, KeyError, TypeError, TestbedError) as exc:
                reply = {"ok": False, "error": str(exc)}
            if addr:
                try:
                    self.control.sendto(json.dumps(reply).encode(), addr)
                except OSError:
                    pass

    def _flush(self, out: list[bytes]) -> None:
        # Several verdicts in one datagram: one syscall for a burst of releases.
        sock = self.nfq.sock
        for i in range(0, len(out), 64):
            chunk = b"".join(out[i : i + 64])
            while True:
                try:
                    sock.send(chunk)
                    break
                except BlockingIOError:
                    select.select([], [sock], [], 0.01)
                except OSError as exc:
                    # Rare (e.g. ENOMEM); those packets stay queued until the queues are unbound.
                    self.errors.append(exc.errno or 0)
                    break
        out.clear()

    def run(self) -> None:
        fds: list[Any] = [self.nfq.sock]
        if self.control is not None:
            fds.append(self.control)
        out: list[bytes] = []
        clock = time.monotonic
        while self.running:
            # Capped so a SIGTERM (which select retries after) is seen soon.
            timeout = 0.2
            if self.heap:
                timeout = min(timeout, max(0.0, self.heap[0][0] - EARLY - clock()))
            try:
                ready, _, _ = select.select(fds, [], [], timeout)
            except InterruptedError:
                continue
            now = clock()
            if ready:
                if self.nfq.sock in ready:
                    self._receive(now, out)
                if self.control is not None and self.control in ready:
                    self._handle_control()
            if len(self.errors) > 10_000:
                del self.errors[:-100]
            self._release(clock(), out)
            if out:
                self._flush(out)
        # Let what is held go rather than drop it on shutdown.
        for _t, packet_id, queue in self.heap:
            out.append(verdict_message(queue, packet_id, NF_ACCEPT))
        self.heap.clear()
        if out:
            try:
                self._flush(out)
            except OSError:
                pass

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
            if self.control_path:
                try:
                    os.unlink(self.control_path)
                except FileNotFoundError:
                    pass
        self.nfq.close()


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


def send_control(path: str | os.PathLike[str], request: dict[str, object], *, timeout: float = 2.0) -> dict[str, object]:
    """Send one request to a running delay line's control socket; its reply."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    reply_path = f"{path}.{os.getpid()}.{time.monotonic_ns()}.reply"
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
        cfg = state.get("config", {})
        delay, jitter, loss = cfg.get("rtt_ms", 0) / 2, cfg.get("jitter_ms", 0) / 2, cfg.get("loss", 0) * 100
    control = state.get("delayline_control")
    if not control:
        raise TestbedError(f"netem fallback: testbed {state.get('name')!r} has no delay line running")
    reply = send_control(control, {"queue": link["queue"], "delay": delay, "jitter": jitter, "loss": loss / 100.0})
    if not reply.get("ok"):
        raise TestbedError(f"netem fallback: delay line refused: {reply.get('error')}")
    bw = rate or state["bw_bps"]
    # Already inside the router namespace: plain tc, no -n.
    shaping.change_rate(None, dev, bw)
    return {"dev": dev, "delay_ms": delay, "jitter_ms": jitter, "loss_pct": loss, "rate_bps": bw, "via": "delayline"}


def netem_show(dev: str) -> dict[str, object]:
    """The delay line's settings for router link ``dev`` (delay_ms, jitter_ms one-way; loss 0..1),
    read from the running line itself: the router agent's ``shape`` reports them beside tc's."""
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


def _tight_timers() -> None:
    """Ask for 1 ns timer slack (default 50 us): select() wake-ups are the delay's error."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m netesto.testbed.delayline", description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, action="append", default=[],
                        help="netfilter queue number (repeatable; none = only --guard)")
    parser.add_argument("--delay", type=float, default=0.0, help="one-way delay in ms for every queue")
    parser.add_argument("--jitter", type=float, default=0.0, help="uniform +- jitter in ms")
    parser.add_argument("--loss", type=float, default=0.0, help="drop probability in [0, 1]")
    parser.add_argument("--control", help="unix datagram socket path for live changes")
    parser.add_argument("--ready-file", help="touched once the queues are bound")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--nice", type=int, default=-10,
                        help="scheduling niceness (default -10: wake before busy flows, for accuracy)")
    parser.add_argument("--guard", action="append", default=[], metavar="DEV=BW:BYTES:SUBNET",
                        help="re-install the htb bottleneck on DEV whenever its root qdisc is removed")
    parser.add_argument("--state", help="testbed state file: --guard takes the current rate and buffer from it")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    # Hand the GIL over fast: a release must not wait out another thread's 5 ms slice.
    sys.setswitchinterval(0.0002)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    except OSError:
        pass  # not root: stay at the default priority
    _tight_timers()
    try:
        link = LinkSettings(args.delay, args.jitter, args.loss)
        nfq = NfQueue(args.queue)
        line = DelayLine(nfq, {q: link for q in args.queue}, control=args.control, seed=args.seed)
    except (TestbedError, OSError) as exc:
        print(f"delayline: error: {exc}", file=sys.stderr)
        return 1

    def _stop(_sig: int, _frame: object) -> None:
        line.running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    stop = threading.Event()
    if args.guard:
        guards = {}
        for text in args.guard:
            dev, _, rest = text.partition("=")
            bw, buffer_bytes, subnet = rest.split(":")
            guards[dev] = (int(bw), int(buffer_bytes), subnet)
        threading.Thread(target=guard_links, args=(guards, stop, 1.0, args.state), daemon=True).start()
    if args.ready_file:
        Path(args.ready_file).write_text(str(os.getpid()))
    try:
        line.run()
    finally:
        stop.set()
        line.close()
    return 0


__all__ = ["DelayLine", "LinkSettings", "main", "netem_fallback", "netem_show", "send_control"]

if __name__ == "__main__":
    sys.exit(main())
