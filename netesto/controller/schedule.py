"""Pure helpers of the runner: DO_CLIENT -> FlowSpecs, start instants, skews.

Clock convention: an agent's ``offset`` is ``agent_time - controller_time``
(what ``AgentClient.clock_offset`` returns), so a controller instant ``t``
is ``t + offset`` on that agent and an agent instant ``a`` is ``a - offset``
here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from netesto.errors import ScriptError
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.experiment import FlowId, short_host
from netesto.script.actions import DoClient
from netesto.workload import SIZE, poisson_gap, seed_of
from netesto.workload import parse as parse_dist


def flow_id(client: str, server: str, group: int, instance: int) -> str:
    """``<client>-<server>-<group>-<instance>`` with short names (the contract).

    >>> flow_id("h1.lab", "h2.lab", 3, 0)
    'h1-h2-3-0'
    """
    return str(FlowId.of(client, server, group, instance))


def expand_do_client(
    action: DoClient,
    *,
    client: str,
    server: str,
    server_address: str,
    port: int | Sequence[int],
    token: str = "",
    start_at: float | None = None,
    run_seed: int = 0,
    link_bps: int = 0,
) -> list[FlowSpec]:
    """The FlowSpecs of one DO_CLIENT: one per instance.

    ``client``/``server`` are lab host names; ``start_at`` is the DO_CLIENT's
    common instant in the client agent's time (``None`` = start at once);
    each flow starts ``action.delay`` seconds after it. ``port`` is the
    server's test port, or one port per instance (iperf3 serves one test per
    port).
    """
    ports = [port] * action.instances if isinstance(port, int) else list(port)
    if len(ports) != action.instances:
        raise ValueError(f"{len(ports)} ports for {action.instances} instances")
    at = None if start_at is None else start_at + action.delay
    meta = (
        ("host", short_host(client)),
        ("server", short_host(server)),
        ("group", str(action.group)),
        ("exp_name", action.exp_name),
        ("instances", str(action.instances)),
    )
    drawn = _workload(action, run_seed, link_bps) if action.workload else {}
    specs = []
    for i in range(action.instances):
        specs.append(
            FlowSpec(
                flow_id=flow_id(client, server, action.group, i),
                test=action.test,
                server=server_address,
                port=ports[i],
                ca=action.ca,
                dur=action.dur,
                start_at=at,
                req=action.req,
                reply=action.reply,
                local_buffer=action.local_buffer,
                remote_buffer=action.remote_buffer,
                pacing=action.pacing,
                rate=action.rate,
                interval=action.interval,
                crr_close=action.crr_close,
                token=token,
                driver=action.driver,
                exp=action.exp,
                meta=meta + (("instance", str(i)),),
                **({**drawn, "stream": i} if drawn else {}),
            )
        )
    return specs


def _workload(action: DoClient, run_seed: int, link_bps: int) -> dict[str, Any]:
    """The FlowSpec fields of a DO_CLIENT's workload: its seed, and gaps from its load= (docs/workloads.md)."""
    link = action.bottleneck or link_bps
    gap = action.gap
    if action.load:
        if link <= 0:
            loc = action.loc
            raise ScriptError(f"DO_CLIENT: load={action.load:g} needs the bottleneck's rate: this lab has no "
                              "testbed", file=loc.file, line=loc.line, column=loc.column, text=loc.text,
                              hint="give bottleneck=RATE, e.g. bottleneck=100mbit")
        sizes = [parse_dist(d, SIZE).mean if d else float(n)
                 for d, n in ((action.req_dist, action.req), (action.reply_dist, action.reply))]
        gap = poisson_gap(max(sizes), action.load, link, action.instances)
    return {"req_dist": action.req_dist, "reply_dist": action.reply_dist, "gap": gap,
            "open_loop": action.open_loop, "load": action.load, "link_bps": link,
            "seed": action.seed if action.seed >= 0 else seed_of(run_seed, action.exp, action.group)}


def agent_instants(now: float, lead: float, offsets: Mapping[str, float]) -> dict[str, float]:
    """One common controller instant ``now + lead`` expressed in each agent's time.

    >>> agent_instants(100.0, 0.5, {"a": 2.0, "b": -1.0})
    {'a': 102.5, 'b': 99.5}
    """
    t = now + lead
    return {host: t + off for host, off in offsets.items()}


def to_controller_time(agent_time: float, offset: float) -> float:
    """An agent instant in controller time.

    >>> to_controller_time(102.5, 2.0)
    100.5
    """
    return agent_time - offset


def start_skew(actual_agent: float, scheduled_agent: float) -> float:
    """Seconds a flow started after (positive) or before its scheduled instant.

    Both are in the same agent's time, so the clock offset cancels.
    """
    return actual_agent - scheduled_agent


def wait_timeout(flow_ends: list[float], now: float, margin: float) -> float:
    """How long to wait for flows ending at ``flow_ends`` (controller time).

    >>> wait_timeout([10.0, 12.0], 11.0, 5.0)
    6.0
    >>> wait_timeout([], 11.0, 5.0)
    5.0
    """
    remaining = max((end - now for end in flow_ends), default=0.0)
    return max(remaining, 0.0) + margin


__all__ = [
    "agent_instants",
    "expand_do_client",
    "flow_id",
    "start_skew",
    "to_controller_time",
    "wait_timeout",
]
