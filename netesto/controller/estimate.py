"""How long a run takes: the plan's own time (WAITs, flows) plus what running it costs.

:func:`netesto.script.estimate_seconds` counts what the script asks for. A run
also spends time the script does not say: each DO_CLIENT batch starts its flows
``lead`` (1 s) + 0.2 s per client host after it is reached (so every host starts
them at one instant), 0.3 s once the hosts' readiness is learned (the run's later
batches, a process's later runs: :mod:`netesto.controller.startlead`), every host
is connected and snapshotted, data is fetched, and each PROCESS_EXP writes
``exp.nc`` and ``exp.html`` (a fixed cost and a cost per flow-second of samples).
The constants are measured on the namespace testbed
of a quiet 2-vCPU machine (``python -m bench.bench_estimate``; docs/running.md, "How
long a run takes"); :func:`run_seconds` walks the actions with them.

On a loaded machine (or a slower one) the costs are larger than measured: processing
took 2-4x its quiet time at load 7-9. Each run of a
process (a notebook's kernel, a sweep's kept kernel) therefore tells :func:`learn` what
its costs really came to, and :func:`learned` scales the next estimates' costs (never
the script's own time) by the median of the last runs' ratios.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from netesto.script.actions import Action, DoClient, DoServer, GetData, ProcessExp, RandWait, Wait


@dataclass(frozen=True)
class Costs:
    """Seconds a run spends beyond the script's own time (defaults: measured, see the module)."""

    start: float = 0.05  # the run's start: the lab read, the workdir made
    host: float = 0.05  # a host's first use: connect, hello, clocks
    server: float = 0.05  # DO_SERVER order=0: snapshot, test server
    lead: float = 1.0  # a DO_CLIENT batch: flows start this long after it ...
    lead_per_host: float = 0.2  # ... and this per further client host, until their readiness is learned:
    lead_learned: float = 0.3  # ... then this (controller/startlead.py: its floor, where engines start ahead)
    client: float = 0.05  # a DO_CLIENT's own requests
    fetch: float = 0.05  # GET_DATA of one host
    process: float = 0.7  # PROCESS_EXP: exp.nc and exp.html of an experiment ...
    per_flow_second: float = 0.03  # ... and per second of each flow's samples
    imports: float = 2.2  # the first PROCESS_EXP of a process: xarray, netCDF4, holoviews, bokeh imported
    end: float = 0.05  # the run's end: restore, close


DEFAULT = Costs()


def warm() -> bool:
    """This process has imported what processing needs (a notebook's second run, a sweep's kept kernel)."""
    import sys

    return all(m in sys.modules for m in ("xarray", "netCDF4", "holoviews.plotting.bokeh"))


def run_seconds(actions: Iterable[Action], costs: Costs = DEFAULT, *, imported: bool = False,
                seasoned: bool = False) -> float:
    """Wall seconds a run of ``actions`` takes, processing included (see the module); ``imported``: in a
    process that has the processing's modules already (:func:`warm`), else the first PROCESS_EXP imports them;
    ``seasoned``: in a process that has learned its hosts' start leads (``startlead.known()``), else a
    batch leads by the learned lead only once its client hosts have had one."""
    t = costs.start
    cold = not imported
    seen: set[str] = set()
    led: set[str] = set()  # client hosts that had a batch: their leads are learned from then on
    ends: dict[tuple[int, str], float] = {}  # (exp, host) -> end of its last flow
    exp_ends: dict[int, float] = {}
    flow_seconds: dict[int, float] = {}
    batch: list[DoClient] = []
    last = 0.0

    def use(host: str) -> float:
        if host and host not in seen:
            seen.add(host)
            return costs.host
        return 0.0

    def flush(t: float) -> float:
        nonlocal last
        if not batch:
            return t
        for a in batch:
            t += use(a.host) + use(a.server) + costs.client
        clients = {a.host for a in batch}
        if seasoned or clients <= led:
            start = t + costs.lead_learned
        else:
            start = t + costs.lead + costs.lead_per_host * (len(clients) - 1)
        led.update(clients)
        for a in batch:
            end = start + a.delay + a.dur
            for host in (a.host, a.server):
                ends[(a.exp, host)] = max(ends.get((a.exp, host), 0.0), end)
            exp_ends[a.exp] = max(exp_ends.get(a.exp, 0.0), end)
            flow_seconds[a.exp] = flow_seconds.get(a.exp, 0.0) + a.dur * a.instances
            last = max(last, end)
        batch.clear()
        return t

    for a in actions:
        if isinstance(a, DoClient):
            batch.append(a)
            continue
        if batch and isinstance(a, (Wait, RandWait)) and max(getattr(a, "seconds", 0.0), getattr(a, "low", 0.0),
                                                              getattr(a, "high", 0.0)) <= 0:
            continue  # the runner's batches: a zero pause separates nothing
        t = flush(t)
        if isinstance(a, Wait):
            t += a.seconds
        elif isinstance(a, RandWait):
            t += (a.low + a.high) / 2
        elif isinstance(a, GetData) or (isinstance(a, DoServer) and a.order >= 1):
            t = max(t + use(a.host), ends.get((a.exp, a.host), 0.0)) + (costs.fetch if isinstance(a, GetData) else 0)
        elif isinstance(a, DoServer):
            t += use(a.host) + costs.server
        elif isinstance(a, ProcessExp):
            t = max(t, exp_ends.get(a.exp, 0.0)) + costs.process + costs.per_flow_second * flow_seconds.get(a.exp, 0)
            t, cold = t + (costs.imports if cold else 0.0), False
    t = flush(t)
    return max(t, last) + costs.end


# (modelled, measured) costs in seconds of this process's last runs that ended as planned
_HISTORY: deque[tuple[float, float]] = deque(maxlen=8)
LEARNED_RANGE = (0.5, 4.0)  # a ratio outside it says more about an odd run than about the machine


def learn(script: float, modelled: float, elapsed: float) -> None:
    """A run whose script takes ``script`` s was estimated at ``modelled`` s and took ``elapsed``:
    remember how its costs (all but the script's own time) compared."""
    cost, seen = modelled - script, elapsed - script
    if cost > 0.5 and seen > 0:
        _HISTORY.append((cost, seen))


def learned() -> float:
    """What this process's runs' costs came to against the model: the median ratio of the last runs,
    within :data:`LEARNED_RANGE` (1.0 before any).

    >>> forget(); learn(10.0, 14.0, 20.0); learn(10.0, 14.0, 18.0); learn(10.0, 14.0, 16.0); learned()
    2.0
    >>> forget(); learned()
    1.0
    """
    if not _HISTORY:
        return 1.0
    ratio = statistics.median(seen / cost for cost, seen in _HISTORY)
    return min(max(ratio, LEARNED_RANGE[0]), LEARNED_RANGE[1])


def forget() -> None:
    """Forget what earlier runs of this process taught (:func:`learn`)."""
    _HISTORY.clear()


__all__ = ["Costs", "DEFAULT", "LEARNED_RANGE", "forget", "learn", "learned", "run_seconds", "warm"]
