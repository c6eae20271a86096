"""Which server worker takes a new flow: live-flow counts the worker processes share.

With SO_REUSEPORT the kernel hashes each connection to a worker, so two flows
land in the same process about half the time and the other core stays idle.
A :class:`LoadBoard` lives in an anonymous shared mapping made before the
workers fork; the worker that accepted a hello hands the connection to the
least-loaded worker (see ``ServerWorker.route_hello``).

Every slot has exactly one writer, so no lock is needed and a stale read costs
at most one unbalanced flow:

- ``live[i]``: flows worker ``i`` runs now (written by ``i``);
- ``handed[i][j]``: hellos ``i`` has handed to ``j`` so far, ``handed[i][i]`` those
  it kept (written by ``i``);
- ``received[j]``: hellos handed to ``j`` (by itself too) whose flow ``j`` has set up
  or refused so far (written by ``j``), so a flow being set up counts as on its way;
- ``crr[i]``: TCP_CRR flows among ``live[i]`` (written by ``i``).

The same mapping holds the CRR table: :data:`CRR_SLOTS` entries per worker
(written by that worker) of ``session, req, reply, close first`` and the
counters ``rx, tx, trans, conns`` that any worker adds to (atomically, in C)
when it serves a join of that session itself, instead of handing it over.

The load of ``j`` is ``live[j]`` plus the hellos on their way to it:
``sum_i handed[i][j] - received[j]``.

TCP_CRR flows get workers of their own when there are enough: a CRR
flow's every transaction is a new connection the worker must accept
between the other flows' turns, so a bulk receiver beside it would set its
pace. A CRR flow goes where the fewest other flows run; to any other flow a
CRR flow weighs :data:`CRR_WEIGHT` flows, so the others keep off its worker
until theirs are that much busier.
"""

from __future__ import annotations

import mmap
import sys
from typing import Sequence

CRR_WEIGHT = 3  # what a TCP_CRR flow weighs in a worker when another flow is placed
CRR_SLOTS = 16  # CRR flows per worker whose joins any worker serves in C (more: handed to their owner)
CRR_ENTRY = 8  # int64 per CRR table entry: session, req, reply, close first, rx, tx, trans, conns


class LoadBoard:
    """Flow counts of ``workers`` server processes in shared memory (create before fork)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._crr_base = workers * workers + 3 * workers
        size = self._crr_base + workers * CRR_SLOTS * CRR_ENTRY
        self._map = mmap.mmap(-1, 8 * size)  # MAP_SHARED | MAP_ANONYMOUS
        self._slots = memoryview(self._map).cast("Q")
        self.table = memoryview(self._map)[8 * self._crr_base:]  # the CRR table, for _crrloop

    def _live(self, i: int) -> int:
        return i

    def _handed(self, i: int, j: int) -> int:
        return self.workers + i * self.workers + j

    def _received(self, j: int) -> int:
        return self.workers + self.workers * self.workers + j

    def _crr(self, i: int) -> int:
        return self.workers * (self.workers + 2) + i

    def set_live(self, i: int, flows: int, crr: int = 0) -> None:
        """Worker ``i`` runs ``flows`` flows, ``crr`` of them TCP_CRR."""
        self._slots[self._live(i)] = flows
        self._slots[self._crr(i)] = crr

    def publish(self, i: int, session: bytes, req: int, reply: int, close_first: bool) -> int:
        """Worker ``i`` lets every worker serve the joins of ``session``: its entry's index, or -1 (full)."""
        slots = self._slots
        for k in range(i * CRR_SLOTS, (i + 1) * CRR_SLOTS):
            at = self._crr_base + k * CRR_ENTRY
            if slots[at] == 0:
                slots[at + 1], slots[at + 2], slots[at + 3] = req, reply, int(close_first)
                slots[at + 4] = slots[at + 5] = slots[at + 6] = slots[at + 7] = 0
                slots[at] = int.from_bytes(session, sys.byteorder)  # last: readers match it
                return k
        return -1

    def unpublish(self, k: int) -> None:
        self._slots[self._crr_base + k * CRR_ENTRY] = 0

    def hand(self, i: int, j: int, count: int = 1) -> None:
        """Worker ``i`` hands ``count`` hellos to worker ``j`` (-1: a hand-off that failed)."""
        self._slots[self._handed(i, j)] += count

    def receive(self, j: int) -> None:
        """Worker ``j`` took in one hello handed to it."""
        self._slots[self._received(j)] += 1

    def load(self, j: int) -> int:
        slots = self._slots
        coming = sum(slots[self._handed(i, j)] for i in range(self.workers)) - slots[self._received(j)]
        return slots[self._live(j)] + max(0, coming)

    def choose(self, me: int, crr: bool = False) -> int:
        """The worker for a new flow: the least loaded, ``me`` when it is among them; a CRR flow
        the one with the fewest other flows; to any other flow a CRR flow weighs :data:`CRR_WEIGHT`."""
        slots = self._slots
        crrs = [slots[self._crr(j)] for j in range(self.workers)]
        loads = [self.load(j) for j in range(self.workers)]
        if crr:
            keys = [(load - n, n) for load, n in zip(loads, crrs)]
        else:
            keys = [(load + (CRR_WEIGHT - 1) * n, 0) for load, n in zip(loads, crrs)]
        least = min(keys)
        return me if keys[me] == least else keys.index(least)


def deal(tests: Sequence[str], workers: int) -> list[list[int]]:
    """The client's twin of :meth:`LoadBoard.choose`, decided up front: which of the flows (their
    test types, in order) each of ``workers`` workers runs. TCP_CRR flows are dealt first, one
    per worker in turn; every other flow then goes to the lightest worker, where a CRR flow
    weighs :data:`CRR_WEIGHT` flows and, on a tie, a worker with no CRR flow is preferred: a CRR
    flow alone in its worker runs its transactions in C (``_crrloop``).

    >>> deal(["TCP_STREAM", "TCP_CRR", "TCP_STREAM", "TCP_STREAM"], 2)
    [[1], [0, 2, 3]]
    >>> deal(["TCP_RR"] * 5, 2)
    [[0, 2, 4], [1, 3]]
    """
    mine: list[list[int]] = [[] for _ in range(workers)]
    crr = [0] * workers
    for n, k in enumerate(i for i, test in enumerate(tests) if test == "TCP_CRR"):
        mine[n % workers].append(k)
        crr[n % workers] += 1
    for k, test in enumerate(tests):
        if test != "TCP_CRR":
            w = min(range(workers), key=lambda j: (len(mine[j]) + (CRR_WEIGHT - 1) * crr[j], crr[j] > 0, j))
            mine[w].append(k)
    return [sorted(ks) for ks in mine]


__all__ = ["CRR_ENTRY", "CRR_SLOTS", "CRR_WEIGHT", "LoadBoard", "deal"]
