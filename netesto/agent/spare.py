"""A flow-engine client started ahead of its flows, so that a batch's flows are ready sooner.

A start_flows request used to start ``python -m netesto.engine client`` then and there: its
interpreter and imports (0.1-0.2 s on this project's 2-vCPU machines, 0.3-0.5 s at load 7) came
between the request and the flows being connected, and every batch's start lead had to cover
them (:mod:`netesto.controller.startlead`). The agent keeps one client started ahead with
``--specs -`` instead: imported, it waits for one line on its stdin, the path of its specs file,
and runs them as any client does (``ps`` shows a waiting one as ``netesto-spare``). A spare is
started with the agent and again whenever a client run ends with no other one running, never
while flows run (its start-up would take their CPU). It ends with the agent: its stdin closed, or
the parent-death signal if the agent is killed. A spare that died or cannot be handed its specs is
replaced by a client started as before.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from netesto.agent.engineserver import engine_argv, kill
from netesto.agent.store import DataStore
from netesto.procs import parent_death_signal

log = logging.getLogger("netesto.agent.spare")


class SpareClient:
    """At most one engine client process waiting for its specs (see the module)."""

    def __init__(self, store: DataStore) -> None:
        self.store = store
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: Path | None = None
        self._n = 0
        for old in store.private.glob("spare-client-*.stderr"):  # a killed agent's spare's
            old.unlink(missing_ok=True)

    def refill(self) -> None:
        """Start a spare unless one waits already."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self._drop()
        self._n += 1
        path = self.store.private / f"spare-client-{os.getpid()}-{self._n}.stderr"
        argv = engine_argv("client", "--specs", "-", "--datadir", str(self.store.root))
        try:
            with open(path, "wb") as errlog:
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog,
                                             preexec_fn=parent_death_signal())
        except OSError as exc:
            log.warning("cannot start a spare flow engine client (flows start one each): %s", exc)
            path.unlink(missing_ok=True)
            return
        self.stderr = path

    def take(self, specs: Path) -> tuple[subprocess.Popen[bytes], Path] | None:
        """The spare, handed ``specs`` (its process and stderr file), or None when there is none alive."""
        proc, stderr = self.proc, self.stderr
        self.proc = self.stderr = None
        if proc is None or stderr is None:
            return None
        if proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(f"{specs}\n".encode())
                proc.stdin.close()
                return proc, stderr
            except OSError:  # it died meanwhile
                pass
        log.warning("the spare flow engine client (pid %d) had ended (status %s): starting one for these flows",
                    proc.pid, proc.poll())
        self.proc, self.stderr = proc, stderr
        self._drop()
        return None

    def close(self) -> None:
        """End the spare (its stdin closed: it exits without running anything)."""
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self._drop()

    def _drop(self) -> None:
        proc, stderr = self.proc, self.stderr
        self.proc = self.stderr = None
        if proc is not None:
            kill(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        if stderr is not None:
            stderr.unlink(missing_ok=True)


__all__ = ["SpareClient"]
