"""Every row of every flow end, in the dataset as it was taken: the (flow, end, sample) layout.

A padded layout, as xarray users keep per-entity series of different
lengths: dims ``flow``, ``end`` (client, server) and ``sample`` (the row
number in the end's file, an integer coordinate), NaN past an end's last row;
``sample_time`` holds each row's own time on the experiment's clock. So
``ds.sample_cwnd.sel(flow=f, end="client")`` plotted against
``ds.sample_time.sel(flow=f, end="client")`` is the raw series, and datasets
of several experiments concatenate (their ``sample`` axes align, padded).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from netesto.raw.nflow import RawFlow
from netesto.results.load import ExperimentRaw, FlowRecord
from netesto.results.numerics import INFINITE_SSTHRESH, col, host_of, times
from netesto.results.schema import ENDS, SAMPLE_VARS
from netesto.results.ticks import row_lateness


def _ssthresh(v: np.ndarray) -> np.ndarray:
    return np.where(v >= INFINITE_SSTHRESH, np.nan, v)


def _rate_bits(v: np.ndarray) -> np.ndarray:
    return np.where(v >= 2.0**63, np.nan, v * 8.0)  # ~0 (u64 max) means "no pacing limit"


# sample variable -> (raw column, conversion)
COLUMNS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray] | None]] = {
    "sample_app_bytes_tx": ("app_bytes_tx", None), "sample_app_bytes_rx": ("app_bytes_rx", None),
    "sample_transactions": ("transactions", None), "sample_cwnd": ("snd_cwnd", None),
    "sample_ssthresh": ("snd_ssthresh", _ssthresh), "sample_rtt": ("rtt", None), "sample_rttvar": ("rttvar", None),
    "sample_min_rtt": ("min_rtt", None), "sample_retransmits": ("total_retrans", None), "sample_lost": ("lost", None),
    "sample_unacked": ("unacked", None), "sample_bytes_acked": ("bytes_acked", None),
    "sample_delivery_rate": ("delivery_rate", _rate_bits), "sample_pacing_rate": ("pacing_rate", _rate_bits),
    "sample_busy_time": ("busy_time", None), "sample_rwnd_limited": ("rwnd_limited", None),
    "sample_sndbuf_limited": ("sndbuf_limited", None), "sample_lat_count": ("lat_count", None),
    "sample_lat_mean": ("lat_mean", None), "sample_lat_p50": ("lat_p50", None), "sample_lat_p90": ("lat_p90", None),
    "sample_lat_p99": ("lat_p99", None), "sample_lat_p999": ("lat_p999", None),
}


def ends(rec: FlowRecord) -> tuple[RawFlow | None, RawFlow | None]:
    """The flow's ends in :data:`~netesto.results.schema.ENDS` order."""
    return rec.client, rec.server


def sample_layout(raw: ExperimentRaw, t0: float) -> dict[str, np.ndarray]:
    """The (flow, end, sample) arrays of every variable of :data:`~netesto.results.schema.SAMPLE_VARS`."""
    flows = raw.flows
    length = max((side.rows for rec in flows for side in ends(rec) if side is not None), default=0)
    shape = (len(flows), len(ENDS), length)
    out = {v.name: np.full(shape, np.nan, dtype=v.dtype) for v in SAMPLE_VARS}
    for i, rec in enumerate(flows):
        for j, side in enumerate(ends(rec)):
            if side is None or not side.rows:
                continue
            n = side.rows
            out["sample_time"][i, j, :n] = times(raw, side, host_of(rec, side)) - t0
            out["sample_late"][i, j, :n] = row_lateness(side)
            for name, (column, convert) in COLUMNS.items():
                values = col(side, column)
                if values.size == n:  # files without the column (older ones, drivers) leave it NaN
                    out[name][i, j, :n] = convert(values) if convert else values
    return out


__all__ = ["COLUMNS", "ends", "sample_layout"]
