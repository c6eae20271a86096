"""A flow's draws: request sizes, reply sizes and gaps, each from its own seeded stream, reproducible anywhere.

Each quantity of a flow draws from its own generator, Python's Mersenne Twister
(MT19937, whose sequence :mod:`random` guarantees for a given seed across versions
and machines: only ``Random.random()`` is used, never its other methods, whose
algorithms may change), seeded with the text ``"netesto/<seed>/<stream>/<quantity>"``
(``quantity`` is ``req``, ``reply`` or ``gap``; ``stream`` is the flow's instance in
its DO_CLIENT). Draw ``i`` of a quantity is its distribution's
:meth:`~netesto.workload.dists.Distribution.value` of the generator's ``i``-th
``random()``. Separate streams keep a quantity's sequence the same when another
quantity's distribution changes (a different gap leaves the sizes as they were).
A constant draws no random number.

Transaction ``i`` of a flow uses draw ``i`` of each quantity: ``gap[i]`` is the wait
before its request (closed loop: after reply ``i - 1``, or the flow's start; open
loop: after arrival ``i - 1``), then a request of ``req[i]`` bytes asks for
``reply[i]`` bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from netesto.workload.dists import SIZE, TIME, Distribution, parse

QUANTITIES = ("req", "reply", "gap")


def generator(seed: int, stream: int, quantity: str) -> random.Random:
    """The generator of one quantity of one flow (see the module doc)."""
    return random.Random(f"netesto/{seed}/{stream}/{quantity}")


def _drawer(dist: Distribution | None, fixed: float, rng: random.Random) -> Callable[[], float]:
    if dist is None:
        return lambda: fixed
    if dist.constant:
        once = dist.value(0.0)
        return lambda: once
    draw, value = rng.random, dist.value
    return lambda: value(draw())


@dataclass(frozen=True)
class Workload:
    """What a flow draws from: the three distributions (None: the constant ``req``/``reply``, no gap), its seed
    and stream."""

    req: Distribution | None = None
    reply: Distribution | None = None
    gap: Distribution | None = None
    seed: int = 0
    stream: int = 0

    @classmethod
    def of(cls, req: str, reply: str, gap: str, seed: int, stream: int) -> "Workload":
        """From the canonical texts a flow spec carries ('' = none)."""
        return cls(parse(req, SIZE) if req else None, parse(reply, SIZE) if reply else None,
                   parse(gap, TIME) if gap else None, seed, stream)

    def draws(self, req: int = 1, reply: int = 1) -> "Draws":
        """A fresh sequence of draws (``req``/``reply``: the sizes where there is no distribution)."""
        return Draws(self, req, reply)


class Draws:
    """The draws of one flow, in order: ``next()`` gives transaction ``i``'s ``(req, reply, gap)``."""

    def __init__(self, workload: Workload, req: int, reply: int) -> None:
        w = workload
        self.count = 0
        self._req = _drawer(w.req, max(1, req), generator(w.seed, w.stream, "req"))
        self._reply = _drawer(w.reply, max(1, reply), generator(w.seed, w.stream, "reply"))
        self._gap = _drawer(w.gap, 0.0, generator(w.seed, w.stream, "gap"))

    def next(self) -> tuple[int, int, float]:
        self.count += 1
        return int(self._req()), int(self._reply()), self._gap()

    def take(self, n: int) -> list[tuple[int, int, float]]:
        """The next ``n`` transactions' draws."""
        return [self.next() for _ in range(n)]


def poisson_gap(mean_bytes: float, load: float, link_bps: int, instances: int = 1) -> str:
    """The canonical text of the exponential gaps between arrivals (a Poisson process) that puts ``load``
    of a ``link_bps`` link in use with transactions of ``mean_bytes`` on the busier direction, the load
    shared by ``instances`` flows.

    >>> poisson_gap(12500, 0.5, 10_000_000)   # 50 transactions/s of 12.5 kB on 10 Mbit/s
    'exp(mean=20ms)'
    """
    if not (mean_bytes > 0 and 0 < load <= 1 and link_bps > 0 and instances >= 1):
        raise ValueError(f"no arrival rate from mean {mean_bytes} bytes, load {load}, link {link_bps} bit/s")
    per_second = load * link_bps / 8.0 / mean_bytes / instances
    return parse(f"exp(mean={1000.0 / per_second:.9f}ms)", TIME).text


def seed_of(run_seed: int, exp: int, group: int) -> int:
    """A DO_CLIENT's seed when it gives none: from the run's seed (experiment.json's), its experiment and group.

    >>> seed_of(7, 1, 2) == seed_of(7, 1, 2) != seed_of(7, 1, 3)
    True
    """
    return random.Random(f"netesto/run/{run_seed}/{exp}/{group}").getrandbits(62)


__all__ = ["Draws", "QUANTITIES", "Workload", "generator", "poisson_gap", "seed_of"]
