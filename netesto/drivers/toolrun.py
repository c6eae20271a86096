"""Shared plumbing of the peer-tool drivers (iperf3, netperf): the timed run, the files, servers.

Both drivers do the same around their tool: wait for ``spec.start_at``, emit
``started``, run the tool once with a time limit, write ``.nflow`` files and
emit ``done`` or ``error``; their servers are long-lived processes that can be
tied to the agent's life (``die_with_parent``).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from netesto.errors import TrafficError
from netesto.raw.columns import FLOW_COLUMNS
from netesto.procs import parent_death_signal
from netesto.raw.nflow import FlowWriter
from netesto.protocol.flowspec import FlowSpec

Emit = Callable[[dict[str, Any]], None]
_NAMES = [c.name for c in FLOW_COLUMNS]


def check_test(spec: FlowSpec, driver: str, supported: Sequence[str]) -> None:
    """Raise :class:`TrafficError` if ``driver`` has no equivalent of ``spec.test``."""
    if spec.test not in supported:
        raise TrafficError(f"flow {spec.flow_id}: driver {driver} does not support {spec.test} "
                           f"(supported: {', '.join(supported)}); use driver=builtin")


def tool_env() -> dict[str, str]:
    """The environment for a tool whose output we parse: the C locale (decimal points)."""
    return dict(os.environ, LC_ALL="C")


def wait_until(start_at: float | None) -> None:
    """Sleep until the wall-clock time ``start_at`` (no wait if None or past)."""
    if start_at is not None:
        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)


@dataclass(frozen=True)
class ToolRun:
    """What one timed run of a tool produced, and when it started."""

    argv: list[str]
    stdout: str
    stderr: str
    returncode: int
    t0_wall: float
    mono_offset: float  # monotonic - wall clock at the start

    @property
    def t0_mono(self) -> float:
        return self.t0_wall + self.mono_offset


def run_timed(spec: FlowSpec, argv: list[str], driver: str, emit: Emit, timeout: float | None) -> ToolRun:
    """Wait for ``spec.start_at``, emit ``started``, run ``argv`` once (killed after ``timeout``,
    default ``spec.dur + 30`` s). A timeout is a failed run (returncode -9) with what was printed;
    a tool that cannot be run at all is a :class:`TrafficError`."""
    wait_until(spec.start_at)
    t0_wall = time.time()
    mono_offset = time.monotonic() - t0_wall
    emit({"event": "started", "flow": spec.flow_id, "driver": driver, "t_wall": t0_wall})
    limit = timeout if timeout is not None else spec.dur + 30.0
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit, env=tool_env())
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        stdout = out.decode(errors="replace") if isinstance(out, bytes) else out
        stderr, rc = f"{driver} did not finish within {limit:g} s (killed)", -9
    except OSError as exc:
        raise TrafficError(f"cannot run {' '.join(argv)}: {exc.strerror}") from exc
    return ToolRun(argv, stdout, stderr, rc, t0_wall, mono_offset)


def flow_file(datadir: str | os.PathLike[str], spec: FlowSpec, side: str) -> Path:
    """``<datadir>/<exp>/flows/<flow_id>.<side>.nflow``."""
    return Path(datadir) / str(spec.exp) / "flows" / f"{spec.flow_id}.{side}.nflow"


def flow_meta(spec: FlowSpec, run: ToolRun, driver: str, interval: float, **extra: Any) -> dict[str, Any]:
    """The ``.nflow`` header of a driver's client file (the spec without its token)."""
    spec_dict = spec.to_dict()
    spec_dict.pop("token", None)
    return {"flow": spec_dict, "side": "client", "driver": driver, "engine": driver, "argv": run.argv,
            "start_wall": run.t0_wall, "start_mono": run.t0_mono, "interval": interval, "ca": spec.ca, **extra}


def write_nflow(path: Path, rows: Sequence[dict[str, float]], meta: dict[str, Any],
                summary: dict[str, Any]) -> Path:
    """Write FLOW_COLUMNS rows (dicts of the non-zero columns) and the summary to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = FlowWriter(path, FLOW_COLUMNS, meta)
    for row in rows:
        writer.append([row.get(name, 0) for name in _NAMES])
    writer.close(summary)
    return path


def finish(spec: FlowSpec, driver: str, emit: Emit, summary: dict[str, Any], error: str) -> bool:
    """Emit the flow's last event (``error`` or ``done`` with totals); True if it ended OK."""
    if error:
        emit({"event": "error", "flow": spec.flow_id, "driver": driver, "message": error,
              "error": error, "summary": summary})
        return False
    emit({"event": "done", "flow": spec.flow_id, "driver": driver,
          "bytes_tx": summary["bytes_tx"], "bytes_rx": summary["bytes_rx"],
          "rate_tx_bps": summary["rate_tx_bps"], "rate_rx_bps": summary["rate_rx_bps"],
          "summary": summary})
    return True


def spawn_server(argv: list[str], *, die_with_parent: bool = False, **popen: Any) -> subprocess.Popen[Any]:
    """Start a tool's server process (``die_with_parent``: it gets SIGTERM when we die)."""
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=tool_env(),
                                preexec_fn=parent_death_signal() if die_with_parent else None, **popen)
    except OSError as exc:
        raise TrafficError(f"cannot run {' '.join(argv)}: {exc.strerror}") from exc


def stop_server(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Stop a server process (SIGTERM, then SIGKILL)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["Emit", "ToolRun", "check_test", "finish", "flow_file", "flow_meta", "run_timed", "spawn_server",
           "stop_server", "tool_env", "wait_until", "write_nflow"]
