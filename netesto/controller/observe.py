"""A run's kernel traces and socket watches: started before a batch's flows start, stopped before a host's
data is fetched.

* Traces (``DO_CLIENT trace=``, ``DO_TRACE``, the run's ``trace`` option): the
  hosts that record ``tcp:tcp_probe`` for a batch's flows, filtered in the kernel
  by the flows' server ports; a port already traced on a host is not traced twice.
* Driver flows (iperf3, netperf) get a socket watch on each end's host, which
  samples the tool's sockets at the flow's interval and makes them the flow's
  10 ms series (:mod:`netesto.collectors.sockfiles`).
* ``DO_WATCH``: a watch of an application's sockets until the host's GET_DATA.

A trace or watch that cannot start is reported and the run goes on (it is an
extra, as ping is); its summary (events, events dropped) is a notice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from netesto.controller.context import RunContext
from netesto.controller.progress import HostError, Notice
from netesto.controller.records import ExpState
from netesto.controller.schedule import expand_do_client
from netesto.errors import AgentError, AgentUnreachable
from netesto.protocol.commands import TraceStartArgs, TraceStopArgs, WatchStartArgs, WatchStopArgs
from netesto.protocol.replies import ObserverReply, TraceStartReply, TraceStopReply, WatchStartReply, WatchStopReply
from netesto.raw.experiment import short_host
from netesto.script.actions import DoClient, DoTrace, DoWatch

ENDS = {"client": ("client",), "server": ("server",), "both": ("client", "server"), "none": (), "": ()}
TRACE_ENDS = tuple(k for k in ENDS if k)
DRIVERS_WATCHED = ("iperf3", "netperf")
STOP_TIMEOUT = 300.0  # s: a trace decodes and splits its events after the stop (~1.5 s per million)
Target = tuple[DoClient, str, "int | list[int]"]


@dataclass
class Observing:
    """One experiment's traces and watches: ports traced per host, DO_TRACE hosts, watches per host."""

    traced: dict[str, set[int]] = field(default_factory=dict)
    trace_hosts: dict[str, int] = field(default_factory=dict)  # host -> ring buffer per CPU, KiB
    watches: dict[str, set[str]] = field(default_factory=dict)
    batches: int = 0


def observing(e: ExpState) -> Observing:
    if e.observing is None:
        e.observing = Observing()
    assert isinstance(e.observing, Observing)
    return e.observing


def _extra(r: RunContext, host: str, what: str, call: Any) -> Any:
    """An agent call for a trace or watch: a refusal is reported and the run goes on."""
    def run(h: Any) -> Any:
        if not hasattr(h.client, "call"):  # a stand-in client of the runner's own tests
            return None
        try:
            return call(h)
        except AgentUnreachable:
            raise
        except AgentError as exc:
            r.emit(HostError(host=host, error=f"{what}: {exc.message}"))
            return None

    return r.remote(host, run)


def do_trace(r: RunContext, a: DoTrace) -> None:
    """DO_TRACE: the host records the experiment's flows from its next batch on."""
    e = r.experiment(a)
    host = r.lab.resolve(a.host).name
    e.touch(host)
    observing(e).trace_hosts[host] = a.buffer_kb


def do_watch(r: RunContext, a: DoWatch) -> None:
    """DO_WATCH: sample the host's matching sockets now, until its GET_DATA."""
    e = r.experiment(a)
    host = r.lab.resolve(a.host).name
    e.touch(host)
    args = WatchStartArgs(e.exp, a.name, a.interval, list(a.ports) or None, list(a.lports) or None,
                          list(a.rports) or None, list(a.addrs) or None, a.cgroup, a.pid)
    if _extra(r, host, f"watch {a.name}", lambda h: h.client.call(WatchStartReply, args)) is not None:
        observing(e).watches.setdefault(host, set()).add(a.name)


def _ports(port: int | list[int]) -> list[int]:
    return [port] if isinstance(port, int) else list(port)


def start_batch(r: RunContext, per_host: dict[str, list[Target]]) -> None:
    """Before a batch's flows start: the traces its flows ask for, the watches of its driver flows."""
    default = str(getattr(r, "trace", "") or "")
    traces: dict[tuple[int, str], set[int]] = {}
    watches: dict[tuple[int, str], list[dict[str, Any]]] = {}
    moves: dict[tuple[int, str], list[str]] = {}
    for client, targets in per_host.items():
        for a, server, port in targets:
            e = r.experiment(a)
            st = observing(e)
            ends = ENDS[a.trace or default]
            hosts = {client if end == "client" else server for end in ends}
            hosts |= {h for h in (client, server) if h in st.trace_hosts}
            for host in hosts:
                traces.setdefault((e.exp, host), set()).update(_ports(port))
            if a.driver in DRIVERS_WATCHED and a.test.startswith("TCP"):  # sock_diag samples TCP sockets
                _driver_watch(r, a, client, server, port, watches, moves)
    for (exp, host), ports in sorted(traces.items()):
        st = observing(r.exps[exp])
        new = sorted(ports - st.traced.get(host, set()))
        if not new:
            continue
        targs = TraceStartArgs(exp, new, st.trace_hosts.get(host, 4096))
        if _extra(r, host, "trace", lambda h: h.client.call(TraceStartReply, targs)) is not None:
            st.traced.setdefault(host, set()).update(new)
    for exp in sorted({exp for exp, _ in watches}):
        observing(r.exps[exp]).batches += 1
    for (exp, host), flows in sorted(watches.items()):
        st = observing(r.exps[exp])
        name = f"drivers{st.batches}"
        clients = [f["port"] for f in flows if f["side"] == "client"]
        servers = [f["port"] for f in flows if f["side"] == "server"]
        wargs = WatchStartArgs(exp, name, min(f["header"]["interval"] for f in flows),
                               local_ports=sorted(set(servers)) or None, remote_ports=sorted(set(clients)) or None,
                               flows=flows, moves=sorted(set(moves.get((exp, host), []))) or None)
        if _extra(r, host, f"watch {name}", lambda h: h.client.call(WatchStartReply, wargs)) is not None:
            st.watches.setdefault(host, set()).add(name)


def _driver_watch(r: RunContext, a: DoClient, client: str, server: str, port: int | list[int],
                  watches: dict[tuple[int, str], list[dict[str, Any]]],
                  moves: dict[tuple[int, str], list[str]]) -> None:
    """The flow ends a driver DO_CLIENT's flows will have on their two hosts, for their watches."""
    address = r.lab.resolve(server).test_address
    for spec in expand_do_client(a, client=client, server=server, server_address=address, port=port):
        header = spec.to_dict()
        header.pop("token", None)
        header.update(host=short_host(client), server=short_host(server))
        watches.setdefault((a.exp, client), []).append(
            {"flow_id": spec.flow_id, "side": "client", "port": spec.port, "address": address, "header": header})
        watches.setdefault((a.exp, server), []).append(
            {"flow_id": spec.flow_id, "side": "server", "port": spec.port, "header": header})
        if server != client:  # the server host samples that end: the tool's report of it is set aside
            moves.setdefault((a.exp, client), []).append(f"{spec.flow_id}.server.nflow")


def _stop_all(r: RunContext, host: str, e: ExpState, reply: type[ObserverReply], args: Any, what: str) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT
    while True:
        got = _extra(r, host, what, lambda h: h.client.call(reply, args, timeout=max(h.client.timeout, 30.0)))
        if got is None:
            return
        if got.done:
            break
        if time.monotonic() > deadline:
            r.emit(HostError(host=host, error=f"{what} of experiment {e.exp} not finished after {STOP_TIMEOUT:.0f} s"))
            return
        time.sleep(0.2)
    for obs in got.observers:
        _report(r, host, obs)


def _report(r: RunContext, host: str, obs: dict[str, Any]) -> None:
    summary = obs.get("summary") or {}
    if obs.get("state") == "error" or obs.get("error"):
        r.emit(HostError(host=host, error=f"{obs.get('kind')} {obs.get('name')}: {obs.get('error') or 'failed'}"))
    elif obs.get("kind") == "trace":
        dropped = int(summary.get("host_dropped", 0)) + int(summary.get("host_missed_in_pages", 0))
        events = sum(int(v) for v in (summary.get("events") or {}).values()) - int(summary.get("foreign_events", 0))
        text = f"trace: {events} events in {len(summary.get('files', []))} files"
        text += f"; {dropped} events DROPPED (the ring buffer was full: DO_TRACE buffer=)" if dropped else ""
        r.emit(Notice(host=host, text=text))
    elif summary.get("missing"):
        r.emit(Notice(host=host, text=f"watch {obs.get('name')}: no socket found for "
                                      f"{', '.join(summary['missing'])}"))


def stop_host(r: RunContext, host: str, e: ExpState) -> None:
    """Before ``host``'s data of ``e`` is fetched: its watches (they make flow ends), then its traces (which
    find their flows by the flow ends' addresses) end and write their files."""
    st = e.observing
    if not isinstance(st, Observing):
        return
    if st.watches.pop(host, None):
        _stop_all(r, host, e, WatchStopReply, WatchStopArgs(e.exp), "watch")
    if st.traced.pop(host, None):
        _stop_all(r, host, e, TraceStopReply, TraceStopArgs(e.exp), "trace")


def trace_ends(value: str) -> str:
    """``value`` if it names trace ends (client, server, both, none), else ValueError."""
    if value not in ENDS:
        raise ValueError(f"trace={value!r}: expected one of {', '.join(TRACE_ENDS)}")
    return value


__all__ = ["ENDS", "Observing", "TRACE_ENDS", "do_trace", "do_watch", "observing", "start_batch", "stop_host",
           "trace_ends"]
