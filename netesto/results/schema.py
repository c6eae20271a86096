"""The documented schema of an experiment Dataset: dims, variables, units, CF names.

An experiment's :class:`xarray.Dataset` (``<exp>/exp.nc``) has

dims
    ``flow`` (one entry per flow, labelled by its flow_id), ``time`` (seconds
    since the experiment start on the common sampling grid: every flow's
    samples are placed at ``round((t_wall - clock_offset - t0) / interval)``),
    ``node`` and ``counter`` for host-level statistics.
coords
    per flow: see :data:`FLOW_COORDS`; ``time``; ``node`` (host names) and
    ``counter`` (``section.name`` of /proc/net/snmp, netstat, interfaces).
data variables
    :data:`TIME_SERIES` on (flow, time), :data:`FLOW_SUMMARIES` on (flow,),
    ``host_before``/``host_after``/``host_delta`` on (node, counter).
attrs
    ``schema_version``, ``exp``, ``exp_name``, ``script``, ``desc``, ``other``
    (JSON), ``netesto_version``, ``hosts`` (JSON: kernel, agent version, clock
    offset/rtt per host), ``sysctls`` (JSON per host), ``start_wall`` (t0,
    controller clock), ``interval``, ``start_skew_max``, ``errors`` (JSON list
    of raw files that could not be read), ``created``.

Every variable carries ``attrs["units"]`` (UDUNITS spelling) and a
``long_name``; CF ``standard_name`` only where CF defines one.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class VarSpec:
    """One data variable of the experiment Dataset."""

    name: str
    units: str
    long_name: str
    standard_name: str = ""
    dtype: str = "float64"


FLOW_COORDS: tuple[VarSpec, ...] = (
    VarSpec("host", "", "client host (short name)", dtype="str"),
    VarSpec("server", "", "server host (short name)", dtype="str"),
    VarSpec("group", "1", "DO_CLIENT group number", dtype="int64"),
    VarSpec("instance", "1", "instance within the group (0-based)", dtype="int64"),
    VarSpec("test", "", "test type (TCP_STREAM, TCP_RR, ...)", dtype="str"),
    VarSpec("ca", "", "congestion control", dtype="str"),
    VarSpec("req", "bytes", "request size", dtype="int64"),
    VarSpec("reply", "bytes", "reply size", dtype="int64"),
    VarSpec("driver", "", "flow driver (builtin, iperf3, netperf)", dtype="str"),
    VarSpec("delay", "s", "start delay of the flow"),
    VarSpec("dur", "s", "requested duration"),
    VarSpec("local_port", "1", "client TCP port (0 if unknown)", dtype="int64"),
    VarSpec("remote_port", "1", "server TCP port (0 if unknown)", dtype="int64"),
    VarSpec("start", "s", "first sample of the flow, seconds after the experiment start"),
)

# (flow, time) variables. "sender" = the side that sends the data (client,
# server for TCP_MAERTS); TCP state comes from the sender's socket.
TIME_SERIES: tuple[VarSpec, ...] = (
    VarSpec("goodput", "bit/s", "application goodput over the sample interval"),
    VarSpec("bytes_acked", "bytes", "bytes acknowledged (tcp_info, cumulative)"),
    VarSpec("cwnd", "packets", "congestion window (sender)", dtype="float32"),
    VarSpec("ssthresh", "packets", "slow start threshold (sender; NaN = infinite)", dtype="float32"),
    VarSpec("rtt", "us", "smoothed round-trip time (sender)", dtype="float32"),
    VarSpec("rttvar", "us", "round-trip time variation (sender)", dtype="float32"),
    VarSpec("min_rtt", "us", "minimum round-trip time (sender)", dtype="float32"),
    VarSpec("retransmits", "packets", "retransmitted packets since start (cumulative)", dtype="float32"),
    VarSpec("lost", "packets", "packets currently considered lost", dtype="float32"),
    VarSpec("unacked", "packets", "packets in flight", dtype="float32"),
    VarSpec("delivery_rate", "bit/s", "delivery rate estimate (tcp_info)", dtype="float32"),
    VarSpec("pacing_rate", "bit/s", "pacing rate (tcp_info)", dtype="float32"),
    VarSpec("ping_rtt", "us", "ping round-trip time of the flow's host pair (last probe)", dtype="float32"),
    VarSpec("transactions", "1/s", "request/response transactions per second", dtype="float32"),
    VarSpec("lat_mean", "us", "mean transaction latency over the interval", dtype="float32"),
    VarSpec("lat_p50", "us", "median transaction latency over the interval", dtype="float32"),
    VarSpec("lat_p90", "us", "90th percentile latency over the interval", dtype="float32"),
    VarSpec("lat_p99", "us", "99th percentile latency over the interval", dtype="float32"),
    VarSpec("lat_p999", "us", "99.9th percentile latency over the interval", dtype="float32"),
)

FLOW_SUMMARIES: tuple[VarSpec, ...] = (
    VarSpec("rate", "Mbit/s", "mean goodput of the flow (bytes received x 8 / duration)"),
    VarSpec("rate_min", "Mbit/s", "lowest 1-second-window goodput of the flow"),
    VarSpec("rate_max", "Mbit/s", "highest 1-second-window goodput of the flow"),
    VarSpec("duration", "s", "measured duration of the flow"),
    VarSpec("bytes", "bytes", "application bytes the receiver read in the data direction (goodput's; the "
            "sender's count when only its file exists)"),
    VarSpec("bytes_accepted", "bytes", "application bytes the sender's socket accepted (written, not yet "
            "necessarily delivered)"),
    VarSpec("bytes_sent", "bytes", "bytes sent by the sender's TCP incl. retransmissions"),
    VarSpec("packets_sent", "packets",
            "data packets sent by the sender (tcp_info data_segs_out; files without it: "
            "bytes_sent / mss rounded up, RR: at least one per request)"),
    VarSpec("mean_rtt", "us", "mean smoothed RTT of the flow"),
    VarSpec("mean_cwnd", "packets", "mean congestion window of the flow"),
    VarSpec("local_retrans", "packets", "retransmissions of the client's socket"),
    VarSpec("remote_retrans", "packets", "retransmissions of the server's socket"),
    VarSpec("retrans_total", "packets", "retransmissions of the sender's socket"),
    VarSpec("lost_max", "packets", "highest lost-packet count seen"),
    VarSpec("transactions_total", "1", "request/response transactions completed"),
    VarSpec("lat_count", "1", "latency samples (transactions measured)"),
    VarSpec("lat_min_total", "us", "minimum transaction latency"),
    VarSpec("lat_mean_total", "us", "mean transaction latency"),
    VarSpec("lat_max_total", "us", "maximum transaction latency"),
    VarSpec("lat_p50_total", "us", "median transaction latency"),
    VarSpec("lat_p90_total", "us", "90th percentile transaction latency"),
    VarSpec("lat_p99_total", "us", "99th percentile transaction latency"),
    VarSpec("lat_p999_total", "us", "99.9th percentile transaction latency"),
    VarSpec("local_cpu", "percent", "CPU use of the client side of the flow"),
    VarSpec("remote_cpu", "percent", "CPU use of the server side of the flow"),
    VarSpec("local_sampling_cpu", "percent", "share of the client worker's CPU its sampler ticks took"),
    VarSpec("remote_sampling_cpu", "percent", "share of the server worker's CPU its sampler ticks took"),
    VarSpec("local_sampling_jitter_mean", "us", "mean lateness of the client end's sampler ticks (gap between "
            "its samples minus the sampling interval)"),
    VarSpec("local_sampling_jitter_max", "us", "largest lateness of the client end's sampler ticks (gap between "
            "its samples minus the sampling interval; skipped ticks count in)"),
    VarSpec("remote_sampling_jitter_mean", "us", "mean lateness of the server end's sampler ticks"),
    VarSpec("remote_sampling_jitter_max", "us", "largest lateness of the server end's sampler ticks"),
    VarSpec("ping_rtt_mean", "us", "mean ping RTT of the flow's host pair"),
)

HOST_VARS: tuple[VarSpec, ...] = (
    VarSpec("host_before", "1", "host counter before the experiment (0/ snapshot)"),
    VarSpec("host_after", "1", "host counter after the experiment (1/ snapshot)"),
    VarSpec("host_delta", "1", "host counter after minus before"),
)

ALL_VARS: dict[str, VarSpec] = {
    v.name: v for v in FLOW_COORDS + TIME_SERIES + FLOW_SUMMARIES + HOST_VARS
}


def var_attrs(name: str) -> dict[str, str]:
    """The attrs (units, long_name, standard_name) of a schema variable."""
    spec = ALL_VARS[name]
    out = {"units": spec.units, "long_name": spec.long_name}
    if spec.standard_name:
        out["standard_name"] = spec.standard_name
    return out


TIME_ATTRS = {"units": "s", "long_name": "time since the experiment start",
              "standard_name": "time", "axis": "T"}

__all__ = [
    "ALL_VARS",
    "FLOW_COORDS",
    "FLOW_SUMMARIES",
    "HOST_VARS",
    "SCHEMA_VERSION",
    "TIME_ATTRS",
    "TIME_SERIES",
    "VarSpec",
    "var_attrs",
]
