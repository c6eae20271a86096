"""The worker's Sampler: every live flow end sampled once per grid point of its interval.

With the extension built, an RR flow end (``hot_sampled``) takes its own row
at its own moment just after each grid point, at its next idle point (**hot**:
a client once its reply is whole and before its next request, a server once
its reply is out; the C loops do this themselves): no transaction of its own
is in flight, and the others wait for one row, not for a whole tick of rows.
In the C loop of many RR flow ends (:mod:`~netesto.engine.kinds.rrgroup`) no
transaction waits for a row at all: clients whose row is due park at their
idle point and take their rows together once none of them is in flight;
servers take theirs at a quiet moment (their clients parked).
Each row carries the stamps of its own reading. A flow end whose row is due
has ``due_at`` (monotonic) at or before now; the row moves it to the next
grid point (:mod:`~netesto.engine.sampling.grid`: one already past when the
row came late, so the rows it owes follow at its next idle points). The
Sampler's one timer per interval (the
**sweep**, :data:`GRACE` of the interval after each grid point where hot flow
ends are, at the grid point elsewhere) samples every other flow end and every
hot one still due at once, in one call of the C ``sample_tick`` (stalled RR
flows still get a row per interval); with the extension the whole sweep is one
C call, ``fastloop.sweep``, which returns to Python only what it leaves to it.
The sweep's flow ends write their blocks :data:`FLUSH_GROUP` at a time, in
the same sweep (see :meth:`Sampler._first_block`). Stream (and UDP, CRR) ends
stay in the sweep: a row taken alone costs about twice a row in a batch (cold
code more than cold data; see docs/raw-format.md). Without the extension the sweep
samples everything at the grid points through
:meth:`~netesto.engine.sampling.flowrecord.FlowRecord.sample` (the Python twin).
"""

from __future__ import annotations

import math
import os
import time
from array import array
from typing import TYPE_CHECKING, Any, Callable, Protocol

from netesto.engine.native import fastloop
from netesto.engine.sampling.grid import TICK_BACKLOG, next_point
from netesto.engine.sampling.records import sample_end, sample_tick
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.nflow import FlowWriter

if TYPE_CHECKING:
    from netesto.engine.core.loop import Loop, Timer

FILL_CHUNK = 2  # flow ends whose rows get their latency part between two of the loop's handlers
# The sweep's delay after each grid point where hot flow ends are, as a share of the interval: by then a
# busy RR end has had its idle point (16 on one worker come round every few hundred us); one with none
# (stalled) is sampled by the sweep. Kept well below half the interval, so that the rows of one grid point
# (its hot ones and the sweep's) fall in one step of the results' grid (numerics.Grid rounds to the nearest).
GRACE = float(os.environ.get("NETESTO_SAMPLE_GRACE", "") or 0.15)  # (the environment's: benches' A/B only)
# NETESTO_SAMPLE_AT_TICK=1 (benches' A/B only): every row by the sweep at the grid point, as without the extension
AT_TICK = os.environ.get("NETESTO_SAMPLE_AT_TICK", "") not in ("", "0")
# Flow ends of an interval sampled by its sweep write their blocks this many at a time (see Sampler._first_block),
# the groups' sweeps GOLDEN (the golden ratio's fractional part) of a cycle apart, modulo one: spread evenly
# however many groups come.
FLUSH_GROUP = int(os.environ.get("NETESTO_FLUSH_GROUP", "") or 8)  # (the environment's: benches' A/B only)
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class Sampled(Protocol):
    """What the Sampler reads and sets of a flow end (a :class:`~netesto.engine.kinds.flowend.FlowEnd`)."""

    spec: FlowSpec
    is_rr: bool
    nrows: int
    flush_at: int
    flush_rows: int
    finished: bool
    sampling_ok: bool
    writer: FlowWriter | None
    lat_pending: list[Any]
    due_at: float
    due_every: float
    hot_sampled: bool

    def sample(self, mono: float, wall: float | None = None) -> None: ...

    def fill_latency(self) -> None: ...

    def flush(self, written: int = 0) -> None: ...

    def finish(self, error: str = "") -> None: ...




def owed(hot: list[Sampled], point: float) -> list[Sampled]:
    """The hot flow ends that still owe a row for a grid point up to ``point`` already past (stalled, and
    behind since a late sweep: no idle point of their own comes to take it). The Sampler takes them at
    once, each at its own instant, as the C sweep does (fastloop's fl_tick_rows)."""
    by = min(point, time.monotonic())  # (a sweep run before its point owes nothing more)
    return [flow for flow in hot if flow.due_at <= by]


def bench_window_sampled(wall: float, window: float) -> bool:
    """Whether the ``window``-second window of the wall clock holding ``wall`` is sampled under
    the engine's ``--sample-duty``: windows go in pairs (k // 2), and the Thue-Morse sequence (the
    parity of the pair number's one bits) says which of the two: as often the first as the second,
    with no period, so work the flows do at a fixed phase of each second (progress events, which
    all flows started together send together) lands as often in sampled windows as in the others."""
    k = int(wall / window)
    return k % 2 == bin(k // 2).count("1") % 2


class Sampler:
    """Samples every live flow end of a worker once per grid point of its interval (see the module).

    The sweep (one timer per interval) builds the rows of the flow ends still due in one call of
    the C ``sample_tick`` when the extension is built, and calls
    :meth:`~netesto.engine.sampling.flowrecord.FlowRecord.sample` for those it leaves to Python (RR rows
    whose latency part must wait, see ``sample_tick``), or for all of them without the
    extension. :meth:`hot` takes one flow end's row at its idle point (``fastloop.sample_end``;
    the C loops of RR flow ends take theirs themselves, into the same ``acc``).
    ``cpu_ns`` counts the thread CPU time spent in sweeps and in hot rows (clock reads around
    each): flow summaries report it as what sampling cost their worker.
    """

    def __init__(self, loop: "Loop") -> None:
        self.loop = loop
        self.hot_on = sample_end is not None and sample_tick is not None and not AT_TICK
        self.grace = GRACE if self.hot_on else 0.0
        # hot rows' [the probes' own ns, rows, written bytes of a block Python must finish, thread CPU ns of the
        # probed rows, probed rows] (sample_end, the C loops: see _fastloop_hot.c's end_sample)
        self.acc = array("q", [0] * fastloop.ACC_FIELDS)
        self._swept = 0  # rows the Python sweeps took (the C sweeps': sweep_acc)
        self._cpu_ns = 0
        # the C sweeps' [thread CPU ns, rows] (fastloop.sweep: a sweep that leaves nothing to Python runs none)
        self.sweep_acc = array("q", [0] * fastloop.SWEEP_FIELDS)
        self.c_sweep = fastloop.sweep if sample_tick is not None else None
        self.groups: dict[float, list[Sampled]] = {}
        # a group's flow ends in three lists: those sample_tick samples at every sweep, those it samples when
        # their row is still due (hot: they take theirs at their idle points), and the others (Python's)
        self.fast: dict[float, list[Sampled]] = {}
        self.hot_ends: dict[float, list[Sampled]] = {}
        self.slow: dict[float, list[Sampled]] = {}
        self.next: dict[float, float] = {}  # the grid point each interval's next sweep follows
        self.sweeps: dict[float, int] = {}  # each interval's sweeps that took rows so far (see _first_block)
        self.armed: dict[float, float] = {}  # when each interval's sweep timer is due (not when handed: _arm)
        self.handed: dict[float, Any] = {}  # intervals whose sweep the loop's C loop of RR flow ends runs
        self.planned: dict[float, float] = {}  # the first grid point of an interval with no group yet (grid_point)
        self.filling: list[Sampled] = []  # flow ends whose rows wait for their latency part (_fill)
        self.fill_timer: Timer | None = None
        # bench_sampling's within-run comparison only (``--sample-duty W``): ticks sample in one
        # W-second window of each pair of the wall clock and not in the other (bench_window_sampled).
        self.duty = 0.0

    @property
    def cpu_ns(self) -> int:
        """Thread CPU ns of the sweeps and of the hot rows so far: every hot row at the mean of those probed."""
        return self._cpu_ns + self.sweep_acc[0] + self.hot_ns

    @property
    def swept(self) -> int:
        """Rows the sweeps took so far (the others of the grid: hot)."""
        return self._swept + self.sweep_acc[1]

    @property
    def hot_rows(self) -> int:
        return self.acc[1]

    @property
    def hot_ns(self) -> int:
        """Thread CPU ns of the hot rows so far: the probed rows' mean times all, and the probes' own cost."""
        acc = self.acc
        return acc[0] + (acc[3] * acc[1] // acc[4] if acc[4] else 0)

    def add(self, flow: Sampled) -> None:
        interval = flow.spec.interval
        group = self.groups.get(interval)
        if interval in self.handed:  # a new flow end: the sweep is the timer's again
            self.handed[interval].give_back_sweep()
        if group is None:
            group = self.groups[interval] = []
            self.fast[interval], self.hot_ends[interval], self.slow[interval] = [], [], []
            self.sweeps[interval] = 0
            when = self.planned.pop(interval, None) or time.monotonic() + interval
            self.next[interval] = when
            self._timer(interval, when + self._grace(flow) * interval)
        group.append(flow)
        hot = self.hot_on and flow.hot_sampled
        (self.hot_ends if hot else self.fast if sample_tick is not None else self.slow)[interval].append(flow)
        if flow.nrows == 0:  # its first block: 1..flush_rows rows, the later ones flush_rows
            flow.flush_at = self._first_block(flow, interval, hot)
        flow.sample(time.monotonic())  # a row at t=0: the baseline of every counter
        if hot:
            flow.due_every = interval
            flow.due_at = self.next[interval]  # its first row: at its first idle point past the next grid point

    def grid_point(self, interval: float) -> float:
        """The grid point (monotonic) the next sweep of ``interval`` serves: the first row a flow end that
        joins now takes after its baseline is due there, each later one at the next grid point
        (:func:`~netesto.engine.sampling.grid.next_point`: a late row's owed ones follow at once, up to
        TICK_BACKLOG of them). Its file's header records it (``tick_epoch``, with ``tick_backlog``), so
        results know every row's scheduled instant. Without a group yet, the grid
        :meth:`add` will start."""
        if interval in self.handed:  # the C loop of RR flow ends keeps the grid meanwhile: the timer's again
            self.handed[interval].give_back_sweep()
        if interval in self.groups:
            return self.next[interval]
        return self.planned.setdefault(interval, time.monotonic() + interval)

    def _first_block(self, flow: Sampled, interval: float, hot: bool) -> int:
        """The rows of ``flow``'s first block, so that the flow ends of an interval write their blocks FLUSH_GROUP
        at a time, in the same sweep, and the groups' sweeps spread over the flush_rows sweeps of a cycle: a block
        written alone finds the kernel's write path cold and costs about twice one of a group
        (bench_sampling --idle-only). A hot flow end writes its block at its own idle point: alone, spread
        one by one over the cycle (a group's would hold the others' transactions)."""
        rows = flow.flush_rows
        if hot:
            return 1 + (len(self.groups[interval]) - 1) % rows
        group = (len(self.fast[interval]) + len(self.slow[interval]) - 1) // FLUSH_GROUP
        at = int((group * GOLDEN) % 1.0 * rows)  # the group's blocks: in the sweeps numbered at - 1 modulo rows
        # its rows: one now (add), then one a sweep from sweep number sweeps[interval] on
        return (at - self.sweeps[interval]) % rows + 1

    def _grace(self, flow: Sampled | None) -> float:
        """The sweep's delay after a grid point (a share of the interval): GRACE where hot flow ends are."""
        return self.grace if flow is not None and flow.hot_sampled else 0.0

    def remove(self, flow: Sampled) -> None:
        flow.due_at = math.inf
        interval = flow.spec.interval
        for flows in (self.groups.get(interval), self.fast.get(interval), self.hot_ends.get(interval),
                      self.slow.get(interval)):
            if flows is not None and flow in flows:
                flows.remove(flow)

    def _tick(self, interval: float) -> None:
        """The sweep after grid point ``self.next[interval]``: every flow end still due, sampled at once."""
        group = self.groups.get(interval)
        if not group:
            for groups in (self.groups, self.fast, self.hot_ends, self.slow, self.armed, self.sweeps):
                groups.pop(interval, None)
            return
        point = self.next[interval]
        if self.c_sweep is not None and not self.duty and not self.slow[interval]:
            # the whole sweep in C (the same steps as below): the Python lines around sample_tick, run cold
            # every interval, cost as much as 5 to 10 of its rows
            self.sweeps[interval] += 1
            got = self.c_sweep(self.fast[interval], self.hot_ends[interval], point, interval, self.sweep_acc)
            if type(got) is float:
                when = got
            else:  # blocks or rows left to Python, or rows that failed
                cpu0 = time.thread_time_ns()
                when, now, wall, due, failed, python = got
                self._left(due, failed, python, [], now, wall)
                self._cpu_ns += time.thread_time_ns() - cpu0
            self.next[interval] = when
            hot = self.hot_ends[interval]
            self._arm(interval, when + self._grace(hot[0] if hot else None) * interval)
            return
        cpu0 = time.thread_time_ns()
        # One instant per sweep: every row it takes carries the same stamps.
        now = time.monotonic()
        wall = time.time()
        if not self.duty or bench_window_sampled(wall, self.duty):
            fast, hot = self.fast[interval], self.hot_ends[interval]
            if hot:  # those whose idle point did not come (stalled), with the others
                fast = fast + [flow for flow in hot if flow.due_at <= point]
            self._swept += len(fast) + len(self.slow[interval])
            self.sweeps[interval] += 1
            self._sample(fast, self.slow[interval], now, wall)
            for _ in range(TICK_BACKLOG if hot else 0):  # the rows stalled hot ends still owe (see owed)
                late = owed(hot, point)
                if not late:
                    break
                self._swept += len(late)
                self._sample(late, [], time.monotonic(), time.time())
        when = next_point(point, now, interval)  # (late: maybe past already, the sweep it owes comes next)
        self.next[interval] = when
        hot = self.hot_ends[interval]
        if hot:  # a row moved its flow end's due_at on (FlowRecord.sample); those without one due: the next point
            sampled = not self.duty or bench_window_sampled(wall + when - now, self.duty)
            for flow in hot:
                if not sampled:  # --sample-duty: no row of any kind in the next window
                    flow.due_at = math.inf
                elif flow.due_at == math.inf:
                    flow.due_at = when
                elif now < flow.due_at <= point:  # its row came before its due_at (a sweep run early): as at point
                    flow.due_at = next_point(flow.due_at, point, interval)
        self._cpu_ns += time.thread_time_ns() - cpu0
        self._arm(interval, when + self._grace(hot[0] if hot else None) * interval)

    def _arm(self, interval: float, at: float) -> None:
        """The next sweep of ``interval`` at ``at``: the loop's timer, or its C loop of RR flow ends when every
        flow end of the interval is a member (rrgroup.RRGroup.take_sweep: no return to Python for it)."""
        rr = getattr(self.loop, "rr_group", None)
        hot = self.hot_ends.get(interval)
        if (rr is not None and hot and not self.fast[interval] and not self.slow[interval] and not self.duty
                and all(getattr(flow, "rr_slot", -1) >= 0 for flow in hot) and rr.take_sweep(interval, at)):
            self.handed[interval] = rr
            self.armed.pop(interval, None)
            return
        self._timer(interval, at)

    def _timer(self, interval: float, at: float) -> None:
        self.armed[interval] = at
        self.loop.call_at(at, lambda: self._tick(interval))

    def sweep_back(self, interval: float, at: float) -> None:
        """The C loop of RR flow ends gives the sweep of ``interval`` (next at ``at``) back to a timer."""
        self.handed.pop(interval, None)
        if interval in self.groups:
            self.next[interval] = at - self.grace * interval
            self._timer(interval, at)

    def idle_sweep(self, flow: Sampled) -> float | None:
        """When the timer's next sweep of ``flow``'s interval is due, if that sweep will only re-arm: ``flow``
        is the interval's only flow end and takes its rows hot, no row waits for its latency part, no sweep
        is handed to a C loop (else None)."""
        interval = flow.spec.interval
        group = self.groups.get(interval)
        if (not self.hot_on or self.duty or self.filling or self.handed or group is None or len(group) != 1
                or group[0] is not flow):
            return None
        return self.armed.get(interval)

    def hot(self, flow: Sampled) -> None:
        """``flow``'s row now, at its idle point (its due_at is past): see the module. Its cost goes
        into ``acc`` (the C side's clock reads), what Python must finish into ``cpu_ns`` too."""
        try:
            got = sample_end(flow, self.acc)  # type: ignore[misc]
        except Exception as exc:  # as _guarded
            self._failed(flow, exc)
            return
        if got:
            self.hot_rest(flow, got, self.acc[2])

    def hot_rest(self, flow: Sampled, code: int, what: Any) -> None:
        """What a hot row left to Python (``sample_end``'s or a C loop's code): 1 its block to write
        (``what`` bytes of it out), 2 the row itself (FlowRecord.sample), -1 it failed (``what``)."""
        if code < 0:
            self._failed(flow, what)
            return
        cpu0 = time.thread_time_ns()
        if code == 1:
            self._guarded(flow, lambda: flow.flush(what))
        else:
            self._sample([], [flow], time.monotonic(), time.time())  # (FlowRecord.sample moves its due_at on)
        self._cpu_ns += time.thread_time_ns() - cpu0

    def _sample(self, fast: list[Sampled], slow: list[Sampled], now: float, wall: float) -> None:
        if fast:
            assert sample_tick is not None
            due, failed, python = sample_tick(fast, wall, now)  # writes the due blocks too (TICK_WRITES)
            self._left(due, failed, python, slow, now, wall)
        else:
            self._left([], [], [], slow, now, wall)

    def _left(self, due: list[tuple[Sampled, int]], failed: list[tuple[Sampled, BaseException]],
              python: list[Sampled], slow: list[Sampled], now: float, wall: float) -> None:
        """What sample_tick (or sweep) left to Python: the rows that failed, the blocks to write, the rows of
        ``python`` and ``slow`` to build (FlowRecord.sample) and their latency parts to fill (_fill)."""
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
        self._cpu_ns += time.thread_time_ns() - cpu0

    def _guarded(self, flow: Sampled, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as exc:  # e.g. the disk is full: end this flow, sample the others
            self._failed(flow, exc)

    @staticmethod
    def _failed(flow: Sampled, exc: BaseException) -> None:
        if not isinstance(exc, Exception):
            # a stop (the SIGTERM handler's exception) raised while a C tick or row ran Python, which handed it
            # back as this row's failure: it is the worker's, and goes on up to the stop's handler
            raise exc
        if flow.finished:
            return
        if isinstance(exc, OSError) and flow.writer is not None:  # e.g. a full disk: write no more
            flow.writer.abandon()
            flow.writer = None
        flow.sampling_ok = False  # the same would fail again for the last row
        flow.finish(f"sampling failed: {type(exc).__name__}: {exc}")


__all__ = ["AT_TICK", "FLUSH_GROUP", "GOLDEN", "GRACE", "Sampled", "Sampler", "bench_window_sampled", "owed"]
