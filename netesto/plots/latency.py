"""Transaction latency of RR/CRR flows: the CDF from the engine's stored histograms, in holoviews (bokeh).

The traffic engine records every request/response time in a log-bucketed histogram (at most
0.4 % relative error) and stores it in the flow's summary; the CDF below is read from its
buckets, so it covers every transaction, not a sample of them.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from netesto.plots.flows import PER_FLOW_MAX
from netesto.plots.page import bokeh_backend

NS_PER_US = 1000.0  # the engine records nanoseconds


def cdf(hist: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(latency in us, share of transactions at or below it) of a stored histogram
    (``Histogram.to_dict()``): the CDF steps at each bucket's upper bound, clamped to the
    recorded max, starting at the recorded min with 0.

    >>> from netesto.raw.histogram import Histogram
    >>> h = Histogram()
    >>> h.record_many([1000, 1000, 3000, 5000])  # ns
    >>> x, y = cdf(h.to_dict())
    >>> x.tolist(), y.tolist()
    ([1.0, 1.004, 3.008, 5.0], [0.0, 0.5, 0.75, 1.0])
    """
    from netesto.raw.histogram import Histogram, bucket_bounds

    h = Histogram.from_dict(hist)
    if h.count == 0 or not h.counts:
        return np.zeros(0), np.zeros(0)
    index = sorted(h.counts)
    highs = np.array([bucket_bounds(i)[1] for i in index], dtype=float)
    counts = np.array([h.counts[i] for i in index], dtype=float)
    # bucket bounds are in the engine's unit; the exact min/max bound the first and last steps
    x = np.concatenate([[float(h.min)], np.minimum(highs, max(float(h.max), float(h.min)))]) / NS_PER_US
    y = np.concatenate([[0.0], np.cumsum(counts) / counts.sum()])
    return x, y


def latency_cdf(source: Any, *, per_flow_max: int = PER_FLOW_MAX, width: int = 900, height: int = 320) -> Any:
    """The latency CDF of each RR/CRR flow of an experiment (``source``: its directory or a
    loaded :class:`~netesto.results.load.ExperimentRaw`), log latency axis; up to
    ``per_flow_max`` flows a line each, above one line per group (client-server-group, the
    flows' histograms merged). Raises ValueError when no flow has a latency histogram."""
    import holoviews as hv

    from netesto.raw.histogram import Histogram

    bokeh_backend()
    raw = source
    if isinstance(source, (str, os.PathLike)):
        from netesto.results.load import load_experiment

        raw = load_experiment(source)
    hists: dict[str, Histogram] = {}
    groups: dict[str, Histogram] = {}
    for rec in raw.flows:
        data = (rec.client.summary or {}).get("latency_hist") if rec.client else None
        if not isinstance(data, dict) or not data.get("count"):
            continue
        h = Histogram.from_dict(data)
        ca = str(rec.meta.get("ca", "") or "")
        hists[f"{rec.flow_id} {ca}".strip()] = h
        key = rec.flow_id.rsplit("-", 1)[0]  # client-server-group
        if key in groups:
            groups[key].merge(Histogram.from_dict(data))
        else:
            groups[key] = Histogram.from_dict(data)
    if not hists:
        raise ValueError("no flow of the experiment has a latency histogram (RR/CRR tests record one)")
    lines = hists if len(hists) <= per_flow_max else groups
    tooltips = [("flow", "$name"), ("latency", "@latency{0.0} us"), ("share", "@share{0.000}")]
    curves = []
    for name, h in lines.items():
        x, y = cdf(h.to_dict())
        curves.append(hv.Curve((x, y), "latency", "share", label=name).opts(
            interpolation="steps-post", tools=["hover"], hover_tooltips=tooltips))
    return hv.Overlay(curves).opts(title="Transaction latency CDF (every transaction)", width=width, height=height,
                                   logx=True, xlabel="latency (us)", ylabel="share of transactions",
                                   legend_position="right", legend_opts={"click_policy": "hide"})


__all__ = ["cdf", "latency_cdf"]
