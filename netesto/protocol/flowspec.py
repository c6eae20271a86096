"""FlowSpec: one flow the engine runs, as the agent and the CLI describe it.

A DO_CLIENT becomes ``instances`` FlowSpecs. Sizes are bytes, rates bits/s,
times seconds (``start_at`` is absolute wall-clock time, ``time.time()``
scale, on the host that runs the client side; ``None`` = start now).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from netesto.errors import TrafficError, UsageError
from netesto.policy import MAX_FLOW_SECONDS
from netesto.protocol.names import check_name, is_name
from netesto.vocab import DRIVERS, TEST_TYPES
from netesto.workload import SIZE, TIME, DistError
from netesto.workload import parse as parse_dist

# How a TCP_CRR transaction's connection ends:
# "rst": the client closes first with SO_LINGER 0 (a reset): no TIME_WAIT on either end (neper's default);
# "client": the client closes first (FIN): TIME_WAIT on the client (neper --time_wait);
# "server": the server closes after its reply, the client closes at its EOF: TIME_WAIT on the server (netperf).
CRR_CLOSES = ("rst", "client", "server")
WORKLOAD_TESTS = ("TCP_RR", "TCP_CRR")  # the tests whose sizes and gaps may be drawn (docs/workloads.md)
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class FlowSpec:
    """One flow (one DO_CLIENT instance)."""

    flow_id: str  # "<client>-<server>-<group>-<instance>", unique within an experiment
    test: str
    server: str
    port: int
    ca: str = "cubic"
    dur: float = 10.0
    start_at: float | None = None
    req: int = 1
    reply: int = 1
    local_buffer: int = 0
    remote_buffer: int = 0
    pacing: int = 0
    rate: int = 0
    interval: float = 0.01
    token: str = ""
    driver: str = "builtin"  # "builtin", "iperf3" or "netperf"
    exp: int = 0  # raw files go to <datadir>/<exp>/flows/<flow_id>.<side>.nflow
    meta: tuple[tuple[str, str], ...] = ()
    # TCP_CRR: who ends each transaction's connection (see CRR_CLOSES)
    crr_close: str = "rst"
    # A stochastic workload (TCP_RR, TCP_CRR; docs/workloads.md): the distributions of request and reply
    # sizes and of the wait before each request, in netesto.workload's canonical text ("": the constant
    # req/reply, no wait); the draws come from the streams of (seed, stream) (netesto.workload.draws).
    req_dist: str = ""
    reply_dist: str = ""
    gap: str = ""  # closed loop: the pause after each reply; open loop: the time between arrivals
    open_loop: bool = False  # TCP_CRR: each request at its arrival time on a connection of its own
    seed: int = 0
    stream: int = 0  # the flow's instance in its DO_CLIENT: its own streams of the seed's draws
    link_bps: int = 0  # the bottleneck rate the workload's load and slowdowns refer to, bits/s (0: unknown)
    load: float = 0.0  # the load of the bottleneck asked for (load=; 0: none)

    def __post_init__(self) -> None:
        if not is_name(self.flow_id):  # it names files on both ends: never a path
            try:
                check_name("flow id", self.flow_id)
            except UsageError as exc:
                raise TrafficError(exc.message) from None
        for name in ("dur", "interval", "start_at"):  # NaN passes every comparison below
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise TrafficError(f"flow {self.flow_id}: {name} must be a finite number, got {value!r}")
        if self.test not in TEST_TYPES:
            raise TrafficError(
                f"flow {self.flow_id}: unknown test {self.test!r}; one of {', '.join(TEST_TYPES)}"
            )
        if not 0 < self.dur <= MAX_FLOW_SECONDS:  # the engine's server refuses longer ones
            raise TrafficError(f"flow {self.flow_id}: dur must be in (0, {MAX_FLOW_SECONDS:g}] s, got {self.dur}")
        if not 0.001 <= self.interval <= 60:
            raise TrafficError(
                f"flow {self.flow_id}: interval must be 0.001..60 s, got {self.interval}"
            )
        if self.driver not in DRIVERS:
            raise TrafficError(
                f"flow {self.flow_id}: unknown driver {self.driver!r}; one of {', '.join(DRIVERS)}"
            )
        if self.crr_close not in CRR_CLOSES:
            raise TrafficError(
                f"flow {self.flow_id}: unknown crr_close {self.crr_close!r}; one of {', '.join(CRR_CLOSES)}"
            )
        if not 0 < self.port < 65536:
            raise TrafficError(f"flow {self.flow_id}: bad port {self.port}")
        for name in ("req", "reply", "local_buffer", "remote_buffer", "pacing", "rate", "link_bps", "stream"):
            if getattr(self, name) < 0:
                raise TrafficError(f"flow {self.flow_id}: {name} must be >= 0")
        if self.workload:
            self._check_workload()

    @property
    def workload(self) -> bool:
        """True when the flow draws its sizes or gaps (or arrives open loop): see docs/workloads.md."""
        return bool(self.req_dist or self.reply_dist or self.gap or self.open_loop)

    def _check_workload(self) -> None:
        where = f"flow {self.flow_id}"
        if self.test not in WORKLOAD_TESTS:
            raise TrafficError(f"{where}: drawn sizes and gaps are for {' and '.join(WORKLOAD_TESTS)}, not {self.test}")
        if self.open_loop and self.test != "TCP_CRR":
            raise TrafficError(f"{where}: open-loop arrivals are for TCP_CRR (a connection per request)")
        if self.driver != "builtin":
            raise TrafficError(f"{where}: drawn sizes and gaps need the builtin driver, not {self.driver}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise TrafficError(f"{where}: seed must be an integer in 0..{MAX_SEED}, got {self.seed!r}")
        if not (isinstance(self.load, (int, float)) and 0 <= self.load <= 1):
            raise TrafficError(f"{where}: load must be in 0..1, got {self.load!r}")
        for name, kind in (("req_dist", SIZE), ("reply_dist", SIZE), ("gap", TIME)):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise TrafficError(f"{where}: {name} must be a distribution's text, got {text!r}")
            if text:
                try:
                    parse_dist(text, kind)
                except DistError as exc:
                    raise TrafficError(f"{where}: bad {name} {text[:80]!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["meta"] = [list(p) for p in self.meta]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FlowSpec":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise TrafficError(f"unknown flow spec fields: {', '.join(sorted(unknown))}")
        kwargs = dict(data)
        kwargs["meta"] = tuple(tuple(p) for p in data.get("meta", ()))
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise TrafficError(f"bad flow spec: {exc}") from exc


__all__ = ["CRR_CLOSES", "FlowSpec", "MAX_SEED", "WORKLOAD_TESTS"]
