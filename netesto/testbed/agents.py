"""Start netesto agents (and other testbed processes) inside namespaces, with fresh CURVE keys.

Every process is started detached (its own session, output to a log file)
through ``ip netns exec``, which execs the command in place: the PID we get
is the agent's own, and it is recorded with its start time in the testbed's
state so ``down`` stops exactly it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from netesto.errors import TestbedError
from netesto.testbed.state import proc_alive, proc_start_time

AGENT_MODULE = "netesto.agent.cli"


@dataclass(frozen=True)
class Started:
    """A process we started: what, where, its PID and kernel start time."""

    kind: str  # "agent" | "delayline"
    name: str
    pid: int
    start_time: int | None
    log: str

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "name": self.name, "pid": self.pid, "start_time": self.start_time, "log": self.log}


def agent_available() -> bool:
    """Whether the agent's command-line module and what it needs (pyzmq, msgpack) are installed."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in (AGENT_MODULE, "zmq", "msgpack"))
    except ModuleNotFoundError:
        return False


def create_keys(keys_dir: Path, names: Sequence[str]) -> dict[str, tuple[Path, Path]]:
    """Fresh CURVE key pairs ``<name>.key`` / ``<name>.key_secret`` for each name."""
    import zmq.auth

    keys_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in names:
        for suffix in (".key", ".key_secret"):
            (keys_dir / f"{name}{suffix}").unlink(missing_ok=True)
        public, secret = zmq.auth.create_certificates(str(keys_dir), name)
        os.chmod(secret, 0o600)
        out[name] = (Path(public), Path(secret))
    return out


def spawn(kind: str, name: str, ns: str | None, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> Started:
    """Start ``argv`` detached inside namespace ``ns`` (None = here)."""
    full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    log.parent.mkdir(parents=True, exist_ok=True)
    penv = dict(os.environ)
    penv.update(env or {})
    # The package must be importable in the child even when running from a checkout.
    pkg_root = str(Path(__file__).resolve().parents[2])
    penv["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, penv.get("PYTHONPATH", "")) if p)
    with open(log, "ab") as fh:
        try:
            proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=penv, start_new_session=True)
        except OSError as exc:
            raise TestbedError(f"cannot start {kind} {name}: {exc}") from exc
    # Read the start time while the PID is surely ours (it cannot be recycled yet).
    start = proc_start_time(proc.pid)
    # Popen objects are dropped: the process outlives us; down() stops it by PID.
    proc.returncode = 0  # keep Popen.__del__ from warning about a running child
    return Started(kind, name, proc.pid, start, str(log))


def wait_file(path: Path, started: Started, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        if not proc_alive(started.pid, started.start_time):
            raise TestbedError(f"{started.kind} {started.name} exited during start-up; log {started.log}:\n{_tail(started.log)}")
        time.sleep(0.05)
    raise TestbedError(f"{started.kind} {started.name} not ready after {timeout:.0f} s; log {started.log}")


def _tail(path: str, n: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def agent_argv(
    *,
    bind: str,
    port: int,
    name: str,
    secret_key: Path | None,
    authorized_dir: Path | None,
    datadir: Path,
    ready_file: Path,
    insecure: bool = False,
) -> list[str]:
    """The agent's command line (``python -m netesto.agent.cli``)."""
    argv = [sys.executable, "-m", AGENT_MODULE, "--bind", bind, "--port", str(port), "--name", name,
            "--datadir", str(datadir), "--test-bind", bind, "--ready-file", str(ready_file)]
    if insecure:
        argv.append("--insecure")
    else:
        assert secret_key is not None and authorized_dir is not None
        argv += ["--keys", str(secret_key), "--authorized", str(authorized_dir)]
    return argv


__all__ = ["Started", "agent_argv", "agent_available", "create_keys", "spawn", "wait_file"]
