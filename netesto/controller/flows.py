"""DO_CLIENT batches and the waits for their flows: servers, common start instants, pings, ends.

DO_CLIENTs that follow one another with nothing in between are one *batch*: their
flows start at one common instant, expressed in each client agent's own clock, so
flows on different hosts start together. A host's data is fetched only once the
flows it takes part in have ended (:func:`wait_flows`).
"""

from __future__ import annotations

import time
from dataclasses import replace

from netesto.controller import links
from netesto.controller.context import NETSERVER_PORT, RunContext
from netesto.controller.names import check_names
from netesto.controller.observe import start_batch
from netesto.controller.plan import check_flow_ids
from netesto.controller.progress import ActionFinished, ActionStarted, FlowsScheduled, HostError, Notice
from netesto.controller.records import ExpState, FlowRecord
from netesto.controller.schedule import expand_do_client, wait_timeout
from netesto.controller.shape import measure
from netesto.raw.experiment import short_host
from netesto.errors import AgentError, AgentUnreachable, UsageError
from netesto.policy import MAX_FLOWS_PER_REQUEST, MAX_PORTS_PER_REQUEST
from netesto.protocol.flowspec import FlowSpec
from netesto.protocol.text import printable
from netesto.protocol.replies import PingReply, StatusReply
from netesto.script.actions import DoClient

Target = tuple[DoClient, str, "int | list[int]"]  # a DO_CLIENT, its server's lab name, the port(s)


def prepare_server(r: RunContext, e: ExpState, name: str) -> int | None:
    """The port of the builtin engine's server on ``name`` for ``e`` (started once)."""
    if name in e.server_ports:
        return e.server_ports[name]
    reply = r.remote(name, lambda h: h.client.prepare_server(e.exp, e.token))
    if reply is None:
        return None
    port = reply.port
    e.server_ports[name] = port
    return port


def server_ports(r: RunContext, e: ExpState, a: DoClient, name: str) -> int | list[int] | None:
    """The test port(s) the flows of ``a`` connect to on server ``name``.

    builtin: the agent's engine server (one port for all flows). iperf3: one
    iperf3 server per flow, ports 5201, 5202, ... (``iperf3_port`` up) per server
    and experiment.
    netperf: the server's netserver on port 12865, started by its agent if none runs; each
    flow's data connection gets a port of its own from the same range as iperf3's (netperf
    ``-P ,port``): 12865 as the data port too made netserver pick one no one knew, so the
    flow's socket could not be found to sample it.
    """
    first = r.iperf3_port + e.iperf3_next.get(name, 0)
    ports = list(range(first, first + a.instances))
    if a.driver == "netperf":
        if r.remote(name, lambda h: h.client.prepare_server(e.exp, e.token, driver="netperf",
                                                            ports=[NETSERVER_PORT])) is None:
            return None
    elif a.driver != "iperf3":
        return prepare_server(r, e, name)
    elif r.remote(name, lambda h: h.client.prepare_server(e.exp, e.token, driver="iperf3", ports=ports)) is None:
        return None
    e.iperf3_next[name] = e.iperf3_next.get(name, 0) + a.instances
    return ports


def do_clients(r: RunContext, batch: list[DoClient]) -> None:
    """Start a batch of DO_CLIENTs at one common instant."""
    t_begin = time.time()
    check_limits(r, batch)
    check_names(r, batch)  # a run of a list checked them all before it began: a lazy one, here
    for a in batch:
        check_flow_ids(a, r.lab, r.pairs)
    for a in batch:
        r.experiment(a).actions.append(a.to_dict())
        r.emit(ActionStarted(kind=a.kind, host=a.host, exp=a.exp, text=a.args_text(), loc=str(a.loc)))
    n_err = len(r.errors)
    per_host = _targets(r, batch)
    start_batch(r, per_host)  # traces and driver flows' watches, armed before the flows start
    live = [c for c in per_host if not r.hosts[c].dead]
    for c in live:
        r.remote(c, lambda h: r.sessions.clock(h))
    live = [c for c in live if not r.hosts[c].dead]
    for exp_n in sorted({a.exp for a in batch}):  # the shape each experiment really starts under
        measure(r, r.exps[exp_n], [(r.lab.resolve(a.host).name, r.lab.resolve(a.server).name)
                                   for a in batch if a.exp == exp_n])
    # the lead: learned from these hosts' readiness when the builtin engine runs every flow of the batch
    lead = r.start_lead(live, learned=all(a.driver == "builtin" for a in batch))
    t_sched = time.time()
    t_common = t_sched + lead if live else None
    links.start(r, batch, t_common)  # SET_LINKs before the batch: their time 0 is its start
    if t_common is not None:
        for c in live:
            _start_host(r, c, per_host[c], t_common, t_sched, lead)
    err = "; ".join(r.errors[n_err:])
    for a in batch:
        r.emit(ActionFinished(kind=a.kind, host=a.host, exp=a.exp, elapsed=time.time() - t_begin, error=err))


def _targets(r: RunContext, batch: list[DoClient]) -> dict[str, list[Target]]:
    """The batch by client host, each with its server and ports, "before" snapshots taken."""
    per_host: dict[str, list[Target]] = {}
    for a in batch:
        e = r.experiment(a)
        client = r.lab.resolve(a.host).name
        server = r.lab.resolve(a.server).name
        e.touch(client)
        e.touch(server)
        port = server_ports(r, e, a, server)
        if port is None:
            continue  # the server was dropped: nothing to connect to
        r.remote(client, lambda h: None)  # connect (hello, clock) or drop
        if r.hosts[client].dead:
            continue
        if a.stats and (client, 0) not in e.snapshots:
            if r.remote(client, lambda h: h.client.snapshot(a.exp, 0, short_host(client))) is not None:
                e.snapshots.add((client, 0))
        if a.stats:
            e.stats_hosts.add(client)
        per_host.setdefault(client, []).append((a, server, port))
    return per_host


def _start_host(r: RunContext, c: str, targets: list[Target], t_common: float, t_sched: float, lead: float) -> None:
    """Start client ``c``'s flows at ``t_common`` (controller time, scheduled at ``t_sched`` with ``lead``),
    one request per experiment."""
    h = r.hosts[c]
    at_agent = t_common + h.offset
    specs: list[FlowSpec] = []
    records: list[FlowRecord] = []
    for a, server, port in targets:
        e = r.experiment(a)
        new = expand_do_client(
            a, client=c, server=server, server_address=r.lab.resolve(server).test_address,
            port=port, token=e.token, start_at=at_agent,
            run_seed=r.seed, link_bps=int(r.testbed.get("bw") or 0),
        )
        specs += new
        for i, s in enumerate(new):
            records.append(FlowRecord(s, a, c, server, i, t_common + a.delay, at_agent + a.delay,
                                      scheduled_agent=t_sched + h.offset,
                                      teaches_lead=a.delay == 0 and a.driver == "builtin"))
    by_exp: dict[int, list[FlowSpec]] = {}
    for s in specs:
        by_exp.setdefault(s.exp, []).append(s)
    if time.time() > at_agent - h.offset:
        r.emit(Notice(host=c, text=(
            f"start instructions reached {c} after the scheduled instant (a lead of {lead:.2f} s was too "
            "short here): its flows start late")))
    for exp_n, exp_specs in by_exp.items():
        e = r.exps[exp_n]
        ids = {s.flow_id for s in exp_specs}
        mine = [rec for rec in records if rec.spec.flow_id in ids and rec.spec.exp == exp_n]
        # experiment.json before the flows start: a controller killed while they run leaves one
        # (its name, script and flows) for 'netesto run --collect' to process the data with.
        r.write_json(_with(e, mine), partial=True)
        started = r.remote(c, lambda h: h.client.start_flows(exp_n, exp_specs, at_agent))
        if started is None and r.hosts[c].dead:
            break
        e.flows.extend(mine)
        e.waited.discard(c)
        dur = max(rec.spec.dur + rec.action.delay for rec in mine)
        r.emit(FlowsScheduled(exp=exp_n, host=c, flows=tuple(sorted(ids)), start_at=t_common, dur=dur,
                              spans=tuple((rec.action.dur, rec.action.delay) for rec in mine), lead=lead))
        for a, server, _ in targets:
            if a.exp == exp_n and (c, server) not in e.pings:
                target = r.lab.resolve(server).test_address
                pname = short_host(server)  # the agent files it as <client>-<name>
                until = max(rec.end_ctrl for rec in mine if rec.server == server)
                if ping(r, c, e, target, pname, until - time.time()) is not None:
                    e.pings.add((c, server))


def _with(e: ExpState, flows: list[FlowRecord]) -> ExpState:
    """``e`` as it will be once ``flows`` start (for its experiment.json written before they do)."""
    return replace(e, flows=[*e.flows, *flows])


def check_limits(r: RunContext, batch: list[DoClient]) -> None:
    """UsageError at the first DO_CLIENT of ``batch`` that makes one request hold more flows (or
    iperf3 ports) than an agent takes, before anything of the batch starts."""
    flows: dict[tuple[str, int], int] = {}
    for a in batch:
        key = (r.lab.resolve(a.host).name, a.exp)
        flows[key] = flows.get(key, 0) + a.instances
        if flows[key] > MAX_FLOWS_PER_REQUEST:
            raise UsageError(f"{a.loc}: {flows[key]} flows of experiment {a.exp} start together on {key[0]}; an agent "
                             f"takes at most {MAX_FLOWS_PER_REQUEST} in one request "
                             "(netesto.policy.MAX_FLOWS_PER_REQUEST): fewer instances, or a WAIT between DO_CLIENTs")
        if a.driver == "iperf3" and a.instances > MAX_PORTS_PER_REQUEST:
            raise UsageError(f"{a.loc}: {a.instances} iperf3 flows need as many servers on {a.server}; an agent "
                             f"starts at most {MAX_PORTS_PER_REQUEST} in one request "
                             "(netesto.policy.MAX_PORTS_PER_REQUEST)")


def ping(r: RunContext, client: str, e: ExpState, target: str, name: str, duration: float) -> PingReply | None:
    """Ping ``target`` from ``client`` until the pair's last flow ends."""
    h = r.hosts[client]
    if not hasattr(h.client, "ping_start"):
        return None
    try:
        return h.client.ping_start(e.exp, target, name, duration=max(1.0, duration))
    except AgentUnreachable as exc:
        r.drop(client, exc)
    except AgentError as exc:  # ping is an extra: report, keep running
        r.emit(HostError(host=client, error=f"ping to {target}: {exc}"))
    return None


def wait_flows(r: RunContext, host: str, e: ExpState, *, margin: float) -> bool:
    """Wait for every flow ``host`` takes part in, on the client agents that run them.

    False if some are still running after the timeout (their data is then
    fetched again later: at the next GET_DATA or at the end of the run).
    """
    now = time.time()
    involved = [rec for rec in e.flows if host in (rec.host, rec.server) and rec.host not in e.waited]
    complete = True
    for client in sorted({rec.host for rec in involved}):
        if r.sessions.is_dead(client):
            continue
        ends = [rec.end_ctrl for rec in involved if rec.host == client]
        timeout = wait_timeout(ends, now, margin)
        st = r.remote(client, lambda h: h.client.wait_flows(e.exp, timeout, stop=r.wait_stop))
        r.check_cancel()
        if st is None:
            continue
        if not st.complete:
            complete = False
            r.emit(HostError(host=client, error=(
                f"flows of experiment {e.exp} still running {timeout:.0f} s after they should have ended: "
                f"{', '.join(st.running) or '?'}")))
        else:
            e.waited.add(client)
        report_failed_flows(r, client, e, st)
    return complete


def report_failed_flows(r: RunContext, client: str, e: ExpState, st: StatusReply) -> None:
    """A flow that ended in error (refused connection, reset, refused spec...) is an error of
    the experiment (experiment.json's ``errors``) and of the run: the run goes on and the other
    flows' data stands, but it ends with an error (non-zero exit, a failed notebook cell)."""
    ours = {rec.spec.flow_id: rec.action.loc.origin() for rec in e.flows if rec.host == client}
    errors = st.errors
    for flow in st.failed:
        if flow not in ours or flow in e.failed_flows or (  # cut short by this run's own interrupt
                r.interrupted and str(errors.get(flow, "")).startswith("stopped by a stop request")):
            continue
        e.failed_flows.add(flow)
        # the agent's words: escaped here, as they go into the run's errors (its exit message) too
        # the script line first (the user's, then the macro's), as a script error reads
        text = f"flow {printable(flow, 200)} of experiment {e.exp} failed: {printable(errors.get(flow) or 'error')}"
        said = f"{ours[flow]}: {client}: {text}"
        e.errors.append(said)
        r.errors.append(said)
        if r.first_error is None:
            r.first_error = AgentError(said, kind="FlowFailed")
            r.first_error.host = client  # named inside the message, after the line
        r.emit(HostError(host=client, error=f"{ours[flow]}: {text}"))


__all__ = ["check_limits", "do_clients", "ping", "prepare_server", "report_failed_flows", "server_ports", "wait_flows"]
