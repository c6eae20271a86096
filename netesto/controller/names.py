"""Names the agents can check before any flow starts: a flow's congestion control and tool on both of its
hosts, a qdisc's kind and every network device a command names on the host it acts on.

A flow whose algorithm its host does not have used to fail at its start, after the
experiment's earlier flows, snapshots and reshapes had run (a sweep point took 10-20 s
to say ``nosuchcc``). Each agent says at ``hello`` which algorithms its sockets can be
set to (the kernel's available ones and those built as modules); a run checks every
DO_CLIENT it knows of against both of its hosts before anything of it starts, and
names the script line, the host, what it has and the closest name. The same holds for
SET_QDISC's qdisc (the kernel's build configuration says which it has: on a kernel
without fq_codel the command used to fail mid-run, after the flows before it) and for
the devices the lab file names (``dev``, ``shape``) where SET_QDISC, SET_NETEM, SET_LINK
and DO_TCPDUMP act. An agent that says nothing (an older one) is not checked: its own
command says it.
"""

from __future__ import annotations

from typing import Iterable

from netesto.controller.context import RunContext
from netesto.errors import UsageError
from netesto.script.actions import Action, DoClient, DoTcpdump, SetLink, SetNetem, SetQdisc
from netesto.script.parser import suggest
from netesto.vocab import RR_TESTS, STREAM_TESTS

# UDP flows have no congestion control: their ca= is never set on a socket
_TCP = frozenset(t for t in STREAM_TESTS | RR_TESTS if t.startswith("TCP_"))


# the tool each end of a flow of a driver runs, as the agents' hello names them (netserver comes with netperf)
_TOOLS = {"iperf3": ("iperf3", "iperf3"), "netperf": ("netperf", "netperf")}


def check_names(r: RunContext, actions: Iterable[Action]) -> None:
    """UsageError at the first action of ``actions`` that names what its host lacks: a DO_CLIENT's
    ``ca`` or driver's tool on one of its two hosts, a SET_QDISC's qdisc, a device of the lab file."""
    for a in actions:
        if isinstance(a, (SetQdisc, SetNetem, SetLink)):
            agent, dev = shape_target(r, a.host)
            if isinstance(a, SetQdisc):
                _check_qdisc(r, a, agent)
            _check_dev(r, a, agent, dev)
        elif isinstance(a, DoTcpdump):
            _check_dev(r, a, a.host, r.lab.resolve(a.host).dev)
        elif isinstance(a, DoClient):
            _check_driver(r, a)
            if a.ca and a.test in _TCP:
                _check_ca(r, a)


def shape_target(r: RunContext, host: str) -> tuple[str, str]:
    """The agent and device where ``host``'s qdisc, netem and link commands act (its lab ``shape``, else
    itself and its ``dev``; "" lets the agent pick its default route's)."""
    lh = r.lab.resolve(host)
    if lh.shape is not None:
        return lh.shape.agent, lh.shape.dev
    return lh.name, lh.dev


def _check_qdisc(r: RunContext, a: SetQdisc, agent: str) -> None:
    host = r.lab.resolve(agent).name
    have = r.remote(host, lambda h: list(h.info.qdiscs))
    if not have or a.qdisc in have:
        return
    hint = suggest(a.qdisc, have)
    raise UsageError(f"{a.loc.origin()}: SET_QDISC qdisc={a.qdisc}: {host}'s kernel has no qdisc {a.qdisc!r}; "
                     f"it has {', '.join(have)}" + (f" ({hint})" if hint else ""))


def _check_dev(r: RunContext, a: SetQdisc | SetNetem | SetLink | DoTcpdump, agent: str, dev: str) -> None:
    if not dev:  # the agent picks its default route's device
        return
    host = r.lab.resolve(agent).name
    have = r.remote(host, lambda h: list(h.info.interfaces))
    if not have or dev in have:
        return
    hint = suggest(dev, have)
    raise UsageError(f"{a.loc.origin()}: {a.kind}: {host} has no network device {dev!r} (the lab file's "
                     f"dev or shape for {a.host}); it has {', '.join(have)}" + (f" ({hint})" if hint else ""))


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


__all__ = ["check_names", "shape_target"]
