"""Which server worker takes a new flow: live-flow counts the worker processes share.

With SO_REUSEPORT the kernel hashes each connection to a worker, so two flows
land in the same process about half the time and the other core stays idle.
A :class:`LoadBoard` lives in an anonymous shared mapping made before the
workers fork; the worker that accepted a hello hands the connection to the
least-loaded worker (see ``ServerWorker.route_hello``).

Every slot has exactly one writer, so no lock is needed and a stale read costs
at most one unbalanced flow:

- ``live[i]``: flows worker ``i`` runs now (written by ``i``);
- ``handed[i][j]``: hellos ``i`` has handed to ``j`` so far (written by ``i``);
- ``received[j]``: hellos ``j`` has received from the others so far (written by ``j``);
- ``crr[i]``: TCP_CRR flows among ``live[i]`` (written by ``i``).

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

CRR_WEIGHT = 3  # what a TCP_CRR flow weighs in a worker when another flow is placed


class LoadBoard:
    """Flow counts of ``workers`` server processes in shared memory (create before fork)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._map = mmap.mmap(-1, 8 * (workers * workers + 3 * workers))  # MAP_SHARED | MAP_ANONYMOUS
        self._slots = memoryview(self._map).cast("Q")

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


__all__ = ["CRR_WEIGHT", "LoadBoard"]
