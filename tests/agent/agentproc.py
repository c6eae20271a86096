"""Test helpers: real netesto-agent processes (loopback or inside a namespace), keys, clients."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netesto.commands.keys import create_keys
from netesto.controller.client import AgentClient

REPO = Path(__file__).resolve().parents[2]
AGENT = "netesto.agent.cli"
FAULTY_AGENT = "tests.agent.faulty_agent"  # the agent with test-only faults (NETESTO_AGENT_FAULT)


@dataclass
class Keys:
    """A key directory: agent pair, controller pair, an unauthorized intruder pair."""

    dir: Path

    @classmethod
    def make(cls, base: Path) -> "Keys":
        keys = cls(base)
        for name in ("agent", "controller", "intruder"):
            create_keys(base, name)
        (base / "authorized").mkdir()
        (base / "authorized" / "controller.key").write_bytes((base / "controller.key").read_bytes())
        return keys

    @property
    def agent_public(self) -> Path:
        return self.dir / "agent.key"


@dataclass
class AgentProc:
    proc: subprocess.Popen
    port: int
    address: str
    datadir: Path
    log: Path
    keys: Keys | None
    argv: list[str] = field(default_factory=list)

    def client(self, name: str = "h1", *, key: str = "controller", **kw: Any) -> AgentClient:
        if self.keys is None:
            return AgentClient(name, self.address, self.port, insecure=True, **kw)
        return AgentClient(name, self.address, self.port, server_key=self.keys.agent_public,
                           client_keys=self.keys.dir / f"{key}.key_secret", **kw)

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def logged(self, *texts: str, timeout: float = 10.0) -> bool:
        """Whether every one of ``texts`` shows up in the log within ``timeout``: the agent
        may write a line just after the effect a test saw (restore done, reply sent)."""
        return wait_for(lambda: all(t in self.log_text() for t in texts), timeout=timeout)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def agent_argv(*, bind: str, datadir: Path, log: Path, ready: Path, keys: Keys | None, port: int = 0,
               extra: tuple[str, ...] = (), module: str = AGENT) -> list[str]:
    argv = [sys.executable, "-m", module, "--bind", bind, "--port", str(port), "--datadir", str(datadir),
            "--log-file", str(log), "--ready-file", str(ready), "--name", "h1"]
    if keys is None:
        argv.append("--insecure")
    else:
        argv += ["--keys", str(keys.dir), "--key-name", "agent", "--authorized", str(keys.dir / "authorized")]
    return argv + list(extra)


def start_agent(workdir: Path, *, keys: Keys | None, bind: str = "127.0.0.1", extra: tuple[str, ...] = (),
                env: dict[str, str] | None = None, netns: str | None = None, tag: str = "agent",
                datadir: Path | None = None, port: int = 0, wait: bool = True, module: str = AGENT) -> AgentProc:
    """Start ``python -m netesto.agent.cli`` (or another entry point ``module``, such as
    :data:`FAULTY_AGENT`) inside ``netns`` if given, and wait until it listens."""
    datadir = datadir or workdir / f"{tag}-data"
    log = workdir / f"{tag}.log"
    ready = workdir / f"{tag}.ready"
    ready.unlink(missing_ok=True)
    argv = agent_argv(bind=bind, datadir=datadir, log=log, ready=ready, keys=keys, port=port, extra=extra,
                      module=module)
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    penv = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen(full, env=penv, stdout=subprocess.DEVNULL, stderr=open(workdir / f"{tag}.stderr", "ab"))
    agent = AgentProc(proc, 0, bind, datadir, log, keys, full)
    if wait:
        deadline = time.monotonic() + 20
        while not ready.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited with {proc.returncode}: {(workdir / f'{tag}.stderr').read_text()}"
                                   f"{agent.log_text()}")
            if time.monotonic() > deadline:
                agent.kill()
                raise RuntimeError("agent did not become ready in 20 s")
            time.sleep(0.02)
        agent.port = int(ready.read_text())
    return agent


def run_in_ns(netns: str, code: str, timeout: float = 60, **env: str) -> Any:
    """Run a Python snippet inside ``netns``; it must print one JSON value as its last line."""
    proc = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})
    if proc.returncode != 0:
        raise RuntimeError(f"snippet in {netns} failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
