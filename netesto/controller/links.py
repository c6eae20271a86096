"""SET_LINK in a run: schedules wait for the next DO_CLIENT batch, start in the router agent's clock with its flows.

A SET_LINK action only notes what it asks (:func:`add`). When the next
batch of DO_CLIENTs gets its common start instant, :func:`start` sends each
link's steps to the agent that shapes it (the lab's ``shape`` of the host:
a testbed's router), with the instant in that agent's clock, as flow
starts are sent, and the end of the batch's last flow (plus
:data:`END_MARGIN`); the agent applies each step at its instant and puts
the link back at the end. The router then belongs to the experiment: its
record of what it applied (``links/<dev>.json``, :mod:`netesto.agent.links`)
is fetched with the experiment's data, after :func:`settle` has waited for
the schedule's end and ended it. A run that stops early stops the schedules
with its flows (``stop``), and restores the router as every changed host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netesto.controller.progress import Notice
from netesto.errors import AgentError, LabError
from netesto.linktrace import parse_trace
from netesto.script.actions import DoClient, SetLink
from netesto.vocab import parse_size

if TYPE_CHECKING:
    from netesto.controller.context import RunContext
    from netesto.controller.lab import Lab
    from netesto.controller.records import ExpState
    from netesto.controller.session import HostSession

END_MARGIN = 0.5  # s after the last flow's end: its last packets drain through the link as it was
SETTLE_MAX = 60.0  # s a fetch waits at most for a schedule still running


@dataclass
class RunLinks:
    """A run's link schedules: those waiting for flows, and those running (by agent and experiment)."""

    pending: list[SetLink] = field(default_factory=list)
    running: dict[tuple[str, int], float] = field(default_factory=dict)  # -> end, controller time


def check(lab: "Lab", a: SetLink) -> None:
    """LabError unless an agent of ``lab`` shapes the link toward ``a.host``."""
    lh = lab.resolve(a.host)
    if lh.shape is None:
        raise LabError(f"SET_LINK host={a.host}: the lab gives {lh.name} no shaped link (no router agent "
                       "shapes the traffic toward it): link schedules need a testbed, or a lab file whose host has "
                       "shape = { agent = ..., dev = ... }")


def add(r: "RunContext", a: SetLink) -> None:
    """A SET_LINK: checked against the lab now, sent with the next flows."""
    try:
        check(r.lab, a)
    except LabError as exc:
        raise LabError(f"{a.loc}: {exc.message}") from exc
    r.links.pending.append(a)


def _trace(a: SetLink, default_buffer: int) -> dict[str, Any]:
    """The trace as the agent takes it: its text (read again now: the file the plan checked) and queue."""
    try:
        text = Path(a.trace_file).read_text(encoding="ascii")
        parse_trace(text, a.trace_file)  # the file the plan checked may have changed since
    except (OSError, ValueError) as exc:
        raise LabError(f"{a.loc}: SET_LINK trace {a.trace}: {exc}") from None
    packets = int(a.buffer[:-3]) if a.buffer.endswith("pkt") else 0
    size = parse_size(a.buffer) if a.buffer and not packets else (0 if packets else default_buffer)
    return {"name": a.trace, "text": text, "limit_bytes": size, "limit_packets": packets}


def start(r: "RunContext", batch: list[DoClient], t_common: float | None) -> None:
    """Send the waiting schedules, their time 0 the batch's start ``t_common`` (None: the batch starts no
    flow, the schedules are dropped with a notice)."""
    pending, r.links.pending = r.links.pending, []
    if not pending:
        return
    if t_common is None:
        r.emit(Notice(host="", text=f"{pending[0].loc}: SET_LINK not applied: its flows did not start"))
        return
    e = r.experiment(batch[0])
    until = t_common + max(a.delay + a.dur for a in batch) + END_MARGIN
    links: dict[tuple[str, str], list[SetLink]] = {}
    for a in pending:
        shape = r.lab.resolve(a.host).shape
        assert shape is not None  # add() checked
        links.setdefault((shape.agent, shape.dev), []).append(a)
    buffer = int(r.testbed.get("buffer", 0) or 0)
    for (agent, dev), actions in links.items():
        steps = sorted((s for a in actions for s in a.steps()), key=lambda s: s.at)
        trace = next((_trace(a, buffer) for a in actions if a.trace), None)

        def send(h: "HostSession") -> Any:
            if "link_schedule" not in h.info.commands:
                raise AgentError("this agent does not take link schedules (an older netesto-agent)",
                                 host=h.lab.name, kind="Unavailable")
            h.changed = True  # even a refused schedule may have left something to put back
            r.sessions.clock(h)
            return h.client.link_schedule(e.exp, dev, t_common + h.offset, until + h.offset,
                                          [(s.at, s.param, s.value) for s in steps], trace, h.lab.short)

        if r.remote(agent, send) is not None:
            name = r.lab.resolve(agent).name
            e.touch(name)
            r.links.running[(name, e.exp)] = until


def settle(r: "RunContext", host: str, e: "ExpState") -> None:
    """Before ``host``'s data of ``e`` is fetched: its link schedules run to their end, then end."""
    until = r.links.running.pop((host, e.exp), None)
    if until is None:
        return
    wait = until - time.time()
    if wait > 0:
        r.sleep(min(wait, SETTLE_MAX))
    r.remote(host, lambda h: h.client.link_stop(e.exp))


__all__ = ["END_MARGIN", "RunLinks", "add", "check", "settle", "start"]
