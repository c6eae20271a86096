"""A run's live samples as data a holoviews user keeps and extends while the run goes on.

:class:`LiveData` records every sample the live view draws (flow, host, time, goodput, cwnd,
srtt). ``data.buffer`` is a holoviews :class:`~holoviews.streams.Buffer` that gets each new
sample as it arrives, and ``data.holoviews("goodput")`` a ``DynamicMap`` over it: one Curve per
flow (an ``NdOverlay`` keyed by ``flow``), real data in every element, so ``*``, ``+``, ``.opts``
and ``.select`` work on it, and shown after ``%load_ext netesto`` it redraws as the run goes on::

    h = netesto_result                      # a --background run's handle
    live = h.live.holoviews("goodput") * hv.HLine(50)
    live                                    # redraws as the run's samples come

The live view itself streams the same samples into bokeh sources (:mod:`netesto.plots.live`):
a holoviews refresh costs the kernel 15-55 ms a panel per redraw (measured: 2 and 16 flows,
holoviews 1.23), streaming into both bokeh panels 0.2-2.8 ms, and the kernel's CPU is the flows'
CPU on a one-machine lab. holoviews is imported when a user first asks for these objects, not before.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from netesto.controller.live import Sample

# Held by every change to a bokeh document that netesto shows live: the samples' redraws (a ticker
# thread, or whatever thread feeds a LiveData) and the front end's own changes (a range the user zoomed,
# applied in the kernel's main thread: :class:`netesto.magics.liveview.BatchedBokehModel`). A bokeh
# document is not thread-safe: unguarded, a redraw raised "Set changed size during iteration" in 1 of
# about 10 JupyterLab sessions and the plot stopped there.
DOCUMENTS = threading.RLock()

# The metrics a sample carries, with their units (the Curves' value dimensions).
METRICS = {"goodput": "Mbit/s", "cwnd": "packets", "srtt": "ms"}
COLUMNS = ("t", "flow", "host", *METRICS)
# Rows the buffer keeps (oldest dropped first): 16 flows for an hour at a sample a second, twice over.
BUFFER_ROWS = 115_200


class LiveData:
    """Every sample of one run's live view, in arrival order; thread-safe (the view's ticker adds,
    a notebook cell reads)."""

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self._lock = threading.Lock()
        self._buffer: Any = None

    def __len__(self) -> int:
        return len(self._cols["t"])

    @property
    def flows(self) -> list[str]:
        """The flows with samples, in order of their first sample."""
        with self._lock:
            return list(dict.fromkeys(self._cols["flow"]))

    def add(self, samples: Iterable[Sample]) -> None:
        """Record ``samples`` and send them to the buffer, when one was asked for."""
        rows: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        for s in samples:
            for column, value in (("t", s.t), ("flow", s.flow), ("host", s.host), ("goodput", s.rate / 1e6),
                                  ("cwnd", s.cwnd), ("srtt", s.srtt)):
                rows[column].append(float("nan") if value is None else value)
        if not rows["t"]:
            return
        with self._lock:
            for column, values in rows.items():
                self._cols[column].extend(values)
            buffer = self._buffer
        if buffer is not None:
            with DOCUMENTS:  # its DynamicMaps' plots redraw in this thread
                buffer.send(_frame(rows))

    def frame(self) -> Any:
        """The samples so far as a pandas DataFrame (columns t, flow, host, goodput, cwnd, srtt)."""
        with self._lock:
            return _frame(self._cols)

    @property
    def buffer(self) -> Any:
        """A holoviews ``Buffer`` of the samples: those so far, then each new one as it comes."""
        with self._lock:
            if self._buffer is None:
                from holoviews.streams import Buffer

                self._buffer = Buffer(_frame(self._cols), length=BUFFER_ROWS, index=False)
            return self._buffer

    def holoviews(self, metric: str = "goodput") -> Any:
        """A ``DynamicMap`` of ``metric`` (goodput, cwnd or srtt) per flow over :attr:`buffer`: each
        frame an ``NdOverlay`` of Curves keyed by flow, time in s against the metric in its unit."""
        if metric not in METRICS:
            raise ValueError(f"live metric {metric!r}: one of {', '.join(METRICS)}")
        import holoviews as hv

        from netesto.plots.page import bokeh_backend

        bokeh_backend()
        value = hv.Dimension(metric, unit=METRICS[metric])
        time = hv.Dimension("t", label="time", unit="s")

        def draw(data: Any) -> Any:
            rows = data[data[metric].notna()]
            curves = {flow: hv.Curve(part, time, [value, "host"]) for flow, part in rows.groupby("flow", sort=False)}
            return hv.NdOverlay(curves or {"": hv.Curve([], time, value)}, kdims="flow")

        return hv.DynamicMap(draw, streams=[self.buffer])

    def overlay(self, metric: str = "goodput") -> Any:
        """The samples so far as a static ``NdOverlay`` of Curves (what :meth:`holoviews` shows now)."""
        return self.holoviews(metric)[()]


def _frame(cols: dict[str, list[Any]]) -> Any:
    import pandas as pd

    return pd.DataFrame({"t": pd.Series(cols["t"], dtype=float), "flow": pd.Series(cols["flow"], dtype=object),
                         "host": pd.Series(cols["host"], dtype=object),
                         **{m: pd.Series(cols[m], dtype=float) for m in METRICS}})


__all__ = ["BUFFER_ROWS", "COLUMNS", "DOCUMENTS", "LiveData", "METRICS"]
