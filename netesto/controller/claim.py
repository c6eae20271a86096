"""Claims: a lab owned by one run (or one reshape) at a time, proven by a secret token per run.

A run makes a token (:func:`new_token`) and every request of the run carries it
(:attr:`AgentConnection.claim_token <netesto.controller.connection.AgentConnection>`);
the agent binds its claim to the token and to the controller's CURVE key
(:mod:`netesto.agent.owner`), so a run that reconnects after a stall keeps its claim
and no other controller takes it by copying a routing id.

:class:`LabClaim` holds a claim on every agent of a lab for as long as its ``with``
block lasts: a reshape of a testbed (:func:`netesto.testbed.reshape`), or several
runs in a row (``run(..., claim=held)``) that nobody may come between::

    with LabClaim(lab, run="bw sweep") as held:
        reshape("tb", bw="20mbit", claim=held)
        run(script, lab=lab, claim=held)
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any, Callable

from netesto.controller.lab import Lab, LabHost
from netesto.errors import AgentError, NetestoError

CLAIM_WAIT = 15.0  # seconds a run waits for a gone controller's lease to lapse


def new_token() -> str:
    """A run's claim token: 128 random bits as 32 hex digits (sent only inside CURVE-encrypted requests)."""
    return secrets.token_hex(16)


def controller_name() -> str:
    """Who runs this controller, for "lab busy" messages: user@host pid N."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def claim(client: Any, run_id: str, token: str | None = None, wait: float = CLAIM_WAIT) -> None:
    """Claim the agent for run ``run_id`` with ``token`` (sent from now on in every request of
    ``client``). A lab whose owner's claim lapses within ``wait`` seconds (a controller that
    was killed: its agents do not all time it out at the same moment) is waited for; a live
    owner renews its claim and the busy error stands."""
    deadline = time.monotonic() + wait
    if token is not None:
        client.claim_token = token
    while True:
        try:
            client.claim(run_id, controller_name())
            return
        except AgentError as exc:
            left = exc.detail.get("lease_left") if exc.kind == "Busy" and isinstance(exc.detail, dict) else None
            if not isinstance(left, (int, float)) or time.monotonic() + left > deadline:
                client.claim_token = None  # not ours: nothing more goes out with it
                raise
            time.sleep(min(float(left), 5.0) + 0.2)


def default_client_factory(host: LabHost, lab: Lab) -> Any:
    """An AgentClient for ``host`` with the lab's keys (imported late: pulls zmq)."""
    from netesto.controller.client import AgentClient

    if lab.insecure:
        return AgentClient(host.name, host.control, host.port, insecure=True)
    return AgentClient(
        host.name,
        host.control,
        host.port,
        server_key=host.public_key,
        client_keys=lab.controller_key,
    )


class LabClaim:
    """Every agent of ``lab`` claimed for run ``run`` until :meth:`release` (or the ``with``
    block's end). The connections stay open meanwhile: their heartbeats keep the claim."""

    def __init__(self, lab: Lab, *, run: str | None = None, wait: float = CLAIM_WAIT,
                 client_factory: Callable[[LabHost, Lab], Any] = default_client_factory) -> None:
        self.lab = lab
        self.run_id = run or secrets.token_hex(4)
        self.token = new_token()
        self.wait = wait
        self.client_factory = client_factory
        self.clients: dict[str, Any] = {}

    @property
    def lab_file(self) -> Path | None:
        """The lab file the claimed lab was read from (None for a lab made in code)."""
        return self.lab.path

    @property
    def held(self) -> bool:
        return bool(self.clients)

    def acquire(self) -> "LabClaim":
        """Claim every agent (an AgentError "lab busy ..." naming the holder if one is owned)."""
        try:
            for host in self.lab:
                client = self.client_factory(host, self.lab)
                self.clients[host.name] = client
                if "claim" in client.hello().commands:
                    claim(client, self.run_id, self.token, self.wait)
        except BaseException:
            self.release()
            raise
        return self

    def renew(self) -> None:
        """Claim again on every agent: an AgentError if one no longer holds our claim (its
        lease lapsed and another run took it) or does not answer."""
        if not self.clients:
            raise AgentError(f"the claim of run {self.run_id} on lab {self.lab.name!r} is not held")
        for client in self.clients.values():
            claim(client, self.run_id, self.token, wait=0.0)

    def release(self) -> None:
        """Release every agent and close the connections (best effort: a claim lapses anyway)."""
        clients, self.clients = self.clients, {}
        for client in clients.values():
            try:
                if client.claim_token is not None:
                    client.release(timeout=1.0)
            except NetestoError:
                pass
            try:
                client.close()
            except Exception:  # closing is best effort
                pass

    def __enter__(self) -> "LabClaim":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.clients else "not held"
        return f"<LabClaim run {self.run_id} on lab {self.lab.name!r}, {state}>"


__all__ = ["CLAIM_WAIT", "LabClaim", "claim", "controller_name", "default_client_factory", "new_token"]
