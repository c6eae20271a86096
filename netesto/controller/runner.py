"""The runner: executes a script's Actions on a lab of agents.

One :class:`~netesto.controller.client.AgentClient` per host, connected on
first use (hello once, clock offset from the lowest-RTT of several round
trips). DO_CLIENTs that follow one another with nothing in between are one
*batch*: their flows start at one common instant, expressed in each client
agent's own clock, so flows on different hosts start together; a RAND_WAIT
or WAIT between DO_CLIENTs gives each its own instant, as in the original.
GET_DATA waits for the flows that involve the host instead of racing them,
then stores the host's files in ``<workdir>/<exp>/`` (hosts merge there, as
the original's tarballs did). PROCESS_EXP writes ``experiment.json`` and
calls ``netesto.results.process_experiment`` when the results extra is
installed.

Faults: an agent that stops answering is dropped for the rest of the run
(its actions are skipped, every other host's data is still fetched); any
other agent refusal aborts the run after stopping flows and fetching what
exists. Settings are left in place between experiments (the original's
behaviour) and restored on every changed host when the run ends, however it
ends; Ctrl-C stops flows and restores before re-raising.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from netesto._version import __version__
from netesto.controller.lab import Lab, LabHost
from netesto.controller.progress import (
    ActionFinished,
    ActionStarted,
    DataStored,
    EchoText,
    ExperimentProcessed,
    ExperimentStarted,
    FlowProgress,
    FlowsScheduled,
    HostError,
    Notice,
    ProgressCallback,
    ProgressEvent,
    RunFinished,
    RunStarted,
)
from netesto.controller.schedule import expand_do_client, short_name, start_skew, wait_timeout
from netesto.controller.signals import shield_signals
from netesto.errors import (
    AgentError,
    AgentUnreachable,
    LabError,
    NetestoError,
    RunInterrupted,
    ScriptError,
    StorageError,
    UsageError,
)
from netesto.script.actions import (
    Action,
    Debug,
    DoClient,
    DoServer,
    DoTcpdump,
    Echo,
    GetData,
    ProcessExp,
    RandWait,
    RemoteAction,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetSysctl,
    Wait,
)
from netesto.script.interp import State
from netesto.protocol.flowspec import FlowSpec

ClientFactory = Callable[[LabHost, Lab], Any]
IPERF3_PORT = 5201  # iperf3's default port; one server per flow from here up
NETSERVER_PORT = 12865  # netperf's netserver control port


def testbed_shape(lab: Lab) -> dict[str, Any]:
    """The bottleneck of the testbed whose lab file ``lab`` is (``{}`` for any other lab):
    its settings now, as a result's parameters (bw, rtt, buffer, loss, jitter)."""
    if lab.path is None:
        return {}
    try:
        from netesto.testbed.state import list_states
    except ImportError:
        return {}
    try:
        here = Path(lab.path).resolve()
        state = next((s for s in list_states() if s.get("lab") and Path(s["lab"]).resolve() == here), None)
    except OSError:
        return {}
    if not state:
        return {}
    cfg = state.get("config", {})
    return {"name": state.get("name", ""), "mode": state.get("mode", ""), "bw": int(cfg.get("bw_bps", 0)),
            "rtt": float(cfg.get("rtt_ms", 0.0)), "buffer": int(cfg.get("buffer_bytes", 0)),
            "loss": float(cfg.get("loss", 0.0)), "jitter": float(cfg.get("jitter_ms", 0.0))}


CLAIM_WAIT = 15.0  # seconds a run waits for a gone controller's lease to lapse


def _claim(client: Any, run_id: str, wait: float = CLAIM_WAIT) -> None:
    """Claim the agent for this run. A lab whose owner's lease lapses within ``wait``
    seconds (a controller that was killed: its agents do not all time it out at the
    same moment) is waited for; a live owner renews its lease and the busy error stands."""
    deadline = time.monotonic() + wait
    while True:
        try:
            client.claim(run_id, _controller_name())
            return
        except AgentError as exc:
            left = exc.detail.get("lease_left") if exc.kind == "Busy" and isinstance(exc.detail, dict) else None
            if not isinstance(left, (int, float)) or time.monotonic() + left > deadline:
                raise
            time.sleep(min(float(left), 5.0) + 0.2)


def default_client_factory(host: LabHost, lab: Lab) -> Any:
    """An AgentClient for ``host`` with the lab's keys (imported late: pulls zmq)."""
    from netesto.controller.client import AgentClient

    if lab.insecure:
        return AgentClient(host.name, host.control, host.port, insecure=True)
    return AgentClient(
        host.name,
        host.control,
        host.port,
        server_key=host.public_key,
        client_keys=lab.controller_key,
    )


@dataclass
class _Host:
    """Runner state of one lab host."""

    lab: LabHost
    client: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    offset: float = 0.0
    rtt: float = 0.0
    offset_at: float = 0.0  # time.monotonic() of the estimate
    dead: str = ""  # why the host was dropped
    changed: bool = False  # sysctl/qdisc/netem/module params set through this agent
    leftover: frozenset[str] = frozenset()  # experiments it held, unfetched, when this run connected


@dataclass
class FlowRecord:
    """One scheduled flow: its spec and where/when it runs."""

    spec: FlowSpec
    action: DoClient
    host: str
    server: str
    instance: int
    start_ctrl: float  # scheduled start (delay included), controller time
    start_agent: float  # the same instant in the client agent's time
    start_skew: float | None = None

    @property
    def end_ctrl(self) -> float:
        return self.start_ctrl + self.spec.dur


@dataclass
class _Exp:
    """Runner state of one experiment."""

    exp: int
    exp_name: str
    dir: Path
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    server_ports: dict[str, int] = field(default_factory=dict)
    snapshots: set[tuple[str, int]] = field(default_factory=set)
    stats_hosts: set[str] = field(default_factory=set)
    pings: set[tuple[str, str]] = field(default_factory=set)
    tcpdumps: set[str] = field(default_factory=set)
    waited: set[str] = field(default_factory=set)  # client hosts whose flows have all ended
    iperf3_next: dict[str, int] = field(default_factory=dict)  # server -> iperf3 ports used
    flows: list[FlowRecord] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    generation: dict[str, int] = field(default_factory=dict)
    fetched: dict[str, int] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed_flows: set[str] = field(default_factory=set)  # reported already
    desc: str = ""
    other: tuple[tuple[str, str], ...] = ()
    processed: bool = False

    def touch(self, host: str) -> None:
        self.hosts.add(host)
        self.generation[host] = self.generation.get(host, 0) + 1


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment a run produced."""

    exp: int
    exp_name: str
    path: Path
    hosts: tuple[str, ...]
    flows: tuple[str, ...]
    errors: tuple[str, ...] = ()

    @property
    def dataset(self) -> Any:
        """The experiment's xarray Dataset (needs the results extra)."""
        from netesto.results import open_experiment

        return open_experiment(self.path)

    def plot(self, *variables: str, **options: Any) -> Any:
        """Per-flow time series (goodput, cwnd, RTT by default) as holoviews panels with linked
        time axes; ``netesto.plots.save(res[1].plot(), "flows.html")`` writes them as an offline page."""
        from netesto.plots import timeseries

        return timeseries(self.dataset, variables, **options) if variables else timeseries(self.dataset, **options)

    def _repr_html_(self) -> str:
        from netesto.report.display import experiment_html

        return experiment_html(self.dataset)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: experiments, errors, time."""

    workdir: Path
    experiments: tuple[ExperimentResult, ...]
    errors: tuple[str, ...] = ()
    elapsed: float = 0.0
    # Stopped before its end (Ctrl-C, SIGTERM, cancel): what it collected is kept and processed.
    interrupted: bool = False
    # What the script left defined: run(state=...) takes it forward (too long to show).
    state: State | None = field(default=None, repr=False, compare=False)

    @property
    def exps(self) -> list[int]:
        return [e.exp for e in self.experiments]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.interrupted

    def __getitem__(self, exp: int) -> ExperimentResult:
        for e in self.experiments:
            if e.exp == exp:
                return e
        raise KeyError(f"experiment {exp} is not in this run (it ran {self.exps})")

    def _repr_html_(self) -> str:
        from netesto.report.display import run_html

        return run_html(self)


class _Abort(Exception):
    """Internal: stop executing actions (the cause is in ``__cause__``)."""


class Runner:
    """Executes Actions on ``lab``, storing data under ``workdir``."""

    def __init__(
        self,
        lab: Lab,
        workdir: str | Path = ".",
        *,
        progress: ProgressCallback | None = None,
        client_factory: ClientFactory = default_client_factory,
        lead: float = 1.0,
        lead_per_host: float = 0.2,
        wait_margin: float = 15.0,
        clock_samples: int = 8,
        clock_refresh: float = 60.0,
        script: str = "",
        rng: random.Random | None = None,
        seed: int | None = None,
        defines: dict[str, str] | None = None,
        cancel: threading.Event | None = None,
        iperf3_port: int = IPERF3_PORT,
    ) -> None:
        self.lab = lab
        self.workdir = Path(workdir)
        self.progress = progress
        self.client_factory = client_factory
        self.lead = lead
        self.lead_per_host = lead_per_host
        self.wait_margin = wait_margin
        self.clock_samples = clock_samples
        self.clock_refresh = clock_refresh
        self.script = script
        # RAND_WAITs draw from a seeded generator: experiment.json records the seed
        self.seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
        self.rng = rng or random.Random(self.seed)
        self.defines = dict(defines or {})
        self.testbed = testbed_shape(lab)
        self.hosts: dict[str, _Host] = {}
        self.exps: dict[int, _Exp] = {}
        self.errors: list[str] = []
        self.first_error: NetestoError | None = None
        self._stop = cancel if cancel is not None else threading.Event()
        self._interrupted = False
        self.run_id = secrets.token_hex(4)  # names this run to another controller that finds the lab busy
        self.iperf3_port = iperf3_port
        self._current: _Exp | None = None
        self._collecting = False
        self._pairs: dict[tuple[int, str, str, int], DoClient] = {}  # flow ids given out (see validate)
        self._foreign: set[tuple[str, int]] = set()  # (host, exp) holding an earlier run's data

    def _emit(self, event: ProgressEvent) -> None:
        if self.progress is not None:
            try:
                self.progress(event)
            except Exception:  # a broken display must not break the experiment
                pass

    def cancel(self) -> None:
        """Ask a running :meth:`run` (in another thread) to stop at the next wait."""
        self._stop.set()

    def validate(self, actions: Iterable[Action]) -> None:
        """LabError naming the first host an action uses that the lab does not have;
        ScriptError at a DO_CLIENT whose flow ids another one of its experiment has."""
        pairs: dict[tuple[int, str, str, int], DoClient] = {}
        for a in actions:
            try:
                if isinstance(a, RemoteAction):
                    self.lab.resolve(a.host)
                if isinstance(a, (DoClient,)):
                    self.lab.resolve(a.server)
                if isinstance(a, DoTcpdump) and a.server not in ("X", "x", ""):
                    self.lab.resolve(a.server)
            except LabError as exc:
                raise LabError(f"{a.loc}: {exc.message}") from exc  # where the script names it
            if isinstance(a, DoClient):
                self._check_flow_ids(a, pairs)

    def _check_flow_ids(self, a: DoClient, pairs: dict[tuple[int, str, str, int], DoClient]) -> None:
        """Two DO_CLIENTs of one experiment with the same lab hosts and group would make the
        same flow ids (h2 and h2.lab are one host): the second would replace the first."""
        client, server = self.lab.resolve(a.host).short, self.lab.resolve(a.server).short
        key = (a.exp, client, server, a.group)
        first = pairs.setdefault(key, a)
        if first is not a:
            raise ScriptError(
                f"DO_CLIENT: flows {client}-{server}-{a.group}-* are already in experiment {a.exp} "
                f"(from {first.loc})", file=a.loc.file, line=a.loc.line, column=a.loc.column,
                text=a.loc.text, hint="give one of them another group=N")

    def run(self, actions: Iterable[Action]) -> RunResult:
        """Execute ``actions`` in order (a lazy iterator is consumed lazily; a list
        is checked against the lab first, so an unknown host fails before anything runs)."""
        if isinstance(actions, (list, tuple)):
            self.validate(actions)
        t0 = time.time()
        _make_workdir(self.workdir)
        self._emit(RunStarted(lab=self.lab.name, hosts=tuple(self.lab.names), workdir=str(self.workdir)))
        interrupted = False
        aborted: BaseException | None = None
        try:
            for item in _batched(actions):
                try:
                    if isinstance(item, list):
                        self._do_clients(item)
                    else:
                        self._execute(item)
                except LabError as exc:  # an unknown host in a lazily consumed script
                    loc = item[0].loc if isinstance(item, list) else item.loc
                    raise LabError(f"{loc}: {exc.message}") from exc
        except KeyboardInterrupt:
            interrupted = True
        except _Abort as exc:
            aborted = exc.__cause__ or exc
        except NetestoError as exc:
            aborted = exc
            self._note(str(exc), exc)
        finally:
            self._interrupted = interrupted
            with shield_signals(lambda: self._emit(Notice(host="", text="restoring the hosts, please wait"))):
                self._finish(interrupted=interrupted, aborted=aborted is not None)
        result = self._result(time.time() - t0)
        self._emit(RunFinished(experiments=tuple(result.exps), elapsed=result.elapsed, errors=result.errors,
                               interrupted=interrupted))
        if interrupted:
            exps = ", ".join(map(str, result.exps)) or "none"
            raise RunInterrupted(f"interrupted: flows stopped, hosts restored; the data collected so far is "
                                 f"kept and processed (experiments {exps} in {self.workdir})", result=result)
        if self.errors:
            raise self._summary_error(result)
        return result

    def _note(self, text: str, exc: NetestoError | None = None) -> None:
        self.errors.append(text)
        if self.first_error is None and exc is not None:
            self.first_error = exc
        if self._current is not None:
            self._current.errors.append(text)

    def _summary_error(self, result: RunResult) -> NetestoError:
        lines = "; ".join(self.errors)
        kept = ", ".join(
            f"{e.exp} (from {', '.join(sorted(self.exps[e.exp].fetched)) or 'no host'})" for e in result.experiments
        )
        msg = f"run failed: {lines}. Data kept for experiment(s): {kept or 'none'} in {self.workdir}"
        first = self.first_error
        if first is not None and not isinstance(first, AgentError):
            return first  # a script or lab error: keep its type and location
        if isinstance(first, AgentError):
            err: NetestoError = type(first)(msg, host=first.host, kind=first.kind, detail=result)
            err.message = msg  # the host is already named in the text
            err.args = (msg,)
            return err
        return NetestoError(msg, detail=result)

    def _exp(self, action: RemoteAction | ProcessExp) -> _Exp:
        e = self.exps.get(action.exp)
        if e is None:
            name = getattr(action, "exp_name", "Exp")
            e = _Exp(exp=action.exp, exp_name=name, dir=self.workdir / str(action.exp))
            self.exps[action.exp] = e
            self._emit(ExperimentStarted(exp=e.exp, exp_name=e.exp_name))
        self._current = e
        return e

    def _session(self, name: str) -> _Host:
        """The connected host ``name`` resolves to (hello + clock on first use)."""
        lh = self.lab.resolve(name)
        h = self.hosts.get(lh.name)
        if h is None:
            h = self.hosts[lh.name] = _Host(lab=lh)
        if h.dead:
            raise AgentUnreachable(f"dropped earlier: {h.dead}", host=lh.name)
        if h.client is None:
            try:
                client = self.client_factory(lh, self.lab)
            except AgentError:
                raise
            except NetestoError as exc:
                raise AgentError(str(exc), host=lh.name) from exc
            try:
                info = client.hello()
                h.info = dict(info) if isinstance(info, dict) else {}
                if "protocol" in h.info:
                    from netesto.protocol.version import check_compatible

                    check_compatible(str(h.info["protocol"]), host=lh.name)
                if "claim" in (h.info.get("commands") or ()):  # one controller at a time (older agents: no claim)
                    _claim(client, self.run_id)
                h.client = client
                left = [str(x) for x in h.info.get("unfetched", []) or []]
                h.leftover = frozenset(left)
                if left:
                    self._emit(Notice(host=lh.name, text=(
                        f"holds unfetched data of earlier experiment(s) {', '.join(left)} "
                        "(collect it with 'netesto run --collect' or netesto.controller.collect)")))
                if hasattr(client, "on_event"):
                    client.on_event(lambda ev, _h=lh.name: self._agent_event(_h, ev))
                self._clock(h)
            except BaseException:
                h.client = None
                try:
                    client.close()
                except Exception:
                    pass
                raise
        return h

    def _clock(self, h: _Host, *, force: bool = False) -> None:
        if force or not h.offset_at or time.monotonic() - h.offset_at > self.clock_refresh:
            h.offset, h.rtt = h.client.clock_offset(samples=self.clock_samples)
            h.offset_at = time.monotonic()

    def _drop(self, name: str, exc: AgentError) -> None:
        lh = self.lab.resolve(name)
        h = self.hosts.setdefault(lh.name, _Host(lab=lh))
        if not h.dead:
            h.dead = str(exc)
            self._note(f"{lh.name} unreachable: {exc.message}", exc)
            self._emit(HostError(host=lh.name, error=str(exc), fatal=True))

    def _agent_event(self, host: str, ev: Any) -> None:
        """Engine events relayed by an agent (may run on the client's thread)."""
        data = ev if isinstance(ev, dict) else getattr(ev, "data", {}) or {}
        kind = str(data.get("event", getattr(ev, "event", "")))
        flow = str(data.get("flow", ""))
        exp = data.get("exp")
        if kind == "started" and flow:
            t = data.get("t_wall", data.get("start_wall"))
            if isinstance(t, (int, float)):
                for e in list(self.exps.values()):
                    for rec in e.flows:
                        if rec.spec.flow_id == flow and rec.host == host and rec.start_skew is None:
                            rec.start_skew = start_skew(float(t), rec.start_agent)
        try:
            exp = int(exp) if exp is not None else None
        except (TypeError, ValueError):
            exp = None
        self._emit(FlowProgress(host=host, exp=exp, flow=flow,
                                event=kind, data=dict(data)))

    def _remote(self, name: str, what: Callable[[_Host], Any]) -> Any:
        """Run ``what`` on host ``name``: unreachable -> drop host; refusal -> abort.

        Opening the session (hello, clock offset) is inside the same handling."""
        try:
            h = self._session(name)
            self._check_leftover(h)
            return what(h)
        except AgentUnreachable as exc:
            self._drop(name, exc)
            return None
        except (AgentError, StorageError) as exc:
            self._note(str(exc), exc)
            raise _Abort() from exc

    def _check_leftover(self, h: _Host) -> None:
        """Refuse to use an experiment number whose data from an earlier run the host
        still holds: this run's files would be written over it (the agent keeps data
        per experiment number, and another workdir's counter may reach the same one)."""
        e = self._current
        if e is None or self._collecting or str(e.exp) not in h.leftover:
            return
        self._foreign.add((h.lab.name, e.exp))
        raise AgentError(
            f"holds unfetched data of experiment {e.exp} from an earlier run, which this "
            f"run would overwrite: fetch it first ('netesto run --collect --lab LAB --workdir OTHER_DIR' "
            f"or netesto.controller.collect) or move {self.workdir / 'counter'} past {e.exp}",
            host=h.lab.name, kind="LeftoverData")

    def _execute(self, a: Action) -> None:
        host = getattr(a, "host", "")
        exp = getattr(a, "exp", None) if isinstance(a, (RemoteAction, ProcessExp)) else None
        # Host settings do not open an experiment (the original drew a counter value
        # for them, which the interpreter still does); they are logged with the current one.
        if isinstance(a, (DoServer, GetData, DoTcpdump, ProcessExp)):
            self._exp(a).actions.append(a.to_dict())
        elif self._current is not None:
            self._current.actions.append(a.to_dict())
        self._emit(ActionStarted(kind=a.kind, host=host, exp=exp, text=a.args_text(), loc=str(a.loc)))
        t0 = time.time()
        n_err = len(self.errors)
        try:
            self._dispatch(a)
        finally:
            err = "; ".join(self.errors[n_err:])
            self._emit(ActionFinished(kind=a.kind, host=host, exp=exp, elapsed=time.time() - t0, error=err))

    def _dispatch(self, a: Action) -> None:
        if isinstance(a, Wait):
            self._sleep(a.seconds)
        elif isinstance(a, RandWait):
            self._sleep(self.rng.uniform(a.low, max(a.low, a.high)))
        elif isinstance(a, Echo):
            self._emit(EchoText(text=a.text))
        elif isinstance(a, Debug):
            pass
        elif isinstance(a, DoServer):
            self._do_server(a)
        elif isinstance(a, GetData):
            self._get_data(a.host, self._exp(a))
        elif isinstance(a, ProcessExp):
            self._process(self._exp(a), a)
        elif isinstance(a, SetSysctl):
            settings = {name: list(values) for name, values in a.settings}
            self._changing(a.host, lambda h: h.client.set_sysctl(settings))
        elif isinstance(a, SetModuleParams):
            params = dict(a.params)
            self._changing(a.host, lambda h: h.client.set_module_params(a.module, params))
        elif isinstance(a, SetQdisc):
            agent, dev = self._shape_target(a.host)
            self._changing(agent, lambda h: h.client.set_qdisc(dev, a.qdisc, a.action, a.rate, a.burst, a.limit, a.other))
        elif isinstance(a, SetNetem):
            agent, dev = self._shape_target(a.host)
            self._changing(agent, lambda h: h.client.set_netem(dev, a.delay, a.jitter, a.loss, a.rate, a.limit))
        elif isinstance(a, DoTcpdump):
            e = self._exp(a)
            e.touch(self.lab.resolve(a.host).name)
            server = "X" if a.server in ("X", "x", "") else self.lab.resolve(a.server).test_address
            dev = self.lab.resolve(a.host).dev
            if self._remote(a.host, lambda h: h.client.tcpdump_start(a.exp, dev, server, a.packets)) is not None:
                e.tcpdumps.add(self.lab.resolve(a.host).name)
        else:
            raise NetestoError(f"{a.loc}: the runner does not know action {a.kind}")

    def _shape_target(self, host: str) -> tuple[str, str]:
        lh = self.lab.resolve(host)
        if lh.shape is not None:
            return lh.shape.agent, lh.shape.dev
        return lh.name, lh.dev

    def _changing(self, host: str, what: Callable[[_Host], Any]) -> None:
        def call(h: _Host) -> Any:
            h.changed = True  # even a failed change may have left something to restore
            reply = what(h)
            # e.g. a root qdisc the agent cannot rebuild exactly when it restores
            for warning in _texts(reply, "warnings"):
                self._emit(Notice(host=h.lab.name, text=warning))
            return reply

        self._remote(host, call)

    def _sleep(self, seconds: float) -> None:
        """Sleep (cancellable), delivering the agents' pushed flow events meanwhile."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if self._stop.wait(min(left, 0.25)):
                raise KeyboardInterrupt("run cancelled")
            self._poll_events()

    def _poll_events(self) -> None:
        if self.progress is None:
            return
        for h in list(self.hosts.values()):
            if h.client is None or h.dead or not hasattr(h.client, "poll_events"):
                continue
            try:
                h.client.poll_events(0)
            except NetestoError:
                pass  # a broken connection shows up at the next real request

    def _do_server(self, a: DoServer) -> None:
        e = self._exp(a)
        name = self.lab.resolve(a.host).name
        e.touch(name)
        if a.order >= 1:
            # "after" statistics: only once the flows this host serves have ended
            self._wait_flows(name, e, margin=self.wait_margin)
        if self._remote(name, lambda h: h.client.snapshot(a.exp, a.order, short_name(name))) is not None:
            e.snapshots.add((name, a.order))
        if a.start:
            self._prepare_server(e, name)

    def _prepare_server(self, e: _Exp, name: str) -> int | None:
        if name in e.server_ports:
            return e.server_ports[name]
        reply = self._remote(name, lambda h: h.client.prepare_server(e.exp, e.token))
        if reply is None:
            return None
        port = int(reply["port"] if isinstance(reply, dict) else reply)
        e.server_ports[name] = port
        return port

    def _server_ports(self, e: _Exp, a: DoClient, name: str) -> int | list[int] | None:
        """The test port(s) the flows of ``a`` connect to on server ``name``.

        builtin: the agent's engine server (one port for all flows). iperf3: one
        iperf3 server per flow, ports 5201, 5202, ... (``iperf3_port`` up) per server
        and experiment.
        netperf: the netserver already running there (port 12865).
        """
        if a.driver == "netperf":
            return NETSERVER_PORT
        if a.driver != "iperf3":
            return self._prepare_server(e, name)
        first = self.iperf3_port + e.iperf3_next.get(name, 0)
        ports = list(range(first, first + a.instances))
        if self._remote(name, lambda h: h.client.prepare_server(e.exp, e.token, driver="iperf3", ports=ports)) is None:
            return None
        e.iperf3_next[name] = e.iperf3_next.get(name, 0) + a.instances
        return ports

    def _do_clients(self, batch: list[DoClient]) -> None:
        """Start a batch of DO_CLIENTs at one common instant."""
        t_begin = time.time()
        for a in batch:
            self._check_flow_ids(a, self._pairs)
        for a in batch:
            self._exp(a).actions.append(a.to_dict())
            self._emit(ActionStarted(kind=a.kind, host=a.host, exp=a.exp, text=a.args_text(), loc=str(a.loc)))
        n_err = len(self.errors)
        per_host: dict[str, list[tuple[DoClient, str, int | list[int]]]] = {}
        for a in batch:
            e = self._exp(a)
            client = self.lab.resolve(a.host).name
            server = self.lab.resolve(a.server).name
            e.touch(client)
            e.touch(server)
            port = self._server_ports(e, a, server)
            if port is None:
                continue  # the server was dropped: nothing to connect to
            self._remote(client, lambda h: None)  # connect (hello, clock) or drop
            if self.hosts[client].dead:
                continue
            if a.stats and (client, 0) not in e.snapshots:
                if self._remote(client, lambda h: h.client.snapshot(a.exp, 0, short_name(client))) is not None:
                    e.snapshots.add((client, 0))
            if a.stats:
                e.stats_hosts.add(client)
            per_host.setdefault(client, []).append((a, server, port))
        live = [c for c in per_host if not self.hosts[c].dead]
        for c in live:
            self._remote(c, lambda h: self._clock(h))
        live = [c for c in live if not self.hosts[c].dead]
        if live:
            t_common = time.time() + self.lead + self.lead_per_host * (len(live) - 1)
            for c in live:
                h = self.hosts[c]
                at_agent = t_common + h.offset
                specs: list[FlowSpec] = []
                records: list[FlowRecord] = []
                for a, server, port in per_host[c]:
                    e = self._exp(a)
                    new = expand_do_client(
                        a, client=c, server=server, server_address=self.lab.resolve(server).test_address,
                        port=port, token=e.token, start_at=at_agent,
                    )
                    specs += new
                    for i, s in enumerate(new):
                        records.append(FlowRecord(s, a, c, server, i, t_common + a.delay, at_agent + a.delay))
                by_exp: dict[int, list[FlowSpec]] = {}
                for s in specs:
                    by_exp.setdefault(s.exp, []).append(s)
                if time.time() > at_agent - h.offset:
                    self._emit(Notice(host=c, text=(
                        f"start instructions reached {c} after the scheduled instant (lead {self.lead:g} s "
                        f"+ {self.lead_per_host:g} s/host too short here): its flows start late")))
                for exp_n, exp_specs in by_exp.items():
                    e = self.exps[exp_n]
                    started = self._remote(c, lambda h: h.client.start_flows(exp_n, exp_specs, at_agent))
                    if started is None and self.hosts[c].dead:
                        break
                    ids = {s.flow_id for s in exp_specs}
                    mine = [r for r in records if r.spec.flow_id in ids and r.spec.exp == exp_n]
                    e.flows.extend(mine)
                    e.waited.discard(c)
                    dur = max(r.spec.dur + r.action.delay for r in mine)
                    self._emit(FlowsScheduled(exp=exp_n, host=c, flows=tuple(sorted(ids)), start_at=t_common, dur=dur))
                    for a, server, _ in per_host[c]:
                        if a.exp == exp_n and (c, server) not in e.pings:
                            target = self.lab.resolve(server).test_address
                            pname = short_name(server)  # the agent files it as <client>-<name>
                            until = max(r.end_ctrl for r in mine if r.server == server)
                            if self._ping(c, e, target, pname, until - time.time()) is not None:
                                e.pings.add((c, server))
        err = "; ".join(self.errors[n_err:])
        for a in batch:
            self._emit(ActionFinished(kind=a.kind, host=a.host, exp=a.exp, elapsed=time.time() - t_begin, error=err))

    def _ping(self, client: str, e: _Exp, target: str, name: str, duration: float) -> Any:
        """Ping ``target`` from ``client`` until the pair's last flow ends."""
        h = self.hosts[client]
        if not hasattr(h.client, "ping_start"):
            return None
        try:
            return h.client.ping_start(e.exp, target, name, duration=max(1.0, duration))
        except AgentUnreachable as exc:
            self._drop(client, exc)
        except AgentError as exc:  # ping is an extra: report, keep running
            self._emit(HostError(host=client, error=f"ping to {target}: {exc}"))
        return None

    def _get_data(self, name: str, e: _Exp, *, salvage: bool = False) -> None:
        host = self.lab.resolve(name).name
        if e.fetched.get(host) == e.generation.get(host, 0) and host in e.fetched:
            return  # nothing new since the last GET_DATA (the original's rule)
        complete = self._wait_flows(host, e, margin=2.0 if salvage else self.wait_margin)
        if host in e.tcpdumps:
            self._remote(host, lambda h: h.client.tcpdump_stop(e.exp))
            e.tcpdumps.discard(host)
        if host in e.stats_hosts and (host, 1) not in e.snapshots:
            if self._remote(host, lambda h: h.client.snapshot(e.exp, 1, short_name(host))) is not None:
                e.snapshots.add((host, 1))
        def fetch(h: _Host) -> Any:
            try:
                e.dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create {e.dir}: {exc.strerror or exc}; the agents keep the data") from exc
            return h.client.fetch(e.exp, e.dir)

        paths = self._remote(host, fetch)
        if paths is None:
            return
        if complete:
            e.fetched[host] = e.generation.get(host, 0)
        files = [Path(p) for p in paths]
        size = sum(p.stat().st_size for p in files if p.is_file())
        self._emit(DataStored(host=host, exp=e.exp, files=len(files), bytes=size, dest=str(e.dir)))
        self._skews_from_files(e, host)

    def collect(self) -> RunResult:
        """Fetch every experiment any reachable agent still holds (after a crashed run).

        Flows still running are waited for (up to ``wait_margin``) first.
        """
        t0 = time.time()
        _make_workdir(self.workdir)
        self._collecting = True  # fetching earlier runs' data is the point here
        self._emit(RunStarted(lab=self.lab.name, hosts=tuple(self.lab.names), workdir=str(self.workdir)))
        try:
            for lh in self.lab:
                h = self._remote(lh.name, lambda h: h)
                if h is None:
                    continue
                for name in [str(x) for x in h.info.get("unfetched", []) or []]:
                    if not name.isdigit():
                        self._emit(Notice(host=lh.name, text=f"skipping non-numeric experiment {name!r}"))
                        continue
                    exp = int(name)
                    e = self.exps.get(exp) or _Exp(exp=exp, exp_name="collected", dir=self.workdir / name)
                    self.exps[exp] = e
                    self._current = e
                    e.hosts.add(lh.name)
                    self._remote(lh.name, lambda h: h.client.wait_flows(exp, self.wait_margin))
                    e.dir.mkdir(parents=True, exist_ok=True)
                    paths = self._remote(lh.name, lambda h: h.client.fetch(exp, e.dir))
                    if paths is not None:
                        e.fetched[lh.name] = 0
                        files = [Path(p) for p in paths]
                        size = sum(p.stat().st_size for p in files if p.is_file())
                        self._emit(DataStored(host=lh.name, exp=exp, files=len(files), bytes=size, dest=str(e.dir)))
            for e in self.exps.values():  # what a crashed run left gets the results it never got
                if (e.dir / "flows").is_dir():
                    note = self._run_processing(e)
                    self._emit(ExperimentProcessed(exp=e.exp, path=str(e.dir), note=note))
        except _Abort:
            pass
        finally:
            self._close_clients()
        result = self._result(time.time() - t0)
        self._emit(RunFinished(experiments=tuple(result.exps), elapsed=result.elapsed, errors=result.errors))
        if self.errors:
            raise self._summary_error(result)
        return result

    def _wait_flows(self, host: str, e: _Exp, *, margin: float) -> bool:
        """Wait for every flow ``host`` takes part in, on the client agents that run them.

        False if some are still running after the timeout (their data is then
        fetched again later: at the next GET_DATA or at the end of the run).
        """
        now = time.time()
        involved = [r for r in e.flows if host in (r.host, r.server) and r.host not in e.waited]
        complete = True
        for client in sorted({r.host for r in involved}):
            if self.hosts.get(client) is None or self.hosts[client].dead:
                continue
            ends = [r.end_ctrl for r in involved if r.host == client]
            timeout = wait_timeout(ends, now, margin)
            st = self._remote(client, lambda h: h.client.wait_flows(e.exp, timeout))
            if st is None:
                continue
            if isinstance(st, dict) and st.get("complete") is False:
                complete = False
                self._emit(HostError(host=client, error=(
                    f"flows of experiment {e.exp} still running {timeout:.0f} s after they should have ended: "
                    f"{', '.join(st.get('running', [])) or '?'}")))
            else:
                e.waited.add(client)
            if isinstance(st, dict):
                self._report_failed_flows(client, e, st)
        return complete

    def _report_failed_flows(self, client: str, e: _Exp, st: dict[str, Any]) -> None:
        """A flow that ended in error (refused connection, reset, refused spec...) is an error of
        the experiment (experiment.json's ``errors``) and of the run: the run goes on and the other
        flows' data stands, but it ends with an error (non-zero exit, a failed notebook cell)."""
        ours = {r.spec.flow_id for r in e.flows if r.host == client}
        errors = st.get("errors") or {}
        for flow in st.get("failed") or ():
            if flow not in ours or flow in e.failed_flows or (  # cut short by this run's own interrupt
                    self._interrupted and str(errors.get(flow, "")).startswith("stopped by a stop request")):
                continue
            e.failed_flows.add(flow)
            text = f"flow {flow} of experiment {e.exp} failed: {errors.get(flow) or 'error'}"
            e.errors.append(f"{client}: {text}")
            self.errors.append(f"{client}: {text}")
            if self.first_error is None:
                self.first_error = AgentError(text, host=client, kind="FlowFailed")
            self._emit(HostError(host=client, error=text))

    def _skews_from_files(self, e: _Exp, host: str) -> None:
        from netesto.raw.nflow import read_flow

        for r in e.flows:
            if r.host != host or r.start_skew is not None:
                continue
            path = e.dir / "flows" / f"{r.spec.flow_id}.client.nflow"
            if not path.is_file():
                continue
            try:
                start = read_flow(path).header.get("start_wall")
            except NetestoError:
                continue
            if isinstance(start, (int, float)):
                r.start_skew = start_skew(float(start), r.start_agent)

    def experiment_json(self, e: _Exp) -> dict[str, Any]:
        flows = []
        for r in e.flows:
            a, s = r.action, r.spec
            flows.append({
                "flow_id": s.flow_id, "host": short_name(r.host), "server": short_name(r.server),
                "group": a.group, "instance": r.instance, "test": s.test, "ca": s.ca, "dur": s.dur,
                "delay": a.delay, "req": s.req, "reply": s.reply, "driver": s.driver,
                "local_buffer": s.local_buffer, "remote_buffer": s.remote_buffer, "pacing": s.pacing,
                "rate": s.rate, "interval": s.interval, "instances": a.instances, "exp_name": a.exp_name,
                "start_at": r.start_ctrl, "start_skew": r.start_skew,
            })
        hosts = {}
        for name in sorted(e.hosts):
            h = self.hosts.get(name)
            info = h.info if h else {}
            hosts[short_name(name)] = {
                "kernel": info.get("kernel", ""),
                "hostname": info.get("hostname", ""),
                "agent_version": info.get("agent_version", info.get("package", "")),
                "protocol": info.get("protocol", ""),
                "clock_offset": h.offset if h else None,
                "clock_rtt": h.rtt if h else None,
                "address": self.lab.resolve(name).control,
                "test_address": self.lab.resolve(name).test_address,
                "error": h.dead if h else "",
                "tools": info.get("tools", {}),
            }
        return {
            "schema": 1, "exp": e.exp, "exp_name": e.exp_name, "script": self.script,
            "desc": e.desc, "other": [list(p) for p in e.other], "netesto_version": __version__,
            "flows": flows, "hosts": hosts, "actions": e.actions, "errors": list(e.errors),
            "interrupted": self._interrupted,
            "seed": self.seed, "defines": self.defines, "testbed": self.testbed,
        }

    def _write_json(self, e: _Exp) -> Path:
        path = e.dir / "experiment.json"
        tmp = path.with_suffix(".json.tmp")
        try:
            e.dir.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.experiment_json(e), indent=1, default=str))
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return path

    def _process(self, e: _Exp, a: ProcessExp) -> None:
        e.desc, e.other = a.desc, a.other
        for host in sorted(e.hosts):  # data the script never asked for is still stored
            if not self.hosts.get(host) or not self.hosts[host].dead:
                if host in self.hosts:
                    self._get_data(host, e)
        self._process_stored(e)

    def _process_stored(self, e: _Exp) -> None:
        """experiment.json, then the results (all.exp.out, exp.nc, exp.csv rows, exp.html)."""
        path = self._write_json(e)
        e.processed = True
        self._emit(ExperimentProcessed(exp=e.exp, path=str(path), note=self._run_processing(e)))

    def _run_processing(self, e: _Exp) -> str:
        """Process ``e``'s stored data; '' or a note saying why only the raw data is there."""
        try:
            from netesto.report.experiment import process_experiment
        except ImportError:
            return "results extra not installed: raw data only"
        try:
            process_experiment(self.workdir, e.exp, desc=e.desc, other=e.other)
        except NetestoError as exc:
            note = f"results processing failed (raw data kept): {exc}"
        except Exception as exc:  # results bugs must not lose the run's data
            note = f"results processing failed (raw data kept): {type(exc).__name__}: {exc}"
        else:
            return ""
        self._emit(Notice(host="", text=note))
        return note

    def _finish(self, *, interrupted: bool, aborted: bool) -> None:
        """Stop flows if needed, fetch what is left, write experiment.json, restore, close."""
        live = [h for h in self.hosts.values() if h.client is not None and not h.dead]
        if interrupted or aborted:
            for h in live:
                try:
                    h.client.stop()
                except NetestoError as exc:
                    self._emit(HostError(host=h.lab.name, error=f"stop: {exc}"))
        for e in self.exps.values():
            for host in sorted(e.hosts):  # the flows are stopped: what they wrote is fetched now
                held = self.hosts.get(host)
                if held is None or held.dead or held.client is None or (host, e.exp) in self._foreign:
                    continue
                try:
                    if interrupted:  # the stopped flows' ends (server ones too) finish their files first
                        self._remote(host, lambda h: h.client.wait_flows(e.exp, timeout=3.0))
                    self._get_data(host, e, salvage=aborted or interrupted)
                except _Abort:
                    pass
            if e.processed or not e.dir.exists():
                continue
            try:
                if interrupted and e.flows:  # the partial experiment is processed, and says it is partial
                    self._process_stored(e)
                else:
                    self._write_json(e)
            except StorageError as exc:  # a full disk must not keep the hosts from being restored
                self._note(str(exc), exc)
        for h in self.hosts.values():
            if h.client is None or h.dead or not (h.changed or interrupted or aborted):
                continue
            try:
                done = h.client.restore()
            except NetestoError as exc:
                self._emit(HostError(host=h.lab.name, error=f"restore: {exc}"))
                continue
            for error in _texts(done, "errors"):  # what the agent could not put back as it was
                self._emit(HostError(host=h.lab.name, error=f"restore: {error}"))
        self._close_clients()

    def _close_clients(self) -> None:
        for h in self.hosts.values():
            if h.client is not None:
                try:
                    if "claim" in (h.info.get("commands") or ()):
                        h.client.release()
                except NetestoError:
                    pass  # its lease lapses anyway, and the claim with it
                try:
                    h.client.close()
                except Exception:  # closing is best effort: the run's outcome is already decided
                    pass
                h.client = None

    def _result(self, elapsed: float) -> RunResult:
        exps = tuple(
            ExperimentResult(
                exp=e.exp, exp_name=e.exp_name, path=e.dir,
                hosts=tuple(sorted(e.hosts)), flows=tuple(r.spec.flow_id for r in e.flows),
                errors=tuple(e.errors),
            )
            for e in self.exps.values()
        )
        return RunResult(workdir=self.workdir, experiments=exps, errors=tuple(self.errors), elapsed=elapsed,
                         interrupted=self._interrupted)


def _controller_name() -> str:
    """Who runs this controller, for "lab busy" messages: user@host pid N."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def _texts(reply: Any, key: str) -> list[str]:
    """The strings of a reply's list under ``key`` (none if the reply has no such list)."""
    items = reply.get(key) if isinstance(reply, dict) else None
    return [str(x) for x in items] if isinstance(items, list) else []


def _make_workdir(path: Path) -> None:
    """Create the working directory (a UsageError, not an OSError, when it cannot be one)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"workdir {path}: cannot create it: {exc.strerror or exc}") from exc


def _batched(actions: Iterable[Action]) -> Iterator[Action | list[DoClient]]:
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


def _script_text(script: str | Path, name: str = "<script>") -> tuple[str, str, Path | None]:
    """(text, file name, directory) of a script given as text (called ``name``) or as a path."""
    if isinstance(script, Path) or ("\n" not in script and len(script) < 4096 and Path(script).is_file()):
        from netesto.script.store import read_script

        path = Path(script)
        return read_script(path), str(path), path.resolve().parent
    return str(script), name, None


def run(
    script: str | Path,
    lab: Lab | str | Path,
    workdir: str | Path = ".",
    defines: dict[str, str] | None = None,
    progress: ProgressCallback | None = None,
    *,
    state: State | None = None,
    name: str = "<script>",
    **runner_options: Any,
) -> RunResult:
    """Run a script (text or a file path) on ``lab`` (a Lab or a lab file path).

    Every host the script names is checked against the lab before anything
    runs. Experiment numbers come from ``<workdir>/counter``; data goes to
    ``<workdir>/<exp>/``. Raises the run's first error (an AgentError naming
    the host, a ScriptError, ...) after cleanup; its ``detail`` is the
    :class:`RunResult` when the run got as far as the agents. ``runner_options``
    go to :class:`Runner` (``lead``, ``wait_margin``, ``cancel`` - a
    ``threading.Event`` that, once set, stops the run at its next wait like Ctrl-C).

    ``state`` (a :class:`netesto.script.State`) starts the script with what earlier
    scripts defined (variables, macros, SOURCEd files: a notebook's cells); the
    result's ``state`` is what it holds after this script, also on the RunResult
    of an error's ``detail`` when the run failed at an agent. A ScriptError hands
    back nothing: the caller's state stays as it was. ``name`` is what errors call a
    script given as text (a notebook's ``<cell>``).
    """
    from netesto.script import FileCounter, FileLoader, Interpreter, MemoryCounter, plan

    the_lab = lab if isinstance(lab, Lab) else Lab.from_file(lab)
    text, fname, sdir = _script_text(script, name)
    wd = Path(workdir)
    _make_workdir(wd)
    search = [d for d in (Path.cwd(), sdir, wd.resolve()) if d is not None]
    search = list(dict.fromkeys(search))
    defs = dict(defines or {})
    runner = Runner(the_lab, wd, progress=progress, script=text, defines=defs, **runner_options)
    # A dry plan first: an unknown host fails here, before any agent is touched.
    suffix = the_lab.host_suffix
    # The plan's interpreter copies ``state``, so planning changes nothing.
    runner.validate(plan(text, file=fname, loader=FileLoader(list(map(str, search))), counter=MemoryCounter(),
                         defines=defs, host_suffix=suffix, state=state))
    interp = Interpreter(loader=FileLoader(list(map(str, search))), counter=FileCounter(wd / "counter"), defines=defs,
                         host_suffix=suffix, state=state)
    try:
        result = runner.run(interp.run_text(text, file=fname))
    except NetestoError as exc:
        # What the script defined before an agent failed was defined; a script error
        # (here: one only the real counter shows) keeps the caller's state instead.
        if isinstance(exc.detail, RunResult) and not isinstance(exc, ScriptError):
            exc.detail = replace(exc.detail, state=interp.state())
        raise
    return replace(result, state=interp.state())


def collect(
    lab: Lab | str | Path, workdir: str | Path = ".", progress: ProgressCallback | None = None,
    **runner_options: Any,
) -> RunResult:
    """Fetch the data agents still hold (e.g. after the controller died mid-run) into ``workdir``."""
    the_lab = lab if isinstance(lab, Lab) else Lab.from_file(lab)
    return Runner(the_lab, workdir, progress=progress, **runner_options).collect()


__all__ = ["ExperimentResult", "FlowRecord", "RunResult", "Runner", "collect", "default_client_factory", "run"]
