"""Names the agents can check before any flow starts: a flow's congestion control and tool on both of its hosts.

A flow whose algorithm its host does not have used to fail at its start, after the
experiment's earlier flows, snapshots and reshapes had run (a sweep point took 10-20 s
to say ``nosuchcc``). Each agent says at ``hello`` which algorithms its sockets can be
set to (the kernel's available ones and those built as modules); a run checks every
DO_CLIENT it knows of against both of its hosts before anything of it starts, and
names the script line, the host, what it has and the closest name. An agent that says
nothing (an older one) is not checked: its flow's own start says it.
"""

from __future__ import annotations

from typing import Iterable

from netesto.controller.context import RunContext
from netesto.errors import UsageError
from netesto.script.actions import Action, DoClient
from netesto.script.parser import suggest
from netesto.vocab import RR_TESTS, STREAM_TESTS

# UDP flows have no congestion control: their ca= is never set on a socket
_TCP = frozenset(t for t in STREAM_TESTS | RR_TESTS if t.startswith("TCP_"))


# the tool each end of a flow of a driver runs, as the agents' hello names them (netserver comes with netperf)
_TOOLS = {"iperf3": ("iperf3", "iperf3"), "netperf": ("netperf", "netperf")}


def check_names(r: RunContext, actions: Iterable[Action]) -> None:
    """UsageError at the first DO_CLIENT of ``actions`` whose ``ca`` or driver's tool one of its two hosts lacks."""
    for a in actions:
        if not isinstance(a, DoClient):
            continue
        _check_driver(r, a)
        if a.ca and a.test in _TCP:
            _check_ca(r, a)


def _check_ca(r: RunContext, a: DoClient) -> None:
    for name in (a.host, a.server):
        host = r.lab.resolve(name).name
        have = r.remote(host, lambda h: list(h.info.congestion))
        if not have or a.ca in have:  # unreachable (dropped, said), or an agent that does not say
            continue
        hint = suggest(a.ca, have)
        raise UsageError(f"{a.loc.origin()}: DO_CLIENT ca={a.ca}: {host} has no congestion control {a.ca!r}; "
                         f"it has {', '.join(have)}" + (f" ({hint})" if hint else ""))


def _check_driver(r: RunContext, a: DoClient) -> None:
    for name, tool in zip((a.host, a.server), _TOOLS.get(a.driver, ())):
        host = r.lab.resolve(name).name
        have = r.remote(host, lambda h: dict(h.info.tools))
        if not have or tool in have:  # unreachable (dropped, said), or an agent that does not say
            continue
        raise UsageError(f"{a.loc.origin()}: DO_CLIENT driver={a.driver}: {host} has no {tool} on its agent's "
                         f"PATH; install it there or use driver=builtin")


__all__ = ["check_names"]
