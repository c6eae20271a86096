"""Sessions with the lab's agents: connect on first use, hello, claim, clock offsets, drop, close.

One :class:`HostSession` per lab host. A host is connected the first time the run
needs it (hello once, its protocol checked, the agent claimed for this run, the clock
offset taken from the lowest-RTT of several round trips and refreshed when older than
``clock_refresh``). A host that stops answering is *dropped*: the run goes on without it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from netesto.controller.claim import CLAIM_WAIT, claim, controller_name, default_client_factory
from netesto.controller.lab import Lab, LabHost
from netesto.controller.progress import Notice, ProgressEvent
from netesto.errors import AgentError, AgentUnreachable, NetestoError
from netesto.protocol.replies import HelloReply
from netesto.protocol.version import check_compatible

ClientFactory = Callable[[LabHost, Lab], Any]
DROPPED_RELEASE_TIMEOUT = 1.0  # seconds the release of a dropped host may take at the end of a run


@dataclass
class HostSession:
    """The run's connection to one lab host."""

    lab: LabHost
    client: Any = None
    info: HelloReply = field(default_factory=HelloReply)  # what its agent said at hello
    offset: float = 0.0
    rtt: float = 0.0
    offset_at: float = 0.0  # time.monotonic() of the estimate
    dead: str = ""  # why the host was dropped
    changed: bool = False  # sysctl/qdisc/netem/module params set through this agent
    leftover: frozenset[str] = frozenset()  # experiments it held, unfetched, when this run connected


class Sessions:
    """The run's host sessions, by lab host name (``hosts``)."""

    def __init__(
        self,
        lab: Lab,
        client_factory: ClientFactory,
        *,
        run_id: str,
        token: str | None = None,
        release: bool = True,
        emit: Callable[[ProgressEvent], None],
        on_event: Callable[[str, Any], None],
        clock_samples: int = 8,
        clock_refresh: float = 60.0,
    ) -> None:
        self.lab = lab
        self.client_factory = client_factory
        self.run_id = run_id
        self.token = token  # the run's claim token, in every request to every agent
        self.release = release  # False: the claim is someone else's (a LabClaim the run went on under)
        self.emit = emit
        self.on_event = on_event
        self.clock_samples = clock_samples
        self.clock_refresh = clock_refresh
        self.hosts: dict[str, HostSession] = {}

    def open(self, name: str) -> HostSession:
        """The connected host ``name`` resolves to (hello + clock on first use)."""
        lh = self.lab.resolve(name)
        h = self.hosts.get(lh.name)
        if h is None:
            h = self.hosts[lh.name] = HostSession(lab=lh)
        if h.dead:
            raise AgentUnreachable(f"dropped earlier: {h.dead}", host=lh.name)
        if h.client is None:
            try:
                client = self.client_factory(lh, self.lab)
            except AgentError:
                raise
            except NetestoError as exc:
                raise AgentError(str(exc), host=lh.name) from exc
            try:
                self._hello(h, client)
            except BaseException:
                h.client = None
                try:
                    client.close()
                except Exception:
                    pass
                raise
        return h

    def _hello(self, h: HostSession, client: Any) -> None:
        name = h.lab.name
        h.info = client.hello()
        if h.info.protocol:
            check_compatible(h.info.protocol, host=name)
        if "claim" in h.info.commands:  # one controller at a time (older agents: no claim)
            claim(client, self.run_id, self.token)
        h.client = client
        left = list(h.info.unfetched)
        h.leftover = frozenset(left)
        if left:
            self.emit(Notice(host=name, text=(
                f"holds unfetched data of earlier experiment(s) {', '.join(left)} "
                "(collect it with 'netesto run --collect' or netesto.controller.collect)")))
        if h.info.stopped_at_start:
            self.emit(Notice(host=name, text=(
                f"stopped {len(h.info.stopped_at_start)} process(es) an earlier agent left running, as it started: "
                + "; ".join(h.info.stopped_at_start[:5]) + (" ..." if len(h.info.stopped_at_start) > 5 else ""))))
        if hasattr(client, "on_event"):
            client.on_event(lambda ev, _h=name: self.on_event(_h, ev))
        self.clock(h)

    def clock(self, h: HostSession, *, force: bool = False) -> None:
        """Estimate ``h``'s clock offset again if the last estimate is too old."""
        if force or not h.offset_at or time.monotonic() - h.offset_at > self.clock_refresh:
            h.offset, h.rtt = h.client.clock_offset(samples=self.clock_samples)
            h.offset_at = time.monotonic()

    def drop(self, name: str, exc: AgentError) -> bool:
        """Mark host ``name`` dropped (True the first time: the caller reports it)."""
        lh = self.lab.resolve(name)
        h = self.hosts.setdefault(lh.name, HostSession(lab=lh))
        if h.dead:
            return False
        h.dead = str(exc)
        return True

    def is_dead(self, name: str) -> bool:
        """Whether host ``name`` (a lab host name) was dropped or never connected."""
        h = self.hosts.get(name)
        return h is None or bool(h.dead)

    def live(self) -> list[HostSession]:
        """The connected hosts that were not dropped."""
        return [h for h in self.hosts.values() if h.client is not None and not h.dead]

    def poll_events(self) -> None:
        """Deliver the agents' pushed events that arrived while no request was in flight."""
        for h in list(self.hosts.values()):
            if h.client is None or h.dead or not hasattr(h.client, "poll_events"):
                continue
            try:
                h.client.poll_events(0)
            except NetestoError:
                pass  # a broken connection shows up at the next real request

    def close(self) -> None:
        """Release every claimed agent and close every connection (best effort)."""
        for h in self.hosts.values():
            if h.client is not None:
                try:
                    if "claim" in h.info.commands and self.release:
                        # a dropped host gets a short try: alive, it frees its claim now; dead, it
                        # does not hold the run's end for a whole timeout (its lease lapses anyway)
                        h.client.release(timeout=DROPPED_RELEASE_TIMEOUT if h.dead else None)
                except NetestoError:
                    pass  # its lease lapses anyway, and the claim with it
                try:
                    h.client.close()
                except Exception:  # closing is best effort: the run's outcome is already decided
                    pass
                h.client = None


__all__ = ["CLAIM_WAIT", "ClientFactory", "DROPPED_RELEASE_TIMEOUT", "HostSession", "Sessions", "claim",
           "controller_name", "default_client_factory"]
