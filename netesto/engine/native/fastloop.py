"""The optional C loops for a TCP_RR flow alone in its worker (``_fastloop``) and for many
(``_rrloop``, ``rrloop`` here: see :mod:`~netesto.engine.kinds.rrgroup`), if built and allowed.

``AVAILABLE`` is false when the extension is not built, when
``NETESTO_PURE_PYTHON=1`` is set (tests and benches compare both paths),
or when ``time.perf_counter`` is not CLOCK_MONOTONIC (the C latencies must
be on the same clock as the Python ones). ``hist_record`` is the
extension's histogram counter (``Histogram.record_many``), or None: it needs
no clock, only the extension (built with it) and no ``NETESTO_PURE_PYTHON``;
``sample_row`` (the sampler's row builder, ``FlowEnd.sample``) and
``sample_tick`` (the Sampler's sweep over many flow ends), ``sweep`` (a whole
sweep: the clocks, ``sample_tick``'s rows, the next grid point) and
``sample_end`` (one flow end's row at its idle point) likewise.
"""

from __future__ import annotations

import os
import time
from types import ModuleType
from typing import Any, Callable

LAT_CAPACITY = 4096  # latencies per C call; the caller moves them to lat_raw between calls


def _load() -> ModuleType | None:
    if os.environ.get("NETESTO_PURE_PYTHON", "") not in ("", "0"):
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        from netesto.engine.native import _fastloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _fastloop


def _load_rrloop() -> ModuleType | None:
    """``_rrloop`` where ``_fastloop`` loads (same conditions: its latencies are on the same clock)."""
    if ext is None:
        return None
    try:
        from netesto.engine.native import _rrloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _rrloop


def _load_clockless() -> ModuleType | None:
    """The extension for its parts that need no clock (None: not built or ``NETESTO_PURE_PYTHON``)."""
    if os.environ.get("NETESTO_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from netesto.engine.native import _fastloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _fastloop


ext = _load()
AVAILABLE = ext is not None
PATH = "C" if AVAILABLE else "python"
rrloop = _load_rrloop()
_clockless = _load_clockless()
# None where an extension built before them lacks them
hist_record: Callable[[Any, dict[int, int]], tuple[int, int, int] | None] | None = getattr(
    _clockless, "hist_record", None)
sample_row: Callable[..., int] | None = getattr(_clockless, "sample_row", None)
sample_tick: Callable[..., tuple[list[Any], list[tuple[Any, BaseException]], list[Any]]] | None = getattr(
    _clockless, "sample_tick", None)
sample_setup: Callable[[type, int], None] | None = getattr(_clockless, "sample_setup", None)
sample_end: Callable[[Any, Any], int] | None = getattr(_clockless, "sample_end", None)
sweep: Callable[..., Any] | None = getattr(_clockless, "sweep", None)  # a whole sweep of the Sampler
SWEEP_FIELDS: int = getattr(_clockless, "SWEEP_FIELDS", 2)  # int64 values of the sweep's acc (Sampler.sweep_acc)
ACC_FIELDS: int = getattr(_clockless, "ACC_FIELDS", 5)  # int64 values of the hot rows' acc (Sampler.acc)
lat_summary: Callable[[Any], bytes | None] | None = getattr(_clockless, "lat_summary", None)
# (head, tcp_info, cc slot) bytes of the rows sample_row builds: the engine checks them against its layout
ROW_LAYOUT = tuple(getattr(_clockless, k) for k in ("ROW_HEAD", "ROW_INFO", "ROW_CC_SLOT")) if sample_row else None

__all__ = ["ACC_FIELDS", "AVAILABLE", "LAT_CAPACITY", "PATH", "ROW_LAYOUT", "ext", "hist_record", "lat_summary", "rrloop",
           "sample_end", "sample_row", "sample_setup", "sample_tick", "sweep", "SWEEP_FIELDS"]
