"""What a run keeps of each experiment: its runner-side state, its flows and ``experiment.json``.

``experiment.json`` (schema 1) is written next to the experiment's fetched files;
the results package reads it. Its layout is the file format: change nothing here
without changing the readers.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from netesto._version import __version__
from netesto.controller.lab import Lab
from netesto.controller.schedule import start_skew
from netesto.errors import NetestoError, StorageError, UsageError
from netesto.protocol.flowspec import FlowSpec
from netesto.protocol.replies import HelloReply
from netesto.raw.experiment import ExperimentRecord, FlowEntry, short_host
from netesto.raw.jsontext import dumps
from netesto.script.actions import DoClient

if TYPE_CHECKING:
    from netesto.controller.session import HostSession


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
    never_started: bool = False  # its client's file says its data phase never began
    scheduled_agent: float = math.nan  # when its batch was scheduled, in the client agent's time
    teaches_lead: bool = False  # its readiness says how long a start lead its host needs (startlead)

    @property
    def end_ctrl(self) -> float:
        return self.start_ctrl + self.spec.dur

    def start_notice(self) -> str:
        """The run's line for a flow that began more than one sampling interval after its scheduled
        instant, or never began ('' for one that began in time, or whose start is not known yet)."""
        where = f"flow {self.spec.flow_id} on {self.host}"
        if self.never_started:
            return f"{where} never started (its data phase never began)"
        interval = self.spec.interval
        if self.start_skew is None or self.start_skew <= interval:
            return ""
        return (f"{where} started {self.start_skew * 1e3:.0f} ms after its scheduled instant (more than "
                f"one sampling interval, {interval * 1e3:g} ms)")


@dataclass
class ExpState:
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
    starts_noted: set[str] = field(default_factory=set)  # flows whose late (or missing) start was said
    desc: str = ""
    other: tuple[tuple[str, str], ...] = ()
    processed: bool = False
    observing: Any = None  # its traces and watches (netesto.controller.observe.Observing)
    shape: dict[str, dict[str, Any]] | None = None  # short host -> what shaped its path at the first flows
    measured: dict[str, Any] = field(default_factory=dict)  # the testbed values those readings give

    def touch(self, host: str) -> None:
        self.hosts.add(host)
        self.generation[host] = self.generation.get(host, 0) + 1


@dataclass(frozen=True)
class RunFacts:
    """What every experiment.json of a run repeats: the script, its seed and defines, the testbed."""

    script: str = ""
    seed: int = 0
    defines: Mapping[str, str] = field(default_factory=dict)
    testbed: Mapping[str, Any] = field(default_factory=dict)


def experiment_json(e: ExpState, *, lab: Lab, hosts: Mapping[str, HostSession], facts: RunFacts,
                    interrupted: bool) -> dict[str, Any]:
    """The experiment.json document of ``e``: a :class:`~netesto.raw.experiment.ExperimentRecord`,
    the one shape results read it back through."""
    flows = []
    for r in e.flows:
        a, s = r.action, r.spec
        flows.append(FlowEntry(s.flow_id, short_host(r.host), short_host(r.server), a.group, r.instance, {
            "test": s.test, "ca": s.ca, "dur": s.dur,
            "delay": a.delay, "req": s.req, "reply": s.reply, "driver": s.driver,
            "local_buffer": s.local_buffer, "remote_buffer": s.remote_buffer, "pacing": s.pacing,
            "rate": s.rate, "interval": s.interval, "instances": a.instances, "exp_name": a.exp_name,
            "start_at": r.start_ctrl, "start_skew": r.start_skew,
        }))
    doc_hosts = {}
    for name in sorted(e.hosts):
        h = hosts.get(name)
        info = h.info if h else HelloReply()
        doc_hosts[short_host(name)] = {
            "kernel": info.kernel,
            "hostname": info.hostname,
            "agent_version": info.package,
            "protocol": info.protocol,
            "clock_offset": h.offset if h else None,
            "clock_rtt": h.rtt if h else None,
            "address": lab.resolve(name).control,
            "test_address": lab.resolve(name).test_address,
            "error": h.dead if h else "",
            "tools": dict(info.tools),
        }
        if e.shape is not None and short_host(name) in e.shape:
            doc_hosts[short_host(name)]["shape"] = e.shape[short_host(name)]
    return ExperimentRecord(
        exp=e.exp, exp_name=e.exp_name, script=facts.script, desc=e.desc, other=e.other,
        netesto_version=__version__, flows=tuple(flows), hosts=doc_hosts, actions=tuple(e.actions),
        errors=tuple(e.errors), interrupted=interrupted, seed=facts.seed, defines=dict(facts.defines),
        testbed={**facts.testbed, **e.measured},  # what the kernels said at its start, over the lab file's
    ).to_json()


def write_json(e: ExpState, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as ``<exp dir>/experiment.json`` (atomically; a StorageError when it cannot)."""
    path = e.dir / "experiment.json"
    tmp = path.with_suffix(".json.tmp")
    try:
        e.dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(dumps(doc, indent=1))  # strict: NaN as null
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def skews_from_files(e: ExpState, host: str) -> None:
    """Start skews of ``host``'s flows that no event gave, from their fetched client files (and
    which of them never began: the engine's file of such a flow says ``started: false``)."""
    from netesto.raw.nflow import read_flow

    for r in e.flows:
        if r.host != host or r.start_skew is not None:
            continue
        path = e.dir / "flows" / f"{r.spec.flow_id}.client.nflow"
        if not path.is_file():
            continue
        try:
            header = read_flow(path).header
        except NetestoError:
            continue
        start = header.get("start_wall")
        if header.get("started") is False:
            r.never_started = True
        elif isinstance(start, (int, float)):
            r.start_skew = start_skew(float(start), r.start_agent)


def start_notices(e: ExpState, host: str | None = None) -> list[str]:
    """The run's lines for the flows (of client ``host``, or all) that started late or never, each once."""
    out = []
    for r in e.flows:
        if (host is None or r.host == host) and r.spec.flow_id not in e.starts_noted and (text := r.start_notice()):
            e.starts_noted.add(r.spec.flow_id)
            out.append(text)
    return out


NO_RESULTS = "results extra not installed: raw data only"


def process_results(workdir: Path, e: ExpState, warnings: list[str] | None = None, steady: str | None = None) -> str:
    """Process ``e``'s stored data (``steady``: the warm-up left out of its per-flow numbers); '' or a
    note saying why only the raw data is there. The flows the results found limited by their hosts'
    buffers go into ``warnings``."""
    try:
        from netesto.report.experiment import process_experiment
    except ImportError:
        return NO_RESULTS
    try:
        done = process_experiment(workdir, e.exp, desc=e.desc, other=e.other, steady=steady)
    except NetestoError as exc:
        return f"results processing failed (raw data kept): {exc}"
    except Exception as exc:  # results bugs must not lose the run's data
        return f"results processing failed (raw data kept): {type(exc).__name__}: {exc}"
    if warnings is not None:
        warnings += getattr(done, "host_limited", [])
    return ""


def make_workdir(path: Path) -> None:
    """Create the working directory (a UsageError, not an OSError, when it cannot be one)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"workdir {path}: cannot create it: {exc.strerror or exc}") from exc


__all__ = [
    "ExpState",
    "NO_RESULTS",
    "FlowRecord",
    "RunFacts",
    "experiment_json",
    "make_workdir",
    "process_results",
    "skews_from_files",
    "start_notices",
    "write_json",
]
