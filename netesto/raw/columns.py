"""The columns of a flow's ``.nflow`` samples and of a ping's, with units.

The engine writes every column on both ends of every flow (zeros where a
value does not apply, e.g. latency columns of a stream flow). Results read
them by these names. Counters named ``*_total`` or ``app_*``/``transactions``
are cumulative since the flow started; the others are instantaneous.
"""

from __future__ import annotations

from netesto.raw.nflow import Column

TIME_COLUMNS = (
    Column("t_wall", "d", "s"),  # time.time() at the sample
    Column("t_mono", "d", "s"),  # time.monotonic() at the sample
)

APP_COLUMNS = (
    Column("app_bytes_tx", "Q", "bytes"),  # cumulative application bytes sent
    Column("app_bytes_rx", "Q", "bytes"),  # cumulative application bytes received
    Column("transactions", "Q", "1"),  # cumulative request/response transactions
    Column("connections", "Q", "1"),  # cumulative connections opened (CRR)
    Column("udp_lost", "Q", "1"),  # cumulative datagrams missing by sequence number
    Column("udp_reordered", "Q", "1"),  # cumulative datagrams that arrived late
)

# struct tcp_info fields (linux/tcp.h), names as the kernel spells them. Files
# written before segs_out/segs_in/data_segs_in/data_segs_out existed lack those
# four columns: readers look columns up by name and must allow for that.
TCP_INFO_COLUMNS = (
    Column("state", "B", "1"),
    Column("ca_state", "B", "1"),
    Column("retransmits", "B", "1"),
    Column("rto", "I", "us"),
    Column("snd_mss", "I", "bytes"),
    Column("unacked", "I", "packets"),
    Column("sacked", "I", "packets"),
    Column("lost", "I", "packets"),
    Column("retrans", "I", "packets"),
    Column("pmtu", "I", "bytes"),
    Column("rtt", "I", "us"),
    Column("rttvar", "I", "us"),
    Column("snd_ssthresh", "I", "packets"),
    Column("snd_cwnd", "I", "packets"),
    Column("reordering", "I", "packets"),
    Column("total_retrans", "I", "packets"),
    Column("pacing_rate", "Q", "bytes/s"),
    Column("bytes_acked", "Q", "bytes"),
    Column("bytes_received", "Q", "bytes"),
    Column("segs_out", "I", "packets"),  # segments sent, retransmissions and pure ACKs included
    Column("segs_in", "I", "packets"),  # segments received, pure ACKs included
    Column("min_rtt", "I", "us"),
    Column("data_segs_in", "I", "packets"),  # segments received that carried data
    Column("data_segs_out", "I", "packets"),  # segments sent that carried data (retransmissions too)
    Column("delivery_rate", "Q", "bytes/s"),
    Column("busy_time", "Q", "us"),
    Column("rwnd_limited", "Q", "us"),
    Column("sndbuf_limited", "Q", "us"),
    Column("bytes_sent", "Q", "bytes"),
    Column("bytes_retrans", "Q", "bytes"),
)

# Congestion-control info (TCP_CC_INFO); zero when the algorithm gives none.
CC_COLUMNS = (
    Column("bbr_bw", "Q", "bytes/s"),
    Column("bbr_min_rtt", "I", "us"),
    Column("bbr_pacing_gain", "I", "1/256"),
    Column("bbr_cwnd_gain", "I", "1/256"),
)

# Request/response latency over the interval that ends at this sample.
LATENCY_COLUMNS = (
    Column("lat_count", "I", "1"),
    Column("lat_min", "d", "us"),
    Column("lat_mean", "d", "us"),
    Column("lat_max", "d", "us"),
    Column("lat_p50", "d", "us"),
    Column("lat_p90", "d", "us"),
    Column("lat_p99", "d", "us"),
    Column("lat_p999", "d", "us"),
)

FLOW_COLUMNS = TIME_COLUMNS + APP_COLUMNS + TCP_INFO_COLUMNS + CC_COLUMNS + LATENCY_COLUMNS

PING_COLUMNS = TIME_COLUMNS + (
    Column("seq", "I", "1"),
    Column("rtt", "d", "us"),  # NaN for a lost probe
)

__all__ = [
    "APP_COLUMNS",
    "CC_COLUMNS",
    "FLOW_COLUMNS",
    "LATENCY_COLUMNS",
    "PING_COLUMNS",
    "TCP_INFO_COLUMNS",
    "TIME_COLUMNS",
]
