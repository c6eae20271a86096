"""Start netesto agents (and other testbed processes) inside namespaces, with fresh CURVE keys.

Every process is started detached (its own session, output to a log file)
through ``ip netns exec``, which execs the command in place: the PID we get
is the agent's own, and it is recorded with its start time in the testbed's
state so ``down`` stops exactly it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

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


@dataclass(frozen=True)
class LabKeys:
    """A testbed's fresh key pairs: ``<tb>.keys/`` with the controller's public key authorized."""

    tb_name: str
    dir: Path
    keys: dict[str, tuple[Path, Path]]  # name -> (public, secret)
    authorized: Path

    @property
    def controller_key(self) -> str:
        """The controller's secret key, relative to the lab file (which sits beside ``dir``)."""
        return f"{self.tb_name}.keys/controller.key_secret"

    def public_key(self, name: str) -> str:
        return f"{self.tb_name}.keys/{name}.key"


def create_lab_keys(base: Path, tb_name: str, names: Sequence[str]) -> LabKeys:
    """Key pairs for the controller and every agent of testbed ``tb_name`` under ``base``."""
    keys_dir = base / f"{tb_name}.keys"
    keys = create_keys(keys_dir, ["controller", *names])
    authorized = keys_dir / "authorized"
    authorized.mkdir(exist_ok=True)
    shutil.copy(keys["controller"][0], authorized / "controller.key")
    return LabKeys(tb_name, keys_dir, keys, authorized)


@dataclass(frozen=True)
class AgentPlace:
    """Where one testbed agent runs: its name, namespace (None = here), address, port, extra env."""

    name: str
    ns: str | None
    bind: str
    port: int
    env: Mapping[str, str] = field(default_factory=dict)


def start_agents(base: Path, lab_keys: LabKeys, places: Sequence[AgentPlace], record: Callable[[Started], None],
                 timeout: float = 20.0) -> None:
    """Start an agent at every place (all at once, each recorded as it starts), then wait until each listens."""
    logs = base / f"{lab_keys.tb_name}.logs"
    waiting = []
    for pl in places:
        ready = logs / f"{pl.name}.ready"
        ready.unlink(missing_ok=True)
        argv = agent_argv(bind=pl.bind, port=pl.port, name=pl.name, secret_key=lab_keys.keys[pl.name][1],
                          authorized_dir=lab_keys.authorized, datadir=base / f"{lab_keys.tb_name}.data" / pl.name, ready_file=ready)
        started = spawn("agent", pl.name, pl.ns, argv, logs / f"{pl.name}.log", env=pl.env)
        record(started)
        waiting.append((started, ready))
    for started, ready in waiting:
        wait_file(ready, started, timeout=timeout)


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
