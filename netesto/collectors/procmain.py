"""The command line a collector process shares: ``--spec FILE``, a ready line, SIGTERM to stop, a last line.

The agent starts each collector (``python -m netesto.collectors.tcpprobe`` or
``...sockwatch``) with its spec in a file and reads one JSON object a line
from its stdout: ``{"event": "ready"}`` once it records, then ``{"event":
"done", "summary": ...}`` or ``{"event": "error", "message": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any, Callable, Sequence

from netesto.errors import NetestoError
from netesto.procs import orphaned, precise_timers

Body = Callable[[str, Callable[[], None], Callable[[], bool]], dict[str, Any]]


def collector_main(argv: Sequence[str] | None, prog: str, description: str, body: Body) -> int:
    """Run ``body(spec text, ready, stopping)`` as the collector ``prog``: ``ready()`` prints the ready line,
    ``stopping()`` turns true on SIGTERM or SIGINT, or once the agent that started us is gone without its
    death signal having stopped us (:func:`~netesto.procs.orphaned`); its summary is the done line. The exit
    status."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    parser.add_argument("--spec", required=True, help="the collector's spec as JSON (a file)")
    args = parser.parse_args(argv)
    owner = os.getppid()
    stop = [False]

    def on_signal(*_: Any) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    precise_timers()

    def ready() -> None:
        print(json.dumps({"event": "ready", "pid": os.getpid()}), flush=True)

    try:
        summary = body(Path(args.spec).read_text(), ready, lambda: stop[0] or orphaned(owner) != 0)
    except (NetestoError, OSError, ValueError, TypeError, KeyError) as exc:
        message = exc.message if isinstance(exc, NetestoError) else f"{type(exc).__name__}: {exc}"
        print(json.dumps({"event": "error", "message": message}), flush=True)
        return 1
    print(json.dumps({"event": "done", "summary": summary}), flush=True)
    return 0


__all__ = ["Body", "collector_main"]
