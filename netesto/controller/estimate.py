"""How long a run takes: the plan's own time (WAITs, flows) plus what running it costs.

:func:`netesto.script.estimate_seconds` counts what the script asks for. A run
also spends time the script does not say: each DO_CLIENT batch starts its flows
``lead`` (1 s) + 0.2 s per client host after it is reached (so every host starts
them at one instant), every host is connected and snapshotted, data is fetched,
and each PROCESS_EXP writes ``exp.nc`` and ``exp.html`` (a fixed cost and a cost
per flow-second of samples). The constants are measured on the namespace testbed
(docs/running.md, "How long a run takes"); :func:`run_seconds` walks the actions
with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from netesto.script.actions import Action, DoClient, DoServer, GetData, ProcessExp, RandWait, Wait


@dataclass(frozen=True)
class Costs:
    """Seconds a run spends beyond the script's own time (defaults: measured, see the module)."""

    start: float = 0.3  # the run's start: the lab read, the workdir made
    host: float = 0.15  # a host's first use: connect, hello, clocks
    server: float = 0.1  # DO_SERVER order=0: snapshot, test server
    lead: float = 1.0  # a DO_CLIENT batch: flows start this long after it ...
    lead_per_host: float = 0.2  # ... and this per further client host
    client: float = 0.05  # a DO_CLIENT's own requests
    fetch: float = 0.2  # GET_DATA of one host
    process: float = 2.5  # PROCESS_EXP: exp.nc and exp.html of an experiment ...
    per_flow_second: float = 0.02  # ... and per second of each flow's samples
    imports: float = 5.0  # the first PROCESS_EXP of a process: xarray, netCDF4, holoviews, bokeh imported
    end: float = 0.2  # the run's end: restore, close


DEFAULT = Costs()


def warm() -> bool:
    """This process has imported what processing needs (a notebook's second run, a sweep's kept kernel)."""
    import sys

    return all(m in sys.modules for m in ("xarray", "netCDF4", "holoviews.plotting.bokeh"))


def run_seconds(actions: Iterable[Action], costs: Costs = DEFAULT, *, imported: bool = False) -> float:
    """Wall seconds a run of ``actions`` takes, processing included (see the module); ``imported``: in a
    process that has the processing's modules already (:func:`warm`), else the first PROCESS_EXP imports them."""
    t = costs.start
    cold = not imported
    seen: set[str] = set()
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
        start = t + costs.lead + costs.lead_per_host * (len(clients) - 1)
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


__all__ = ["Costs", "DEFAULT", "run_seconds", "warm"]
