"""Many TCP_RR flow ends of one worker in one C epoll loop (``_rrloop``): the group and its hand-offs.

A flow end that joins the group of its :class:`~netesto.engine.core.loop.Loop`
leaves the loop's epoll for the group's, and the loop waits in
:meth:`RRGroup.wait` instead of its own epoll while the group has members:
the C loop serves the members' sockets in turn until the loop's next timer
is due or one of the loop's own sockets is ready (the loop's epoll fd is in
the group's epoll), so the sampler, new connections and every other handler
run as they would. Counters and latencies are moved into the flow ends
(``tx``, ``rx``, ``trans``, ``lat_raw``: what the sampler reads) on every
return, exceptions included. A member whose row is due (its ``due_at``, see
:mod:`~netesto.engine.sampling.sampler`) gets it from the C loop at its idle point (a
client once its reply is whole, before its next request; a server once its
replies are out), with the slot's counters and latencies, so the loop need not
come back to Python for the sampler with every member's transaction held. No
transaction waits for another member's row: clients whose row is due park at
their idle point until no client member is in flight and take their rows then
(``PARK_SHARE``), servers take theirs at a quiet moment (their clients parked,
``QUIET_NS``), one at a time. A member whose socket needs Python (EOF, an
error, a partial send) leaves the group and its flow end takes it over
(``rr_left``); so does one that ends or closes.
"""

from __future__ import annotations

import json
import os
import select
from array import array
from typing import Any, Callable, Protocol

from netesto.engine.sampling.flowrecord import LAT_FOLD
from netesto.engine.core.loop import Loop

# A client member whose row is due parks at its idle point (no request out) until no client member of the
# group has a transaction in flight, then they all take their rows and go on: no transaction waits for a row.
# A slow or stalled member holds them PARK_SHARE of its interval at most (PARK_MAX_NS).
# NETESTO_RR_PARK=0 (benches' A/B only): clients take their rows at their own idle points, not parked.
PARK = os.environ.get("NETESTO_RR_PARK", "") != "0"
PARK_SHARE = 0.1
PARK_MAX_NS = 1_000_000
# A server member's row waits for a quiet moment (nothing ready for QUIET_NS: its clients' pause, when they
# park) for at most PEND_SHARE of its interval (their pause comes once per interval, at their grid's phase: with 0.8,
# a fifth of the phases missed it); NETESTO_RR_QUIET_US=0 (benches' A/B only): rows at idle points. 15 us of
# nothing ready: with 30, once the sockets were served in the order their data came (edge-triggered), the
# servers of test_rr_park took 62-90 % of their rows at quiet moments (5 runs), with 15 75-95 %; the RR p99
# sampled/unsampled of 16 flows stayed 0.96 (bench_sampling --rr-only)
QUIET_NS = int(float(os.environ.get("NETESTO_RR_QUIET_US", "") or 15) * 1000)
PEND_SHARE = 0.95
# The members' sockets are edge-triggered in the group's epoll, so they are served in the order their data
# came (see _rrloop.c); NETESTO_RR_EDGE=0 (benches' A/B only): level-triggered, as before session 27.
EDGE = os.environ.get("NETESTO_RR_EDGE", "") != "0"
# NETESTO_RR_HOLDS=DIR (benches only): each time a group empties, what the rows held its transactions
# (_rrloop.holds) goes to DIR/holds-PID-N.json and the counts start again
HOLDS_DIR = os.environ.get("NETESTO_RR_HOLDS", "")
LAT_SLOT = 2048  # latencies a member holds between two returns (the C loop returns when one is full)
SLOTS = 16  # the table's first size; it doubles when more flow ends join


class Member(Protocol):
    """What a flow end in the group has (RRClient, RRServer)."""

    fd: int
    got: int
    tx: int
    rx: int
    trans: int
    t0: int
    rr_slot: int
    lat_raw: "array[int]"

    def fold_latency(self) -> None: ...

    def rr_left(self, status: int, errno: int, left: int) -> None: ...

    def fail_running(self, exc: BaseException) -> None: ...


class RRGroup:
    """The C-served RR flow ends of one loop: their table, latency buffers and epoll."""

    def __init__(self, loop: Loop, rr: Any) -> None:
        self.loop = loop
        self.rr = rr
        self.ep = select.epoll()
        self.epfd = self.ep.fileno()
        rr.ctl(self.epfd, rr.CTL_ADD, loop.fileno(), -1)
        self.fields = rr.FIELDS
        self.members: dict[int, Member] = {}  # slot -> flow end
        self.flows: list[Member | None] = []  # the same by slot, for the C loop's hot rows (None: free)
        self.sampler: Any = None  # the members' Sampler, when it takes hot rows (its acc, hot_rest)
        self.out: list[tuple[Member, int, Any]] = []  # what the C loop's hot rows left to Python
        # the sampler's sweep [at, every] of an interval whose flow ends are all members, run by the C loop
        # (take_sweep): the loop need not come back to Python for it with every member's transaction held
        self.sweep = array("d", [0.0, 0.0])
        self.sweep_interval = 0.0  # its interval (0: none handed over)
        self.free: list[int] = []
        self.table = array("q")
        self.touched = array("q", [0])  # [n, slot...]: the slots the C loop served since the last copy
        self.lat = array("q")
        self.latview = memoryview(b"")
        self._grow(SLOTS)
        self.returns = 0  # C calls, and of them returns for a member (for tests and benches)
        self.handoffs = 0
        self.dumps = 0
        self.pend_max = 0  # ns a server member's row may wait for a quiet moment (PEND_SHARE of its interval)
        self.park_max = 0  # ns client members may stay parked (PARK_SHARE of the interval, PARK_MAX_NS at most)

    def _grow(self, slots: int) -> None:
        """Room for ``slots`` members (never while the C loop runs: only joins grow the table)."""
        old = len(self.table) // self.fields
        self.latview.release()  # an array cannot be resized while a view exports it
        self.table.extend([0] * (slots - old) * self.fields)
        self.touched.extend([0] * (slots - old))
        self.lat.extend([0] * (slots - old) * LAT_SLOT)
        self.flows.extend([None] * (slots - old))
        self.latview = memoryview(self.lat).cast("B")
        self.free.extend(range(slots - 1, old - 1, -1))

    def join(self, flow: Member, server: bool, req: int, reply: int) -> None:
        """``flow``'s socket leaves the loop's epoll for the group's (its counters go into the table)."""
        rr = self.rr
        if not self.free:
            self._grow(2 * len(self.table) // self.fields)
        slot = self.free.pop()
        base = slot * self.fields
        row = [0] * self.fields
        row[rr.FD], row[rr.ROLE], row[rr.REQ], row[rr.REPLY] = flow.fd, rr.SERVER if server else rr.CLIENT, req, reply
        row[rr.GOT], row[rr.RX], row[rr.TX], row[rr.TRANS] = flow.got, flow.rx, flow.tx, flow.trans
        row[rr.T0], row[rr.STATUS], row[rr.H0] = 0 if server else flow.t0, rr.RUN, -1
        self.table[base:base + self.fields] = array("q", row)
        self.loop.unregister(flow.fd)
        rr.ctl(self.epfd, rr.CTL_ADD, flow.fd, slot, EDGE)
        flow.rr_slot = slot
        self.members[slot] = flow
        self.flows[slot] = flow
        sampler = getattr(getattr(flow, "worker", None), "sampler", None)  # (none: a bare member, in tests)
        if sampler is not None and sampler.hot_on and self.rr.hot():  # (else the sweep samples them)
            self.sampler = sampler
            every = getattr(flow, "due_every", 0.0)
            pend, park = int(PEND_SHARE * every * 1e9), min(PARK_MAX_NS, int(PARK_SHARE * every * 1e9)) if PARK else 0
            self.pend_max = min(self.pend_max, pend) if self.pend_max else pend
            self.park_max = min(self.park_max, park) if self.park_max else park
        self.loop.waiter = self.wait

    def take_sweep(self, interval: float, at: float) -> bool:
        """Run the sampler's sweep of ``interval`` (next at ``at``, monotonic) in the C loop, if none is yet."""
        if self.sampler is None or self.sweep_interval not in (0.0, interval):
            return False
        self.sweep[0], self.sweep[1] = at, interval
        self.sweep_interval = interval
        return True

    def give_back_sweep(self) -> None:
        """The sweep back to the sampler's timer (a member leaves, a flow end joins its interval)."""
        interval, at = self.sweep_interval, self.sweep[0]
        if not interval:
            return
        self.sweep_interval = self.sweep[0] = self.sweep[1] = 0.0
        self.sampler.sweep_back(interval, at)

    def leave(self, flow: Member) -> None:
        """``flow`` is no longer served here (its counters are in it; its socket in no epoll)."""
        slot = flow.rr_slot
        if slot < 0 or self.members.get(slot) is not flow:
            return
        self.give_back_sweep()
        self._sync(slot, flow)
        try:
            self.rr.ctl(self.epfd, self.rr.CTL_DEL, flow.fd, slot)
        except OSError:
            pass  # its socket is closed already
        self.table[slot * self.fields + self.rr.ROLE] = self.rr.FREE
        self.table[slot * self.fields + self.rr.HELD] = 0
        del self.members[slot]
        self.flows[slot] = None
        self.free.append(slot)
        flow.rr_slot = -1
        if not self.members:
            self.loop.waiter = None
            if HOLDS_DIR:
                self._dump_holds()

    def _dump_holds(self) -> None:
        """The hold counts so far to NETESTO_RR_HOLDS (a bench's reading), then from 0 again."""
        width, counts, places = self.rr.holds(True)
        self.dumps += 1
        path = os.path.join(HOLDS_DIR, f"holds-{os.getpid()}-{self.dumps}.json")
        try:
            with open(path, "w") as fh:
                json.dump({"width_ns": width, "counts": counts, "places": places}, fh)
        except OSError:
            pass  # (a bench's reading: never the flows' failure)

    def _sync(self, slot: int, flow: Member) -> None:
        """The table's counters and the slot's latencies into the flow end."""
        rr, t = self.rr, self.table
        base = slot * self.fields
        flow.got, flow.rx, flow.tx, flow.trans = t[base + rr.GOT], t[base + rr.RX], t[base + rr.TX], t[base + rr.TRANS]
        flow.t0 = t[base + rr.T0]  # (a hot row may have taken the latencies: NLAT 0, T0 new)
        n = t[base + rr.NLAT]
        if n:
            at = slot * LAT_SLOT * 8
            lat = flow.lat_raw
            lat.frombytes(self.latview[at:at + n * 8])
            t[base + rr.NLAT] = 0
            if len(lat) >= LAT_FOLD:
                flow.fold_latency()

    def _finish_rows(self) -> None:
        """What the C loop's hot rows left to Python (blocks to write, rows to build, failures), then
        those members' slots take hot rows again."""
        out, self.out = self.out, []
        for flow, code, what in out:
            if flow.rr_slot >= 0:
                self.table[flow.rr_slot * self.fields + self.rr.HELD] = 0
            self.sampler.hot_rest(flow, code, what)

    def wait(self, deadline: float) -> None:
        """The loop's wait: serve the members until ``deadline`` (monotonic), one of the loop's sockets is
        ready, a latency buffer is full or a member needs Python (it leaves, its flow end takes over)."""
        rr = self.rr
        self.returns += 1
        touched, members = self.touched, self.members
        sampler, out = self.sampler, self.out
        try:
            if sampler is None:
                why = rr.wait(self.epfd, deadline, self.table, self.lat, LAT_SLOT, touched)
            else:
                why = rr.wait(self.epfd, deadline, self.table, self.lat, LAT_SLOT, touched, self.flows, sampler.acc, out,
                              self.sweep if self.sweep_interval else None, self.park_max, QUIET_NS, self.pend_max)
        finally:  # the counters and latencies of the members served, into them
            t, fields, dirty = self.table, self.fields, rr.DIRTY
            for i in range(1, touched[0] + 1):
                slot = touched[i]
                t[slot * fields + dirty] = 0
                flow = members.get(slot)
                if flow is not None:
                    self._sync(slot, flow)
            touched[0] = 0
            if out:
                self._finish_rows()
        if why != rr.FLOW:
            return
        t, fields = self.table, self.fields
        for slot, flow in list(self.members.items()):
            base = slot * fields
            status = t[base + rr.STATUS]
            if status != rr.RUN:
                self.handoffs += 1
                errno, left = t[base + rr.ERRNO], t[base + rr.LEFT]
                self.leave(flow)
                try:
                    flow.rr_left(status, errno, left)
                except Exception as exc:
                    self.loop.handler_error(flow.rr_left, exc)


def take_back(flow: Member, rr: Any, status: int, errno: int, at_eof: Callable[[], None],
              rest: Callable[[], None]) -> None:
    """What a flow end handed back (its ``rr_left``) does: at EOF ``at_eof``, at an error fail, after a
    partial send ``rest`` (it keeps what is left and waits for EPOLLOUT on the loop, as its handler does)."""
    if status == rr.EOF:
        at_eof()
    elif status == rr.ERROR:
        flow.fail_running(OSError(errno, os.strerror(errno)))
    else:
        rest()


def group_of(loop: Loop, rr: Any) -> RRGroup:
    """The loop's group (made at the first join)."""
    group = loop.rr_group
    if group is None:
        group = loop.rr_group = RRGroup(loop, rr)
    assert isinstance(group, RRGroup)
    return group


__all__ = ["LAT_SLOT", "Member", "RRGroup", "group_of", "take_back"]
