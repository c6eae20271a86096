"""The optional C loops for a TCP_RR flow alone in its worker (``_fastloop``), if built and allowed.

``AVAILABLE`` is false when the extension is not built, when
``NETESTO_PURE_PYTHON=1`` is set (tests and benches compare both paths),
or when ``time.perf_counter`` is not CLOCK_MONOTONIC (the C latencies must
be on the same clock as the Python ones). ``hist_record`` is the
extension's histogram counter (``Histogram.record_many``), or None: it needs
no clock, only the extension (built with it) and no ``NETESTO_PURE_PYTHON``.
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
        from netesto.traffic import _fastloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _fastloop


def _load_hist_record() -> Callable[[Any, dict[int, int]], tuple[int, int, int] | None] | None:
    if os.environ.get("NETESTO_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from netesto.traffic import _fastloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_fastloop, "hist_record", None)  # None from an extension built before it existed


ext = _load()
AVAILABLE = ext is not None
PATH = "C" if AVAILABLE else "python"
hist_record = _load_hist_record()

__all__ = ["AVAILABLE", "LAT_CAPACITY", "PATH", "ext", "hist_record"]
