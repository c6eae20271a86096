"""Test helper: real netesto-agent processes (in namespaces or on loopback) and CURVE keys."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import zmq.auth

Popen = Callable[[list[str]], subprocess.Popen]


@dataclass
class AgentProc:
    name: str
    proc: subprocess.Popen
    port: int
    datadir: Path
    log: Path

    def kill(self) -> None:
        """SIGKILL the agent (by PID)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Keys:
    """CURVE keys: the controller's pair and one pair per agent, in ``root``."""

    root: Path
    controller_secret: Path
    authorized: Path

    def agent(self, name: str) -> tuple[Path, Path]:
        """(public, secret) key files of agent ``name`` (created on first use)."""
        d = self.root / "agents"
        d.mkdir(parents=True, exist_ok=True)
        pub, sec = d / f"{name}.key", d / f"{name}.key_secret"
        if not sec.exists():
            zmq.auth.create_certificates(str(d), name)
        return pub, sec


def make_keys(root: Path) -> Keys:
    ctl = root / "controller"
    ctl.mkdir(parents=True)
    _, secret = zmq.auth.create_certificates(str(ctl), "controller")
    auth = root / "authorized"
    auth.mkdir()
    (auth / "controller.key").write_text((ctl / "controller.key").read_text())
    return Keys(root, Path(secret), auth)


def start_agent(
    popen: Popen,
    name: str,
    bind: str,
    tmp: Path,
    *,
    keys: Keys | None = None,
    port: int = 0,
    timeout: float = 20.0,
    test_bind: str = "",
    lease: float | None = None,
) -> AgentProc:
    """Start ``python -m netesto.agent.cli`` via ``popen`` and wait until it listens.

    The flow engine's server listens on ``test_bind`` (default: ``bind``)."""
    datadir = tmp / f"agent-{name}"
    datadir.mkdir(parents=True, exist_ok=True)
    ready = tmp / f"agent-{name}.port"
    log = tmp / f"agent-{name}.log"
    argv = [sys.executable, "-m", "netesto.agent.cli", "--bind", bind, "--port", str(port),
            "--test-bind", test_bind or bind, "--datadir", str(datadir), "--name", name,
            "--ready-file", str(ready), "--log-file", str(log)]
    if lease is not None:
        argv += ["--lease", str(lease)]
    if keys is None:
        argv.append("--insecure")
    else:
        _, secret = keys.agent(name)
        argv += ["--keys", str(secret), "--authorized", str(keys.authorized)]
    proc = popen(argv)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists() and ready.read_text().strip():
            return AgentProc(name, proc, int(ready.read_text().split()[0]), datadir, log)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    text = log.read_text() if log.exists() else ""
    raise RuntimeError(f"agent {name} did not start (status {proc.poll()}): {text[-2000:]}")


def loopback_popen(argv: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
