"""The sweep report's per-algorithm table says who won a shared bottleneck, and only beyond the noise."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from netesto.report.sweep import _mean_rows

NAN = math.nan


def _stats() -> xr.Dataset:
    """Means over repetitions as stats() lays them out, over ``ca`` (the point) and ``cc`` (bbr, cubic)."""
    ca = ["bbr+cubic", "bbr:2+cubic:1", "bbr+cubic 1 rep", "cubic"]
    share = np.array([[0.80, 0.20], [0.70, 0.30], [0.90, 0.10], [NAN, 1.0]])
    lo = np.array([[0.72, 0.12], [0.60, 0.20], [NAN, NAN], [NAN, 1.0]])
    hi = np.array([[0.88, 0.28], [0.80, 0.40], [NAN, NAN], [NAN, 1.0]])
    n = np.array([[3, 3], [3, 3], [1, 1], [0, 3]])
    flows = np.array([[1, 1], [2, 1], [1, 1], [NAN, 1]])
    dims = ("ca", "cc")
    data = {"cc_share": (dims, share), "cc_share_lo": (dims, lo), "cc_share_hi": (dims, hi), "cc_share_n": (dims, n),
            "cc_flows": (dims, flows)}
    for m in ("rate", "qdelay", "retrans_pct"):  # the table's other columns: present, not judged
        data.update({f"cc_{m}": (dims, share * 10), f"cc_{m}_lo": (dims, lo * 10), f"cc_{m}_hi": (dims, hi * 10),
                     f"cc_{m}_n": (dims, n)})
    return xr.Dataset(data, coords={"ca": ca, "cc": ["bbr", "cubic"]})


def test_an_algorithm_above_its_fair_share_beyond_the_interval_won_and_the_rest_is_said_as_it_is() -> None:
    rows = {(r["params"][0], r["cc"]): (r["verdict"], r["side"]) for r in _mean_rows(_stats(), ["ca"])}
    assert rows == {
        ("bbr+cubic", "bbr"): ("above its fair 0.50", "above"),
        ("bbr+cubic", "cubic"): ("below its fair 0.50", "below"),
        # two bbr flows to one cubic: bbr's fair share is 2/3, and 0.70 [0.60, 0.80] holds it
        ("bbr:2+cubic:1", "bbr"): ("within the noise of its fair 0.67", ""),
        ("bbr:2+cubic:1", "cubic"): ("within the noise of its fair 0.33", ""),
        ("bbr+cubic 1 rep", "bbr"): ("fair 0.50; one repetition: no verdict", ""),
        ("bbr+cubic 1 rep", "cubic"): ("fair 0.50; one repetition: no verdict", ""),
        ("cubic", "cubic"): ("", ""),  # alone: no one to win against
    }
