"""The delay line's packet loop: each queue a :class:`Link`, every packet held from its own arrival, never released early.

Each packet's hold starts at its own arrival: the kernel's timestamp of the
packet (:mod:`netesto.testbed.nfqueue` turns the stamps on), mapped from
CLOCK_REALTIME onto the loop's CLOCK_MONOTONIC never too early
(:mod:`netesto.testbed.delayclock`) and capped at the moment the loop read
the packet. A verdict is sent only once the clock has passed the packet's
due time. What each packet really got is counted per link
(:mod:`netesto.testbed.delaystats`): held, dropped, released early (0), and
the delay added beyond its hold.

One single-threaded loop serves every bound queue: due times go into one
heap, and the loop sleeps in ``select`` until the next one or the next
packet. Each queue is a :class:`~netesto.testbed.delaylinks.Link` that decides
when a packet it admits is due (a delay, or a delivery trace's opportunities:
:mod:`netesto.testbed.delaylinks`), so one process emulates every link of a
testbed; a unix datagram control socket (``--control PATH``) changes links,
turns a queue into a trace-driven link and back, and reads statistics while
it runs (:mod:`netesto.testbed.delaycontrol` is its client).

``python -m netesto.testbed.delayline`` runs it.
"""

from __future__ import annotations

import gc
import heapq
import json
import os
import random
import select
import socket
import time
from dataclasses import replace
from typing import Any

from netesto.errors import TestbedError
from netesto.testbed.delayclock import RealtimeMap
from netesto.testbed.delaylinks import Link, LinkSettings, TraceLink, load_times
from netesto.testbed.delaystats import LinkStats, kernel_counters, total
from netesto.testbed.nfqueue import NF_ACCEPT, NF_DROP, NfQueue, parse_sized, verdict_message

IDLE_S = 1.0  # longest sleep with nothing held (a signal wakes the loop anyway)
BATCH = 64  # verdicts per datagram
READS_PER_PASS = 256  # bounded, so due releases are not starved by a flood
DRAIN_LIMIT_NS = 2_000_000_000  # on stop, held packets leave when due, for at most this long
GC_IDLE_NS = 1_000_000_000  # the collector runs only after this long with nothing held


class SpinBudget:
    """When to busy-wait for a release instead of sleeping to it: within ``lead_ns`` of it, and for at most
    ``share`` of the time (a token bucket holding up to ``burst_ns``), so a dense stream of releases
    cannot turn the loop into a busy loop. ``lead_ns`` 0 never spins."""

    __slots__ = ("lead_ns", "share", "burst_ns", "tokens", "at", "spent_ns")

    def __init__(self, lead_ns: int = 200_000, share: float = 0.1, burst_ns: int = 20_000_000) -> None:
        self.lead_ns = lead_ns
        self.share = share
        self.burst_ns = burst_ns
        self.tokens = burst_ns
        self.at = time.monotonic_ns()
        self.spent_ns = 0

    def allow(self, now: int) -> bool:
        if not self.lead_ns:
            return False
        self.tokens = min(self.burst_ns, self.tokens + int((now - self.at) * self.share))
        self.at = now
        return self.tokens > 0

    def spend(self, ns: int) -> None:
        self.tokens -= ns
        self.spent_ns += ns


class DelayLine:
    """The loop: receive and stamp, drop or schedule, release what is due, count what each packet got."""

    def __init__(self, nfq: NfQueue, settings: dict[int, LinkSettings], *, control: str | None = None,
                 seed: int | None = None, clock: RealtimeMap | None = None, spin: SpinBudget | None = None) -> None:
        self.nfq = nfq
        self.spin = spin if spin is not None else SpinBudget()
        self.rng = random.Random(seed)
        self.links: dict[int, Link] = {q: Link(s, self.rng) for q, s in settings.items()}
        self.sized: set[int] = set()  # queues whose packets' lengths matter (trace links)
        # (due ns, packet id, queue, its NF_ACCEPT verdict): built as the packet is read, while
        # that code is warm; built at the release it cost 15-30 us of cold caches after a sleep.
        self.heap: list[tuple[int, int, int, bytes]] = []
        self.buf = bytearray(65536)
        self.view = memoryview(self.buf)
        self.running = True
        self.received = 0
        self.dropped_at_exit = 0
        self.errors: list[int] = []  # errno of netlink error replies (bounded below)
        self.clock = clock if clock is not None else RealtimeMap()
        # A signal's byte lands here (signal.set_wakeup_fd), so a stop does not wait out a sleep.
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
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

    def _link(self, queue: int) -> Link:
        # A queue bound without settings of its own (cannot happen from the CLI) passes packets at once.
        link = self.links[queue] = Link(LinkSettings(), self.rng)
        return link

    def _receive(self, out: list[tuple[bytes, int, int]]) -> None:
        sock = self.nfq.sock
        mono = time.monotonic_ns
        offset = self.clock.offset
        links = self.links
        heap = self.heap
        for _ in range(READS_PER_PASS):
            try:
                n = sock.recv_into(self.buf)
            except BlockingIOError:
                return
            read_at = mono()  # after the packet was in the socket: an upper bound on its arrival
            for queue, packet_id, stamp, size in parse_sized(self.view, n, self.errors, self.sized):
                self.received += 1
                link = links.get(queue) or self._link(queue)
                if stamp < 0:
                    arrival = read_at
                    link.stats.unstamped += 1
                else:
                    arrival = stamp - offset
                    if arrival > read_at:
                        arrival = read_at
                        link.stats.capped += 1
                due = link.admit(arrival, size)
                if due is None:
                    out.append((verdict_message(queue, packet_id, NF_DROP), queue, -1))
                else:
                    heapq.heappush(heap, (due, packet_id, queue, verdict_message(queue, packet_id, NF_ACCEPT)))

    def _release(self, out: list[tuple[bytes, int, int]]) -> None:
        heap = self.heap
        now = time.monotonic_ns()
        while heap and heap[0][0] <= now:
            due, _packet_id, queue, verdict = heapq.heappop(heap)
            out.append((verdict, queue, due))

    def _send(self, data: bytes) -> bool:
        sock = self.nfq.sock
        while True:
            try:
                sock.send(data)
                return True
            except BlockingIOError:
                select.select([], [sock], [], 0.01)
            except OSError as exc:
                # Rare (e.g. ENOMEM); those packets stay queued until the queues are unbound.
                self.errors.append(exc.errno or 0)
                return False

    def _flush(self, out: list[tuple[bytes, int, int]]) -> None:
        # Several verdicts in one datagram: one syscall for a burst of releases. The kernel
        # forwards each packet inside that send, so its release lies between the two clock reads.
        mono = time.monotonic_ns
        links = self.links
        for i in range(0, len(out), BATCH):
            chunk = out[i : i + BATCH]
            before = mono()
            sent = self._send(b"".join([c[0] for c in chunk]))
            after = mono()
            if not sent:
                continue
            for _msg, queue, due in chunk:
                if due >= 0:
                    stats = links[queue].stats
                    if before < due:
                        stats.early += 1
                    stats.add(after - due)
        out.clear()

    def snapshot(self) -> dict[str, Any]:
        """Every statistic the control socket reports: the total, per queue, the kernel's own counters."""
        kernel = {q: c for q, c in kernel_counters().items() if q in self.links}
        return {
            **total({q: lk.stats for q, lk in self.links.items()}).summary(),
            "packets": self.received, "waiting": len(self.heap), "netlink_errors": len(self.errors),
            "dropped_at_exit": self.dropped_at_exit, "clock_steps": self.clock.steps,
            "spin_s": round(self.spin.spent_ns / 1e9, 3),
            "kernel_dropped": sum(c["queue_dropped"] + c["user_dropped"] for c in kernel.values()),
            "queues": {str(q): lk.stats.summary() for q, lk in sorted(self.links.items())},
            "traces": {str(q): lk.describe() for q, lk in sorted(self.links.items()) if isinstance(lk, TraceLink)},
            "kernel": {str(q): c for q, c in sorted(kernel.items())},
        }

    def reset_stats(self) -> None:
        for link in self.links.values():
            link.stats = LinkStats()
        self.received = 0

    def _handle_control(self) -> None:
        assert self.control is not None
        while True:
            try:
                data, addr = self.control.recvfrom(65536)
            except BlockingIOError:
                return
            reply: dict[str, object]
            try:
                reply = self._control(json.loads(data))
            except (ValueError, KeyError, TypeError, TestbedError) as exc:
                reply = {"ok": False, "error": str(exc)}
            if addr:
                try:
                    self.control.sendto(json.dumps(reply).encode(), addr)
                except OSError:
                    pass

    def _control(self, req: dict[str, Any]) -> dict[str, object]:
        """One control request: ``stats``, ``settings`` (one queue's, read back), ``trace`` (a queue
        becomes a trace-driven link, or a plain one again), else new settings for a queue."""
        op = req.get("op")
        if op == "stats":
            reply: dict[str, object] = {"ok": True, "stats": self.snapshot(),
                                        "settings": {str(q): vars(lk.settings) for q, lk in self.links.items()}}
            if req.get("reset"):
                self.reset_stats()
            return reply
        queue = int(req["queue"])
        link = self.links.get(queue) or self._link(queue)
        if op == "settings":
            return {"ok": True, "settings": link.describe()}
        if op == "trace":
            return self._trace(queue, link, req)
        old = link.settings
        link.configure(replace(
            old,
            delay_ms=float(req.get("delay", old.delay_ms)),
            jitter_ms=float(req.get("jitter", old.jitter_ms)),
            loss=float(req.get("loss", old.loss)),
            ordered=bool(req.get("ordered", old.ordered)),
        ))
        return {"ok": True, "settings": link.describe()}

    def _trace(self, queue: int, link: Link, req: dict[str, Any]) -> dict[str, object]:
        """``{"op": "trace", "queue": q, "file": path, "epoch_ns": t, "limit_bytes": b, "limit_packets": p}``:
        queue ``q`` leaves at the opportunities of trace ``path`` from ``epoch_ns`` (CLOCK_MONOTONIC);
        ``"file": null`` makes it a plain delay link again. Packets already held keep their due times."""
        settings = replace(link.settings, jitter_ms=0.0)
        if req.get("file") is None:
            if not isinstance(link, TraceLink):
                return {"ok": True, "settings": link.describe()}  # not a trace link: as it is
            self.links[queue] = plain = Link(replace(settings, ordered=False), self.rng)
            plain.stats = link.stats
            self.sized.discard(queue)
            self._gso(queue, True)
            return {"ok": True, "settings": plain.describe()}
        times = load_times(str(req["file"]))
        trace = TraceLink(settings, self.rng, times, int(req.get("epoch_ns", time.monotonic_ns())),
                          limit_bytes=int(req.get("limit_bytes", 0)), limit_packets=int(req.get("limit_packets", 0)),
                          name=str(req.get("name", req["file"])), stats=link.stats)
        trace.last_due = link.last_due
        self.links[queue] = trace
        self.sized.add(queue)
        self._gso(queue, False)
        return {"ok": True, "settings": trace.describe()}

    def _gso(self, queue: int, whole: bool) -> None:
        # A trace delivers 1500-byte opportunities: its queue gets wire-sized packets from the kernel.
        set_gso = getattr(self.nfq, "set_gso", None)
        if set_gso is not None:
            try:
                set_gso(queue, whole)
            except OSError as exc:
                self.errors.append(exc.errno or 0)

    def run(self) -> None:
        fds: list[Any] = [self.nfq.sock, self.wake_r]
        if self.control is not None:
            fds.append(self.control)
        out: list[tuple[bytes, int, int]] = []
        mono = time.monotonic_ns
        heap = self.heap
        spin = self.spin
        stop_at = -1
        quiet_since = mono()
        # No collector pauses while packets are held: the loop makes no reference cycles.
        gc.collect()
        gc.freeze()
        gc.disable()
        try:
            while True:
                now = mono()
                if not self.running and stop_at < 0:
                    # What is held leaves when due (bounded), new arrivals are held too, the rest dropped.
                    stop_at = min(max((e[0] for e in heap), default=now), now + DRAIN_LIMIT_NS)
                if stop_at >= 0 and now >= stop_at:
                    break
                wake = heap[0][0] if heap else now + int(IDLE_S * 1e9)
                if stop_at >= 0:
                    wake = min(wake, stop_at)
                spinning = False
                if heap and wake - now <= spin.lead_ns and spin.allow(now):
                    spinning = True  # poll without sleeping: a timer wake-up costs ~70 us here
                    timeout = 0.0
                else:
                    timeout = max(0, wake - now - (spin.lead_ns if spin.lead_ns and spin.allow(now) else 0)) / 1e9
                try:
                    ready, _, _ = select.select(fds, [], [], timeout)
                except InterruptedError:
                    continue
                if ready:
                    if self.nfq.sock in ready:
                        self.clock.refresh()
                        self._receive(out)
                    if self.wake_r in ready:
                        self._drain_wakeups()
                    if self.control is not None and self.control in ready:
                        self._handle_control()
                if len(self.errors) > 10_000:
                    del self.errors[:-100]
                self._release(out)
                if out:
                    self._flush(out)
                if spinning:
                    spin.spend(mono() - now)
                if heap or ready:
                    quiet_since = mono()
                elif mono() - quiet_since > GC_IDLE_NS:
                    gc.collect()
                    quiet_since = mono()
        finally:
            gc.unfreeze()
            gc.enable()
        for _due, packet_id, queue, _verdict in heap:
            out.append((verdict_message(queue, packet_id, NF_DROP), queue, -1))
        self.dropped_at_exit += len(heap)
        heap.clear()
        if out:
            self._flush(out)

    def _drain_wakeups(self) -> None:
        try:
            while self.wake_r.recv(64):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
            if self.control_path:
                try:
                    os.unlink(self.control_path)
                except FileNotFoundError:
                    pass
        self.wake_r.close()
        self.wake_w.close()
        self.clock.close()
        self.nfq.close()


__all__ = ["DelayLine", "Link", "LinkSettings", "SpinBudget", "TraceLink"]
