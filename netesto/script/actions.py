"""Typed, immutable Actions: what a script asks the controller to do.

The interpreter turns script text into a stream of these; the controller's
runner executes them; ``netesto plan`` prints them. Every action carries the
:class:`Location` of the command that produced it (for a command inside a
macro, the macro body line, with the RUN chain in ``loc.stack``) and fully
resolved arguments: no ``$variables``, no defaults left to fill, host names
already carrying the HOST_SUFFIX.

Remote actions (those with a ``host``) also carry ``exp`` (the experiment
number, an int) and ``exp_name``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from netesto.linkshape import PARAMS, Step, parse_shape, split_shape

@dataclass(frozen=True)
class Location:
    """Where a command came from: 1-based line and column, and the line's text."""

    file: str = "<script>"
    line: int = 0
    column: int = 1
    text: str = ""
    stack: tuple[str, ...] = ()  # "RUN name at file:line" frames, outermost first

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def origin(self) -> str:
        """Where a run-time error points: the user's own line first, then the macro line it came to.

        >>> Location("inlib", 171, stack=("RUN OneFlowStream at <cell>:3", "RUN MServerStream at inlib:393")).origin()
        '<cell>:3 (RUN OneFlowStream) > inlib:171'
        >>> Location("t.nts", 4).origin()
        't.nts:4'
        """
        if not self.stack:
            return str(self)
        name, _, place = self.stack[0].partition(" at ")
        return f"{place} ({name}) > {self}"


@dataclass(frozen=True)
class Action:
    """Base of every action. ``kind`` is the script command it came from."""

    kind: ClassVar[str] = ""
    loc: Location = field(default_factory=Location, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"action": kind, "loc": "file:line", ...args}``."""
        out: dict[str, Any] = {"action": self.kind, "loc": str(self.loc)}
        for f in dataclasses.fields(self):
            if f.name == "loc":
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def args_text(self) -> str:
        """``key=value`` text of the arguments, for one-line plans."""
        parts = []
        for key, value in self.to_dict().items():
            if key in ("action", "loc", "host"):
                continue
            if isinstance(value, list):
                value = ",".join(str(v) for v in value)
            parts.append(f"{key}={value}")
        return " ".join(parts)


@dataclass(frozen=True)
class RemoteAction(Action):
    """An action carried out by the agent on ``host``."""

    host: str = ""
    exp: int = 0
    exp_name: str = "Exp"


@dataclass(frozen=True)
class DoServer(RemoteAction):
    """Snapshot host stats into ``<exp>/<order>/``; with start, run the test server."""

    kind: ClassVar[str] = "DO_SERVER"
    order: int = 0
    start: int = 0


@dataclass(frozen=True)
class DoClient(RemoteAction):
    """Start ``instances`` flows from ``host`` to ``server`` (one DO_CLIENT line).

    ``req``/``reply`` are byte counts (suffixes already expanded); ``req`` is 0
    for stream tests. ``dur`` and ``delay`` are seconds. ``pacing`` is a max
    pacing rate in bits/s (0 = none), ``rate`` a UDP_STREAM target in bits/s,
    ``interval`` the TCP_INFO sampling interval in seconds. ``group`` is never 0
    here: the interpreter numbers groups 1, 2, 3... per experiment. ``crr_close``
    (TCP_CRR only) says who ends each transaction's connection: ``rst``, ``client``
    or ``server`` (:data:`~netesto.protocol.flowspec.CRR_CLOSES`).

    A stochastic workload (docs/workloads.md): ``req_dist``/``reply_dist``/``gap`` are
    distributions in :mod:`netesto.workload`'s canonical text ("" = the constant
    ``req``/``reply``, which then hold the distributions' means, and no gap);
    ``open_loop`` sends requests at their arrival times (TCP_CRR), every ``gap`` apart or,
    with ``load`` (0..1 of the bottleneck), at Poisson times the controller derives from the
    bottleneck's rate (``bottleneck`` bits/s, 0 = the lab's testbed); ``seed`` is the
    DO_CLIENT's seed, -1 = derived from the run's.
    """

    kind: ClassVar[str] = "DO_CLIENT"
    server: str = ""
    ca: str = "reno"
    dur: float = 20.0
    delay: float = 0.0
    instances: int = 1
    req: int = 1_048_576
    req_text: str = "1M"
    reply: int = 1
    stats: int = 0
    local_buffer: int = 0
    remote_buffer: int = 0
    test: str = "TCP_RR"
    group: int = 1
    driver: str = "builtin"
    pacing: int = 0
    rate: int = 0
    interval: float = 0.01
    crr_close: str = "rst"
    req_dist: str = ""
    reply_dist: str = ""
    gap: str = ""
    open_loop: bool = False
    load: float = 0.0
    bottleneck: int = 0
    seed: int = -1
    trace: str = ""  # ends whose host records tcp_probe: client, server, both, none ("": the run's default)

    @property
    def workload(self) -> bool:
        return bool(self.req_dist or self.reply_dist or self.gap or self.open_loop)


@dataclass(frozen=True)
class DoTrace(RemoteAction):
    """Record tcp_probe events of every flow of ``exp`` that has an end on ``host`` (from its next
    DO_CLIENTs on), with ``buffer_kb`` of ring buffer per CPU."""

    kind: ClassVar[str] = "DO_TRACE"
    buffer_kb: int = 4096


@dataclass(frozen=True)
class DoWatch(RemoteAction):
    """Sample every ``interval`` s the TCP sockets of ``host`` that match the filter, until the host's
    GET_DATA of ``exp``: ``ports`` (either end), ``lports``/``rports`` (local/remote end), ``addrs``
    (addresses or prefixes of either end), ``cgroup`` (a cgroup v2 directory), ``pid`` (a process and its
    children). Each socket becomes a flow of the experiment, named ``<name>:<port>:<port>``."""

    kind: ClassVar[str] = "DO_WATCH"
    name: str = "watch"
    ports: tuple[int, ...] = ()
    lports: tuple[int, ...] = ()
    rports: tuple[int, ...] = ()
    addrs: tuple[str, ...] = ()
    cgroup: str = ""
    pid: int = 0
    interval: float = 0.01


@dataclass(frozen=True)
class GetData(RemoteAction):
    """Fetch (and, once stored, release) the host's data for experiment ``exp``."""

    kind: ClassVar[str] = "GET_DATA"


@dataclass(frozen=True)
class SetSysctl(RemoteAction):
    """Set sysctls: ``settings`` is ((name, (v1, v2, ...)), ...), allowlist-checked."""

    kind: ClassVar[str] = "SET_SYSCTL"
    settings: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class SetModuleParams(RemoteAction):
    """Set kernel module parameters: ``params`` is ((name, value), ...)."""

    kind: ClassVar[str] = "SET_MODULE_PARAMS"
    module: str = ""
    params: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SetNetem(RemoteAction):
    """Emulate delay/jitter/loss/rate on the host's egress (delay 0 = remove).

    ``delay`` and ``jitter`` in milliseconds, ``loss`` in percent, ``rate`` in
    bits/s (0 = unlimited), ``limit`` in packets.
    """

    kind: ClassVar[str] = "SET_NETEM"
    delay: float = 0.0
    limit: int = 1000
    loss: float = 0.0
    jitter: float = 0.0
    rate: int = 0


@dataclass(frozen=True)
class SetQdisc(RemoteAction):
    """Install a root qdisc; empty ``action`` means delete the root, then add."""

    kind: ClassVar[str] = "SET_QDISC"
    qdisc: str = ""
    action: str = ""
    rate: str = ""
    burst: str = ""
    limit: str = ""
    other: str = ""


@dataclass(frozen=True)
class SetLink(RemoteAction):
    """Change the bottleneck toward ``host`` while the next DO_CLIENTs' flows run.

    Each of ``rate``, ``delay``, ``jitter``, ``loss``, ``buffer`` is empty or as written:
    a value taken ``at`` seconds after the flows start, or a named shape of
    :mod:`netesto.linkshape` (``step(50mbit,10mbit,at=2)``) carrying its own times;
    :meth:`steps` reads them. ``trace`` (as written) makes the link deliver at the
    opportunities of ``trace_file`` (Mahimahi format) from the flows' start; ``buffer``
    is then that link's queue, in bytes or packets (``100pkt``). When the flows end the
    link takes back the shape it had.
    """

    kind: ClassVar[str] = "SET_LINK"
    at: float = 0.0
    rate: str = ""
    delay: str = ""
    jitter: str = ""
    loss: str = ""
    buffer: str = ""
    trace: str = ""
    trace_file: str = ""

    def steps(self) -> tuple[Step, ...]:
        """The steps this line asks for (checked when the script was read), in order of time per parameter."""
        out: list[Step] = []
        for param in PARAMS:
            text = getattr(self, param)
            if text and not (param == "buffer" and self.trace):
                out += parse_shape(param, text, self.at if split_shape(text) is None else 0.0)
        return tuple(out)


@dataclass(frozen=True)
class DoTcpdump(RemoteAction):
    """Capture ``packets`` packets to/from ``server`` (``X`` = unfiltered)."""

    kind: ClassVar[str] = "DO_TCPDUMP"
    server: str = "X"
    packets: int = 10000


@dataclass(frozen=True)
class Wait(Action):
    """Sleep ``seconds`` (a float)."""

    kind: ClassVar[str] = "WAIT"
    seconds: float = 0.0


@dataclass(frozen=True)
class RandWait(Action):
    """Sleep a uniform random time in [low, high]."""

    kind: ClassVar[str] = "RAND_WAIT"
    low: float = 0.0
    high: float = 0.0


@dataclass(frozen=True)
class ProcessExp(Action):
    """Post-process experiment ``exp``: summaries, exp.csv rows, dataset, report.

    ``desc`` and ``other`` are the DESC/OTHER in force (OTHER parsed to pairs).
    """

    kind: ClassVar[str] = "PROCESS_EXP"
    exp: int = 0
    desc: str = ""
    other: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Echo(Action):
    """Print ``text`` (ECHO)."""

    kind: ClassVar[str] = "ECHO"
    text: str = ""


@dataclass(frozen=True)
class Debug(Action):
    """DEBUG / DEBUG_DISABLE / DEBUG_RESTORE outcome: debug output on or off."""

    kind: ClassVar[str] = "DEBUG"
    enabled: bool = False


ACTION_TYPES: tuple[type[Action], ...] = (
    DoServer,
    DoClient,
    GetData,
    SetSysctl,
    SetModuleParams,
    SetNetem,
    SetQdisc,
    SetLink,
    DoTcpdump,
    DoTrace,
    DoWatch,
    Wait,
    RandWait,
    ProcessExp,
    Echo,
    Debug,
)

__all__ = [
    "ACTION_TYPES",
    "Action",
    "Debug",
    "DoClient",
    "DoServer",
    "DoTcpdump",
    "DoTrace",
    "DoWatch",
    "Echo",
    "GetData",
    "Location",
    "ProcessExp",
    "RandWait",
    "RemoteAction",
    "SetLink",
    "SetModuleParams",
    "SetNetem",
    "SetQdisc",
    "SetSysctl",
    "Wait",
]
