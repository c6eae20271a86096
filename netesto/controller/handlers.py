"""The run loop's dispatch table: one handler per action type (DO_CLIENT batches are in ``flows``).

Every handler is ``handler(context, action)``; :data:`HANDLERS` maps each action
class the script language produces to its handler. Host settings (sysctl, module
parameters, qdisc, netem) mark the host *changed*: the run restores it at its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from netesto.controller import links
from netesto.controller.context import RunContext
from netesto.controller.flows import prepare_server, wait_flows
from netesto.controller.names import shape_target
from netesto.controller.observe import do_trace, do_watch, stop_host
from netesto.controller.progress import DataStored, EchoText, ExperimentProcessed, Notice
from netesto.controller.records import NO_RESULTS, ExpState, process_results, skews_from_files, start_notices
from netesto.raw.experiment import short_host
from netesto.controller.session import HostSession
from netesto.errors import StorageError
from netesto.protocol.replies import NetemReply, QdiscReply
from netesto.script.actions import (
    Action,
    Debug,
    DoClient,
    DoServer,
    DoTcpdump,
    DoTrace,
    DoWatch,
    Echo,
    GetData,
    ProcessExp,
    RandWait,
    SetLink,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetSysctl,
    Wait,
)

Handler = Callable[[RunContext, Any], None]


def batched(actions: Iterable[Action]) -> Iterator[Action | list[DoClient]]:
    """Actions, with runs of consecutive DO_CLIENTs grouped into lists."""
    batch: list[DoClient] = []
    for a in actions:
        if isinstance(a, DoClient):
            batch.append(a)
            continue
        # A zero-length pause between DO_CLIENTs (RAND_WAIT 0, "SET randDelay=0")
        # separates nothing: the flows still start together.
        if batch and isinstance(a, (Wait, RandWait)) and max(getattr(a, "seconds", 0.0),
                                                              getattr(a, "low", 0.0), getattr(a, "high", 0.0)) <= 0:
            continue
        if batch:
            yield batch
            batch = []
        yield a
    if batch:
        yield batch


def get_data(r: RunContext, name: str, e: ExpState, *, salvage: bool = False) -> None:
    """Fetch host ``name``'s files of ``e`` once its flows have ended ("after" snapshot first)."""
    host = r.lab.resolve(name).name
    if e.fetched.get(host) == e.generation.get(host, 0) and host in e.fetched:
        return  # nothing new since the last GET_DATA (the original's rule)
    complete = wait_flows(r, host, e, margin=2.0 if salvage else r.wait_margin)
    links.settle(r, host, e)  # a link schedule's record is complete once it ended
    if host in e.tcpdumps:
        r.remote(host, lambda h: h.client.tcpdump_stop(e.exp))
        e.tcpdumps.discard(host)
    stop_host(r, host, e)  # traces and watches write their files
    # A client with stats is owed its "after" snapshot here. So is, in a run cut short, a host whose
    # "before" one was taken (DO_SERVER order=0) and whose script never reached its DO_SERVER order=1:
    # the counters it moved during the flows are data collected, and its host_delta would be blank.
    owed = host in e.stats_hosts or (salvage and (host, 0) in e.snapshots)
    if owed and (host, 1) not in e.snapshots:
        if r.remote(host, lambda h: h.client.snapshot(e.exp, 1, short_host(host))) is not None:
            e.snapshots.add((host, 1))

    def fetch(h: HostSession) -> Any:
        try:
            e.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {e.dir}: {exc.strerror or exc}; the agents keep the data") from exc
        return h.client.fetch(e.exp, e.dir)

    paths = r.remote(host, fetch)
    if paths is None:
        return
    if complete:
        e.fetched[host] = e.generation.get(host, 0)
    stored(r, host, e, paths)
    skews_from_files(e, host)
    for text in start_notices(e, host):  # those no started event said during the run
        r.emit(Notice(host=host, text=text))


def stored(r: RunContext, host: str, e: ExpState, paths: Iterable[Any]) -> None:
    """Report the files fetched from ``host`` into ``e``'s directory."""
    files = [Path(p) for p in paths]
    size = sum(p.stat().st_size for p in files if p.is_file())
    r.emit(DataStored(host=host, exp=e.exp, files=len(files), bytes=size, dest=str(e.dir)))


def run_processing(r: RunContext, e: ExpState) -> str:
    """Process ``e``'s stored data; '' or a note saying why only the raw data is there."""
    limited: list[str] = []
    note = process_results(r.workdir, e, limited, r.steady)
    if note and note != NO_RESULTS:
        r.emit(Notice(host="", text=note))
    for text in limited:
        r.emit(Notice(host="", text=f"experiment {e.exp}: {text}"))
    return note


def process_stored(r: RunContext, e: ExpState) -> None:
    """experiment.json, then the results (all.exp.out, exp.nc, exp.csv rows, exp.html)."""
    path = r.write_json(e)
    e.processed = True
    r.emit(ExperimentProcessed(exp=e.exp, path=str(path), note=run_processing(r, e)))


def _process(r: RunContext, a: ProcessExp) -> None:
    e = r.experiment(a)
    e.desc, e.other = a.desc, a.other
    for host in sorted(e.hosts):  # data the script never asked for is still stored
        if not r.hosts.get(host) or not r.hosts[host].dead:
            if host in r.hosts:
                get_data(r, host, e)
    process_stored(r, e)


def _do_server(r: RunContext, a: DoServer) -> None:
    e = r.experiment(a)
    name = r.lab.resolve(a.host).name
    e.touch(name)
    if a.order >= 1:
        # "after" statistics: only once the flows this host serves have ended
        wait_flows(r, name, e, margin=r.wait_margin)
    if r.remote(name, lambda h: h.client.snapshot(a.exp, a.order, short_host(name))) is not None:
        e.snapshots.add((name, a.order))
    if a.start:
        prepare_server(r, e, name)


def _tcpdump(r: RunContext, a: DoTcpdump) -> None:
    e = r.experiment(a)
    e.touch(r.lab.resolve(a.host).name)
    server = "X" if a.server in ("X", "x", "") else r.lab.resolve(a.server).test_address
    dev = r.lab.resolve(a.host).dev
    if r.remote(a.host, lambda h: h.client.tcpdump_start(a.exp, dev, server, a.packets)) is not None:
        e.tcpdumps.add(r.lab.resolve(a.host).name)


def _changing(r: RunContext, host: str, what: Callable[[HostSession], Any]) -> None:
    def call(h: HostSession) -> Any:
        h.changed = True  # even a failed change may have left something to restore
        reply = what(h)
        # e.g. a root qdisc the agent cannot rebuild exactly when it restores
        warnings = reply.warnings if isinstance(reply, (QdiscReply, NetemReply)) else None
        for warning in warnings or ():
            r.emit(Notice(host=h.lab.name, text=warning))
        return reply

    r.remote(host, call)


def _sysctl(r: RunContext, a: SetSysctl) -> None:
    settings = {name: list(values) for name, values in a.settings}
    _changing(r, a.host, lambda h: h.client.set_sysctl(settings))


def _module_params(r: RunContext, a: SetModuleParams) -> None:
    params = dict(a.params)
    _changing(r, a.host, lambda h: h.client.set_module_params(a.module, params))


def _qdisc(r: RunContext, a: SetQdisc) -> None:
    agent, dev = shape_target(r, a.host)
    _changing(r, agent, lambda h: h.client.set_qdisc(dev, a.qdisc, a.action, a.rate, a.burst, a.limit, a.other))


def _netem(r: RunContext, a: SetNetem) -> None:
    agent, dev = shape_target(r, a.host)
    _changing(r, agent, lambda h: h.client.set_netem(dev, a.delay, a.jitter, a.loss, a.rate, a.limit))


HANDLERS: dict[type[Action], Handler] = {
    Wait: lambda r, a: r.sleep(a.seconds),
    RandWait: lambda r, a: r.sleep(r.rng.uniform(a.low, max(a.low, a.high))),
    Echo: lambda r, a: r.emit(EchoText(text=a.text)),
    Debug: lambda r, a: None,
    DoServer: _do_server,
    GetData: lambda r, a: get_data(r, a.host, r.experiment(a)),
    ProcessExp: _process,
    SetSysctl: _sysctl,
    SetModuleParams: _module_params,
    SetQdisc: _qdisc,
    SetNetem: _netem,
    SetLink: links.add,
    DoTcpdump: _tcpdump,
    DoTrace: do_trace,
    DoWatch: do_watch,
}


__all__ = ["HANDLERS", "Handler", "batched", "get_data", "process_stored", "run_processing", "stored"]
