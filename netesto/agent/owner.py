"""One controller at a time: the run that claimed an agent owns it until it releases or its claim lapses.

A claim belongs to a run, not to a socket. The controller makes a secret token per
run and sends it in every request of the run (the envelope's ``c``, inside CURVE's
encryption); the agent keeps only its sha256 and the CURVE public key that claimed
(the ZAP handler's User-Id of the claiming message). A request proves it belongs to
the owning run when it carries the token *and* comes with that key, whatever socket
(ZeroMQ routing id) it arrives on: a controller that reconnects after a stall keeps
its claim, and copying the owner's routing id proves nothing. A controller that sends
no token (one that predates them) is bound to its routing id, as before.

The claim lapses ``lease`` seconds after the run was last heard from; the server then
stops its flows and restores the host, as at a lease's expiry.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import time
from dataclasses import dataclass

from netesto.agent.lease import Lease
from netesto.errors import AgentError
from netesto.protocol.replies import ClaimReply, ReleaseReply
from netesto.protocol.text import printable

# What another controller may still ask while a run owns the agent: nothing that changes the
# host, starts or stops anything, or takes data (a --collect must not take a live run's data).
SHARED = frozenset({"hello", "time", "heartbeat", "status", "claim", "release", "shape"})


def digest(token: str | None) -> bytes | None:
    return hashlib.sha256(token.encode()).digest() if token else None


@dataclass(frozen=True)
class Peer:
    """Who sent a request: its connection, the CURVE key it authenticated with, its claim token."""

    identity: bytes
    key: str | None = None  # z85 public key (None without CURVE)
    token: str | None = None


@dataclass
class Owner:
    run: str  # what the claimer called its run and itself: shown, never trusted
    controller: str
    since: float  # wall clock, for the message
    key: str | None
    token: bytes | None  # sha256 of the run's token; None: a controller without tokens, bound to ``identity``
    identity: bytes
    deadline: float  # time.monotonic() when the claim lapses unless the run is heard from

    def holds(self, peer: Peer) -> bool:
        """Whether ``peer``'s request belongs to this owner's run."""
        if self.token is None:
            return peer.token is None and peer.identity == self.identity
        theirs = digest(peer.token)
        return theirs is not None and hmac.compare_digest(theirs, self.token) and peer.key == self.key

    def describe(self) -> str:
        when = _dt.datetime.fromtimestamp(self.since).isoformat(timespec="seconds")
        who = (f"the controller with CURVE key {self.key}" if self.key
               else "a controller without CURVE (loopback)")
        said = f"'{printable(self.run, 64)}' (calling itself '{printable(self.controller, 200)}')"
        return f"run {said}, claimed by {who} since {when}"

    def busy(self, lease: Lease) -> AgentError:
        left = max(self.deadline - time.monotonic(), 0.0) if lease.seconds > 0 else float("inf")
        lapse = "it never lapses (lease 0)" if left == float("inf") else \
            f"if that controller is gone, its claim lapses in {left:.0f} s"
        return AgentError(f"lab busy: {self.describe()}; {lapse}", kind="Busy",
                          detail={"run": self.run, "controller": self.controller, "since": self.since,
                                  "key": self.key, "lease_left": round(min(left, 1e9), 3)})


class Ownership:
    """Who owns the agent. An owner not heard from for a lease owns nothing."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.owner: Owner | None = None

    def lapsed(self, now: float | None = None) -> Owner | None:
        """The owner whose claim lapsed since the last call (it owns nothing from now on)."""
        owner = self.owner
        now = time.monotonic() if now is None else now
        if owner is not None and self.lease.seconds > 0 and owner.deadline <= now:
            self.owner = None
            return owner
        return None

    def current(self) -> Owner | None:
        self.lapsed()
        return self.owner

    def _renew(self, owner: Owner) -> None:
        owner.deadline = time.monotonic() + self.lease.seconds

    def check(self, peer: Peer, command: str) -> None:
        """AgentError "lab busy ..." when ``peer`` may not run ``command`` now; a request of
        the owning run renews its claim."""
        owner = self.current()
        if owner is None:
            return
        if owner.holds(peer):
            self._renew(owner)
        elif command not in SHARED:
            raise owner.busy(self.lease)

    def claim(self, peer: Peer, run: str, controller: str) -> ClaimReply:
        owner = self.current()
        if owner is not None and not owner.holds(peer):
            raise owner.busy(self.lease)
        if owner is None or owner.run != run:
            owner = self.owner = Owner(run or "?", controller or "?", time.time(), peer.key, digest(peer.token),
                                       peer.identity, 0.0)
        self._renew(owner)
        return ClaimReply(owner.run, owner.since)

    def release(self, peer: Peer) -> ReleaseReply:
        owner = self.current()
        if owner is not None and owner.holds(peer):
            self.owner = None
            return ReleaseReply(True)
        return ReleaseReply(False)


__all__ = ["Owner", "Ownership", "Peer", "SHARED", "digest"]
