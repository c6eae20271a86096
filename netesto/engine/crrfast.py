"""The optional C loops of TCP_CRR (``_crrloop``), if built and allowed.

``ext`` is None when the extension is not built, when ``NETESTO_PURE_PYTHON=1``
is set (tests and benches compare both paths), or when ``time.perf_counter``
is not CLOCK_MONOTONIC (the C latencies must be on the same clock as the
Python ones): the engine then runs the Python twins (``CRRClient._on_conn``,
``Pending`` and ``JoinConn``).
"""

from __future__ import annotations

import os
import time
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("NETESTO_PURE_PYTHON", "") not in ("", "0"):
        return None
    if time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        from netesto.engine import _crrloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _crrloop


ext = _load()
PATH = "C" if ext is not None else "python"

__all__ = ["PATH", "ext"]
