"""The worker's Sampler: every live flow end sampled on one grid per interval.

A tick samples all flow ends of an interval at one instant: in one call of
the C ``sample_tick`` when the extension is built (RR rows with their
latency part), through :meth:`~netesto.engine.flowrecord.FlowRecord.sample`
without it and for the few rows the C tick leaves to Python.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from netesto.engine.records import sample_tick
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.nflow import FlowWriter

if TYPE_CHECKING:
    from netesto.engine.loop import Loop, Timer

FILL_CHUNK = 2  # flow ends whose rows get their latency part between two of the loop's handlers


class Sampled(Protocol):
    """What the Sampler reads and sets of a flow end (a :class:`~netesto.engine.flowend.FlowEnd`)."""

    spec: FlowSpec
    is_rr: bool
    nrows: int
    flush_at: int
    flush_rows: int
    finished: bool
    sampling_ok: bool
    writer: FlowWriter | None
    lat_pending: list[Any]

    def sample(self, mono: float, wall: float | None = None) -> None: ...

    def fill_latency(self) -> None: ...

    def flush(self, written: int = 0) -> None: ...

    def finish(self, error: str = "") -> None: ...




def bench_window_sampled(wall: float, window: float) -> bool:
    """Whether the ``window``-second window of the wall clock holding ``wall`` is sampled under
    the engine's ``--sample-duty``: windows go in pairs (k // 2), and the Thue-Morse sequence (the
    parity of the pair number's one bits) says which of the two: as often the first as the second,
    with no period, so work the flows do at a fixed phase of each second (progress events, which
    all flows started together send together) lands as often in sampled windows as in the others."""
    k = int(wall / window)
    return k % 2 == bin(k // 2).count("1") % 2


class Sampler:
    """Samples every live flow end of a worker on a grid per interval (one timer per interval).

    A tick builds the rows of its flow ends in one call of the C ``sample_tick``
    when the extension is built, and calls
    :meth:`~netesto.engine.flowrecord.FlowRecord.sample` for those it leaves to Python (RR rows
    whose latency part must wait, see ``sample_tick``), or for all of them without the
    extension. ``cpu_ns`` counts the thread CPU time spent in ticks (two
    clock reads per tick): flow summaries report it as what sampling cost
    their worker.
    """

    def __init__(self, loop: "Loop") -> None:
        self.loop = loop
        self.groups: dict[float, list[Sampled]] = {}
        # a group's flow ends in two lists: those sample_tick samples, and the others
        self.fast: dict[float, list[Sampled]] = {}
        self.slow: dict[float, list[Sampled]] = {}
        self.next: dict[float, float] = {}
        self.cpu_ns = 0
        self.filling: list[Sampled] = []  # flow ends whose rows wait for their latency part (_fill)
        self.fill_timer: Timer | None = None
        # bench_sampling's within-run comparison only (``--sample-duty W``): ticks sample in one
        # W-second window of each pair of the wall clock and not in the other (bench_window_sampled).
        self.duty = 0.0

    def add(self, flow: Sampled) -> None:
        interval = flow.spec.interval
        group = self.groups.get(interval)
        if group is None:
            group = self.groups[interval] = []
            self.fast[interval], self.slow[interval] = [], []
            when = time.monotonic() + interval
            self.next[interval] = when
            self.loop.call_at(when, lambda: self._tick(interval))
        group.append(flow)
        (self.fast if sample_tick is not None else self.slow)[interval].append(flow)
        # Spread the flushes of a group over the ticks (flows that start
        # together would all write their block in the same tick): this flow's
        # first block is 1..flush_rows rows, the later ones flush_rows.
        if flow.nrows == 0:
            flow.flush_at = 1 + (len(group) - 1) % flow.flush_rows
        flow.sample(time.monotonic())  # a row at t=0: the baseline of every counter

    def remove(self, flow: Sampled) -> None:
        interval = flow.spec.interval
        for flows in (self.groups.get(interval), self.fast.get(interval), self.slow.get(interval)):
            if flows is not None and flow in flows:
                flows.remove(flow)

    def _tick(self, interval: float) -> None:
        group = self.groups.get(interval)
        if not group:
            for groups in (self.groups, self.fast, self.slow):
                groups.pop(interval, None)
            return
        cpu0 = time.thread_time_ns()
        # One instant per tick: every row of the tick carries the same stamps.
        now = time.monotonic()
        wall = time.time()
        if not self.duty or bench_window_sampled(wall, self.duty):
            self._sample(self.fast[interval], self.slow[interval], now, wall)
        self.cpu_ns += time.thread_time_ns() - cpu0
        when = self.next[interval] + interval
        if when <= now:  # we fell behind: skip the missed grid points
            when += ((now - when) // interval + 1) * interval
        self.next[interval] = when
        self.loop.call_at(when, lambda: self._tick(interval))

    def _sample(self, fast: list[Sampled], slow: list[Sampled], now: float, wall: float) -> None:
        if fast:
            assert sample_tick is not None
            due, failed, python = sample_tick(fast, wall, now)  # writes the due blocks too (TICK_WRITES)
            for flow, exc in failed:
                self._failed(flow, exc)
            for flow, written in due:
                self._guarded(flow, lambda: flow.flush(written))
            if python:
                slow = slow + python
        for flow in list(slow):  # finish() removes from it
            try:
                flow.sample(now, wall)
            except Exception as exc:  # as _guarded, without a closure and a call per flow end
                self._failed(flow, exc)
        if slow:
            # appended, not replaced: another interval's flow ends may still wait (a second
            # fill_latency of a flow end already filled returns at once)
            self.filling.extend(flow for flow in slow if flow.lat_pending)
            if self.filling and self.fill_timer is None:
                self.fill_timer = self.loop.call_at(time.monotonic(), self._fill)

    def _fill(self) -> None:
        """The latency parts of the last tick's RR rows, a few flow ends at a time between the loop's
        handlers: the tick reads every counter at its instant, and the flows' replies wait for no
        more than a few summaries at once (16 RR flow ends' summaries in the tick held every
        reply for up to ~0.3 ms), nor for the writes of their blocks, which go with them."""
        cpu0 = time.thread_time_ns()
        todo = self.filling
        for flow in todo[:FILL_CHUNK]:
            self._guarded(flow, flow.fill_latency)
        del todo[:FILL_CHUNK]
        self.fill_timer = self.loop.call_at(time.monotonic(), self._fill) if todo else None
        self.cpu_ns += time.thread_time_ns() - cpu0

    def _guarded(self, flow: Sampled, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # e.g. the disk is full: end this flow, sample the others
            self._failed(flow, exc)

    @staticmethod
    def _failed(flow: Sampled, exc: BaseException) -> None:
        if flow.finished:
            return
        if isinstance(exc, OSError) and flow.writer is not None:  # e.g. a full disk: write no more
            flow.writer.abandon()
            flow.writer = None
        flow.sampling_ok = False  # the same would fail again for the last row
        flow.finish(f"sampling failed: {type(exc).__name__}: {exc}")


__all__ = ["Sampled", "Sampler", "bench_window_sampled"]
