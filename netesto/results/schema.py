"""The documented schema of an experiment Dataset: dims, variables, units, CF names.

An experiment's :class:`xarray.Dataset` (``<exp>/exp.nc``) has

dims
    ``flow`` (one entry per flow, labelled by its flow_id), ``time`` (seconds
    since the experiment start on the common sampling grid: a row belongs to
    step ``round((t_wall - clock_offset - t0) / interval)``), ``end``
    (client, server) and ``sample`` (a row's number in its end's raw file),
    ``node`` and ``counter`` for host-level statistics.
coords
    per flow: see :data:`FLOW_COORDS`; ``time``; ``end``; ``sample``; ``node``
    (host names) and ``counter`` (``section.name`` of /proc/net/snmp, netstat,
    interfaces).
data variables
    :data:`TIME_SERIES` and ``goodput_smooth`` on (flow, time),
    ``goodput_sum_smooth`` on (time,), :data:`SAMPLE_VARS` on (flow, end,
    sample): every raw row, :data:`FLOW_SUMMARIES` on (flow,),
    ``host_before``/``host_after``/``host_delta`` on (node, counter).
attrs
    ``schema_version``, ``exp``, ``exp_name``, ``script``, ``desc``, ``other``
    (JSON), ``netesto_version``, ``hosts`` (JSON: kernel, agent version, clock
    offset/rtt per host), ``sysctls`` (JSON per host), ``start_wall`` (t0,
    controller clock), ``start_time`` (t0 in ISO 8601), ``interval``,
    ``start_skew_max``, ``errors`` (JSON list of raw files that could not be
    read), ``flow_warnings`` (JSON: late and missing starts, host-limited
    flows), ``created``.

Every variable carries ``attrs["units"]`` (UDUNITS spelling, read by cf-units
and pint alike: packets are ``"1"`` with the word in the long name) and a
``long_name``; text coordinates carry no units; grid series carry CF
``cell_methods``. ``time`` makes no CF time claim (see :data:`TIME_ATTRS`).
"""

from __future__ import annotations

from dataclasses import dataclass

# 2: every raw row in the sample layout (flow, end, sample); the grid derived from it with no slot lost;
#    goodput_smooth, goodput_sum_smooth; tick lateness, start lateness and limit shares per flow;
#    rate_min/rate_max per flow renamed rate_window_min/rate_window_max (exp.csv's rateMin/rateMax and
#    the sweep cube's rate_min/rate_max are the slowest and fastest flow's rate); "packets" -> "1";
#    time without a CF time claim. Readers of version 1 files: see netesto.results.smoothing.
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class VarSpec:
    """One data variable of the experiment Dataset."""

    name: str
    units: str
    long_name: str
    standard_name: str = ""
    dtype: str = "float64"
    cell_methods: str = ""  # CF: how a grid step's value stands for the step ("time: mean", "time: point")


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
    VarSpec("data_sender", "", "the end whose socket sends the data and whose TCP state the (flow, time) "
            "series show: client, or server for TCP_MAERTS", dtype="str"),
)

# (flow, time) variables, on the grid of the experiment: step k stands for the time t0 + k x interval.
# "sender" = the side that sends the data (client, server for TCP_MAERTS); TCP state comes from the
# sender's socket. Rates (cell_methods "time: mean") are the bytes or transactions counted over the step
# ending at its time, from the cumulative counters of every row; state ("time: point") is the last row
# whose time rounds to the step, or, for a step where no row falls, the last row before it (a row is
# the state until the next): inside a flow's rows no step is NaN, and no row is left out of the counts.
# Latency (lat_*) summarises the transactions of the rows in the step (count-weighted), a step
# without a row of its own has the next row's (whose interval covers it).
_POINT = "time: point"
_MEAN = "time: mean"
TIME_SERIES: tuple[VarSpec, ...] = (
    VarSpec("goodput", "bit/s", "application goodput over the grid step ending at this time (bytes the receiver "
            "read, from its cumulative count: every row counts)", cell_methods=_MEAN),
    VarSpec("bytes_acked", "bytes", "bytes acknowledged (tcp_info, cumulative)", cell_methods=_POINT),
    VarSpec("cwnd", "1", "congestion window of the sender, in packets", "", "float32", _POINT),
    VarSpec("ssthresh", "1", "slow start threshold of the sender, in packets (NaN = infinite)", "", "float32",
            _POINT),
    VarSpec("rtt", "us", "smoothed round-trip time (sender)", "", "float32", _POINT),
    VarSpec("rttvar", "us", "round-trip time variation (sender)", "", "float32", _POINT),
    VarSpec("min_rtt", "us", "minimum round-trip time (sender)", "", "float32", _POINT),
    VarSpec("retransmits", "1", "retransmitted packets since start (cumulative)", "", "float32", _POINT),
    VarSpec("lost", "1", "packets currently considered lost", "", "float32", _POINT),
    VarSpec("unacked", "1", "packets in flight", "", "float32", _POINT),
    VarSpec("delivery_rate", "bit/s", "delivery rate estimate (tcp_info)", "", "float32", _POINT),
    VarSpec("pacing_rate", "bit/s", "pacing rate (tcp_info)", "", "float32", _POINT),
    VarSpec("ping_rtt", "us", "ping round-trip time of the flow's host pair (last probe)", "", "float32", _POINT),
    VarSpec("transactions", "1/s", "request/response transactions per second over the grid step ending at this "
            "time (from the cumulative count)", "", "float32", _MEAN),
    VarSpec("lat_mean", "us", "mean transaction latency over the interval", dtype="float32"),
    VarSpec("lat_p50", "us", "median transaction latency over the interval", dtype="float32"),
    VarSpec("lat_p90", "us", "90th percentile latency over the interval", dtype="float32"),
    VarSpec("lat_p99", "us", "99th percentile latency over the interval", dtype="float32"),
    VarSpec("lat_p999", "us", "99.9th percentile latency over the interval", dtype="float32"),
)

# Smoothed goodput, (flow, time) and (time,): see netesto.results.smoothing (attrs carry the window).
SMOOTHED: tuple[VarSpec, ...] = (
    VarSpec("goodput_smooth", "bit/s", "goodput of the flow as its receiving TCP got it (tcp_info bytes_received "
            "of the receiver's socket; the application's count where there is none), mean over a window that "
            "stays inside the flow's life", cell_methods=_MEAN),
    VarSpec("goodput_sum_smooth", "bit/s", "sum of the flows' goodput_smooth (NaN where no flow runs)",
            cell_methods=_MEAN),
)

# (flow, end, sample): every row of every flow end's .nflow file, as it was taken. The cumulative counters
# are the raw columns (the gridded series are derived from them); "sample" has an integer coordinate so
# that datasets of different lengths align (padded with NaN).
SAMPLE_VARS: tuple[VarSpec, ...] = (
    VarSpec("sample_time", "s", "time of the row (t_wall less the host's clock offset), seconds since the "
            "experiment start"),
    VarSpec("sample_late", "us", "how late the sampler took the row after its scheduled grid point (NaN: the "
            "end's first and last rows, files that do not say)", dtype="float32"),
    VarSpec("sample_app_bytes_tx", "bytes", "application bytes this end sent (cumulative)"),
    VarSpec("sample_app_bytes_rx", "bytes", "application bytes this end received (cumulative)"),
    VarSpec("sample_transactions", "1", "request/response transactions of this end (cumulative)"),
    VarSpec("sample_cwnd", "1", "congestion window of this end's socket, in packets", dtype="float32"),
    VarSpec("sample_ssthresh", "1", "slow start threshold of this end's socket, in packets (NaN = infinite)",
            dtype="float32"),
    VarSpec("sample_rtt", "us", "smoothed round-trip time of this end's socket", dtype="float32"),
    VarSpec("sample_rttvar", "us", "round-trip time variation of this end's socket", dtype="float32"),
    VarSpec("sample_min_rtt", "us", "minimum round-trip time of this end's socket", dtype="float32"),
    VarSpec("sample_retransmits", "1", "packets this end's socket retransmitted (cumulative)", dtype="float32"),
    VarSpec("sample_lost", "1", "packets this end's socket considers lost", dtype="float32"),
    VarSpec("sample_unacked", "1", "packets in flight from this end's socket", dtype="float32"),
    VarSpec("sample_bytes_acked", "bytes", "bytes of this end acknowledged by its peer (cumulative)"),
    VarSpec("sample_delivery_rate", "bit/s", "delivery rate estimate of this end's socket", dtype="float32"),
    VarSpec("sample_pacing_rate", "bit/s", "pacing rate of this end's socket (NaN = none)", dtype="float32"),
    VarSpec("sample_busy_time", "us", "time this end's socket was busy sending, rwnd- and sndbuf-limited time "
            "included (tcp_info busy_time, cumulative)"),
    VarSpec("sample_rwnd_limited", "us", "time this end's socket was limited by the receiver's window "
            "(cumulative)"),
    VarSpec("sample_sndbuf_limited", "us", "time this end's socket was limited by its send buffer (cumulative)"),
    VarSpec("sample_lat_count", "1", "transactions completed in the interval ending at the row", dtype="float32"),
    VarSpec("sample_lat_mean", "us", "mean transaction latency over the interval ending at the row",
            dtype="float32"),
    VarSpec("sample_lat_p50", "us", "median transaction latency over that interval", dtype="float32"),
    VarSpec("sample_lat_p90", "us", "90th percentile transaction latency over that interval", dtype="float32"),
    VarSpec("sample_lat_p99", "us", "99th percentile transaction latency over that interval", dtype="float32"),
    VarSpec("sample_lat_p999", "us", "99.9th percentile transaction latency over that interval",
            dtype="float32"),
)
ENDS = ("client", "server")

FLOW_SUMMARIES: tuple[VarSpec, ...] = (
    VarSpec("rate", "Mbit/s", "mean goodput of the flow (bytes received x 8 / duration)"),
    VarSpec("rate_window_min", "Mbit/s", "lowest goodput of the flow over a 1-second window (not exp.csv's "
            "rateMin, the slowest flow's rate)"),
    VarSpec("rate_window_max", "Mbit/s", "highest goodput of the flow over a 1-second window (not exp.csv's "
            "rateMax, the fastest flow's rate)"),
    VarSpec("duration", "s", "measured duration of the flow"),
    VarSpec("bytes", "bytes", "application bytes the receiver read in the data direction (goodput's; the "
            "sender's count when only its file exists)"),
    VarSpec("bytes_accepted", "bytes", "application bytes the sender's socket accepted (written, not yet "
            "necessarily delivered)"),
    VarSpec("bytes_sent", "bytes", "bytes sent by the sender's TCP incl. retransmissions"),
    VarSpec("packets_sent", "1",
            "data packets sent by the sender (tcp_info data_segs_out; files without it: "
            "bytes_sent / mss rounded up, RR: at least one per request)"),
    VarSpec("mean_rtt", "us", "mean smoothed RTT of the flow"),
    VarSpec("mean_cwnd", "1", "mean congestion window of the flow, in packets"),
    VarSpec("local_retrans", "1", "packets retransmitted by the client's socket"),
    VarSpec("remote_retrans", "1", "packets retransmitted by the server's socket"),
    VarSpec("retrans_total", "1", "packets retransmitted by the sender's socket"),
    VarSpec("lost_max", "1", "highest lost-packet count seen"),
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
    VarSpec("local_tick_late_p50", "us", "median lateness of the client end's sampler ticks (each row against "
            "its scheduled grid point)"),
    VarSpec("local_tick_late_p99", "us", "99th percentile lateness of the client end's sampler ticks"),
    VarSpec("local_tick_late_max", "us", "largest lateness of the client end's sampler ticks"),
    VarSpec("local_ticks_missed", "1", "grid points of the client end with no row (a late tick skips them)"),
    VarSpec("remote_tick_late_p50", "us", "median lateness of the server end's sampler ticks"),
    VarSpec("remote_tick_late_p99", "us", "99th percentile lateness of the server end's sampler ticks"),
    VarSpec("remote_tick_late_max", "us", "largest lateness of the server end's sampler ticks"),
    VarSpec("remote_ticks_missed", "1", "grid points of the server end with no row (a late tick skips them)"),
    VarSpec("start_late", "ms", "how long after its scheduled instant the flow began its data phase (NaN: no "
            "scheduled instant, or it never began)"),
    VarSpec("rwnd_limited_share", "percent", "share of the flow's life its sender was limited by the receiver's "
            "window (tcp_info rwnd_limited)"),
    VarSpec("sndbuf_limited_share", "percent", "share of the flow's life its sender was limited by its own send "
            "buffer (tcp_info sndbuf_limited)"),
    VarSpec("network_limited_share", "percent", "share of the flow's life its sender was busy and limited by "
            "neither buffer: by the network, through cwnd or pacing (tcp_info busy_time minus the two above)"),
    VarSpec("app_limited_share", "percent", "share of the flow's life its sender had nothing to send (the "
            "application was the limit; the rest of the life)"),
    VarSpec("ping_rtt_mean", "us", "mean ping RTT of the flow's host pair"),
)

HOST_VARS: tuple[VarSpec, ...] = (
    VarSpec("host_before", "1", "host counter before the experiment (0/ snapshot)"),
    VarSpec("host_after", "1", "host counter after the experiment (1/ snapshot)"),
    VarSpec("host_delta", "1", "host counter after minus before"),
)

ALL_VARS: dict[str, VarSpec] = {
    v.name: v for v in FLOW_COORDS + TIME_SERIES + SMOOTHED + SAMPLE_VARS + FLOW_SUMMARIES + HOST_VARS
}


def var_attrs(name: str) -> dict[str, str]:
    """The attrs (units, long_name, standard_name) of a schema variable."""
    spec = ALL_VARS[name]
    out = {"units": spec.units, "long_name": spec.long_name} if spec.units else {"long_name": spec.long_name}
    if spec.standard_name:
        out["standard_name"] = spec.standard_name
    if spec.cell_methods:
        out["cell_methods"] = spec.cell_methods
    return out


# No CF time claim (standard_name "time", axis "T"): CF wants such a coordinate in "seconds since
# <date>", which xarray decodes to datetime64 on open, and every consumer here (selections by second,
# plots, fairness windows) works in seconds from the start. The start itself is in the attrs
# (start_time, ISO 8601; start_wall, the controller's epoch seconds).
TIME_ATTRS = {"units": "s", "long_name": "seconds since the experiment start (attrs start_time)"}
SAMPLE_ATTRS = {"long_name": "row of the flow end's raw file (0 = its first)"}
END_ATTRS = {"long_name": "flow end: client (the side that connected) or server"}

__all__ = [
    "ALL_VARS",
    "END_ATTRS",
    "ENDS",
    "FLOW_COORDS",
    "FLOW_SUMMARIES",
    "HOST_VARS",
    "SAMPLE_ATTRS",
    "SAMPLE_VARS",
    "SCHEMA_VERSION",
    "SMOOTHED",
    "TIME_ATTRS",
    "TIME_SERIES",
    "VarSpec",
    "var_attrs",
]
