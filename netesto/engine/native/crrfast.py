"""The optional C loops of TCP_CRR (``_crrloop``), if built and allowed.

``ext`` is None where :data:`netesto.engine.native.fastloop.AVAILABLE` is false (no
extension built, ``NETESTO_PURE_PYTHON=1``, or ``time.perf_counter`` not on
CLOCK_MONOTONIC, the C latencies' clock) or ``_crrloop`` is not built: the
engine then runs the Python twins (``CRRClient._on_conn``, ``Pending`` and
``JoinConn``).
"""

from __future__ import annotations

from types import ModuleType

from netesto.engine.native import fastloop


def _load() -> ModuleType | None:
    if not fastloop.AVAILABLE:
        return None
    try:
        from netesto.engine.native import _crrloop  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _crrloop


ext = _load()
PATH = "C" if ext is not None else "python"

__all__ = ["PATH", "ext"]
