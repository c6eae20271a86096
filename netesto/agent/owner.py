"""One controller at a time: the run that claimed an agent owns it until it releases or its lease lapses."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass

from netesto.agent.lease import Lease
from netesto.errors import AgentError
from netesto.protocol.replies import ClaimReply, ReleaseReply

# What another controller may still ask while a run owns the agent: nothing that changes the
# host, starts or stops anything, or takes data (a --collect must not take a live run's data).
SHARED = frozenset({"hello", "time", "heartbeat", "status", "claim", "release"})


@dataclass(frozen=True)
class Owner:
    identity: bytes
    run: str
    controller: str
    since: float  # wall clock, for the message

    def busy(self, lease: Lease) -> AgentError:
        when = _dt.datetime.fromtimestamp(self.since).isoformat(timespec="seconds")
        left = lease.deadlines.get(self.identity, 0.0) - time.monotonic()
        return AgentError(f"lab busy: run {self.run} from controller {self.controller} since {when} "
                          f"(if that controller is gone, its lease lapses in {max(left, 0.0):.0f} s)",
                          kind="Busy", detail={"run": self.run, "controller": self.controller, "since": self.since,
                                               "lease_left": round(max(left, 0.0), 3)})


class Ownership:
    """Who owns the agent. An owner whose lease lapsed (it crashed, or was cut off) owns nothing."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.owner: Owner | None = None

    def current(self) -> Owner | None:
        if self.owner is not None and self.owner.identity not in self.lease.deadlines:
            self.owner = None
        return self.owner

    def check(self, identity: bytes, command: str) -> None:
        """AgentError "lab busy ..." when ``identity`` may not run ``command`` now."""
        owner = self.current()
        if owner is not None and owner.identity != identity and command not in SHARED:
            raise owner.busy(self.lease)

    def claim(self, identity: bytes, run: str, controller: str) -> ClaimReply:
        owner = self.current()
        if owner is not None and owner.identity != identity:
            raise owner.busy(self.lease)
        if owner is None or owner.run != run:
            self.owner = Owner(identity, run or "?", controller or "?", time.time())
        return ClaimReply(self.owner.run if self.owner else run, self.owner.since if self.owner else 0.0)

    def release(self, identity: bytes) -> ReleaseReply:
        owner = self.current()
        if owner is not None and owner.identity == identity:
            self.owner = None
            return ReleaseReply(True)
        return ReleaseReply(False)


__all__ = ["Owner", "Ownership", "SHARED"]
