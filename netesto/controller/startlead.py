"""How long before a DO_CLIENT batch's common instant its start instructions go out: the start lead.

By the instant every client host must have started its flow-engine process and had its
flows connect and handshake (be *ready*), or they start late. A fixed lead of 1 s, plus
0.2 s per further client host, covers a loaded machine's slow start-up with room to
spare, and every batch paid it: a 2 s sweep point spent 1.2 s of its ~4 s waiting for
it. The engine's ``started`` event says when a flow was ready (``ready``, the agent's
clock), so this process learns, per agent, how long its flows took to be ready after
their batch was scheduled. A batch whose client hosts have all been seen then leads by
:data:`SAFETY` times the slowest of their last :data:`KEPT` readiness times, never less
than :data:`FLOOR` nor more than the fixed lead; a host not seen yet gets the fixed
lead. A flow that was not ready in time (a sudden load) is learned too, and lengthens
the next leads. Only flows that start at the batch's instant teach (a ``delay=`` flow
connects when it likes).

A lead given to the Runner (``netesto.run(..., lead=0.5)``) is used as given.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Iterable

FIXED = 1.0  # s: the lead for a batch with a host not seen yet ...
FIXED_PER_HOST = 0.2  # ... and per further client host (each agent starts an engine process in turn)
SAFETY = 3.0  # a learned lead is this many times the slowest readiness seen ...
FLOOR = 0.3  # ... never shorter than this (s)
KEPT = 8  # readiness times kept per agent

_READY: dict[str, deque[float]] = {}
_LOCK = threading.Lock()  # started events arrive on the agents' client threads


def learn(agent: str, seconds: float) -> None:
    """``agent``'s flows were ready ``seconds`` after their batch was scheduled."""
    if not math.isfinite(seconds):
        return
    with _LOCK:
        _READY.setdefault(agent, deque(maxlen=KEPT)).append(max(0.0, seconds))


def lead(agents: Iterable[str], fixed: float = FIXED, per_host: float = FIXED_PER_HOST) -> float:
    """The lead for a batch with flows on ``agents``: learned when every one has been seen, else fixed.

    >>> forget(); lead(["a:1", "b:1"])
    1.2
    >>> learn("a:1", 0.05); learn("b:1", 0.15); round(lead(["a:1", "b:1"]), 3)
    0.45
    >>> learn("a:1", 0.01); round(lead(["a:1"]), 3), lead(["a:1", "c:1"])
    (0.3, 1.2)
    """
    hosts = list(dict.fromkeys(agents))
    ceiling = fixed + per_host * max(0, len(hosts) - 1)
    with _LOCK:
        seen = [max(_READY[h]) for h in hosts if _READY.get(h)]
    if not hosts or len(seen) < len(hosts):
        return ceiling
    return min(ceiling, max(FLOOR, SAFETY * max(seen)))


def known() -> bool:
    """This process has learned some agent's readiness (a notebook's later cells, a sweep's later points)."""
    with _LOCK:
        return any(_READY.values())


def forget() -> None:
    """Forget every readiness learned (the next batches lead by the fixed lead)."""
    with _LOCK:
        _READY.clear()


__all__ = ["FIXED", "FIXED_PER_HOST", "FLOOR", "KEPT", "SAFETY", "forget", "known", "lead", "learn"]
