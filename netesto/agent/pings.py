"""Ping collectors an agent runs next to its flows, closed when their time is over."""

from __future__ import annotations

import ipaddress
import logging
import time
from typing import Any

from netesto.agent.store import DataStore, exp_name
from netesto.errors import AgentError, NetestoError
from netesto.protocol.errorkinds import error_kind
from netesto.protocol.names import is_name
from netesto.protocol.replies import PingReply

log = logging.getLogger("netesto.agent.flows")


class Pings:
    """The running ping collectors by experiment, each with the time it is over."""

    def __init__(self, store: DataStore, host: str) -> None:
        self.store = store
        self.host = host
        self.collectors: dict[str, list[tuple[float, Any]]] = {}

    def start(self, exp: Any, target: str, label: str, *, interval: float = 0.2, duration: float = 10.0) -> PingReply:
        """Ping ``target`` for ``duration`` s into ``ping/<host>-<label>.nflow`` of ``exp``."""
        try:
            from netesto.collectors.ping import PingCollector
        except ImportError as exc:
            raise AgentError(f"ping collection is not available on this agent: {exc}", kind="Unavailable") from exc
        name = exp_name(exp)
        if not 0 < duration <= 10**6:  # also NaN: ping's -w takes whole seconds
            raise AgentError(f"ping {target}: duration {duration} is outside (0, 1000000] s", kind="UsageError")
        for what, value in (("name", label), ("target", target)):  # never a path, never an option to ping
            if not is_name(value, 253):
                raise AgentError(f"bad ping {what} {str(value)[:80]!r}: expected a host name or address",
                                 kind="UsageError")
        try:  # an address stays whole: its first label would give 10.0.0.2 and 10.0.0.3 one file
            label = str(ipaddress.ip_address(label)).replace(":", "_")
        except ValueError:
            label = label.split(".")[0]
        short = self.host.split(".")[0]
        dest = self.store.exp_dir(name) / "ping" / f"{short}-{label}.nflow"
        if dest.exists():  # running or done, unfetched: the collector would truncate it
            raise AgentError(f"ping/{dest.name} already has data in experiment {name} on this agent: fetch and "
                             "acknowledge it first, or use another name or experiment", kind="Busy")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            collector = PingCollector(target, dest, interval, duration)
            if hasattr(collector, "start"):
                collector.start()
        except NetestoError as exc:
            raise AgentError(f"ping {target}: {exc.message}", kind=error_kind(exc)) from exc
        except OSError as exc:
            raise AgentError(f"ping {target}: {exc}", kind="Unavailable") from exc
        self.collectors.setdefault(name, []).append((time.monotonic() + duration + 2.0, collector))
        return PingReply(dest.relative_to(self.store.exp_dir(name)).as_posix())

    @staticmethod
    def _stop(collector: Any) -> None:
        try:
            collector.stop()  # returns at once if ping already ended; closes its file
        except Exception as exc:  # a collector failing to stop must not stop the stop
            log.warning("stopping ping: %s", exc)

    def reap(self, exp: str | None = None) -> None:
        """Close ping collectors whose duration is over (or all of ``exp``'s)."""
        now = time.monotonic()
        for key in list(self.collectors):
            keep = []
            for end, collector in self.collectors[key]:
                if key == exp or now > end:
                    self._stop(collector)
                else:
                    keep.append((end, collector))
            if keep:
                self.collectors[key] = keep
            else:
                del self.collectors[key]

    def stop(self, exp: str | None = None) -> None:
        """Stop the collectors of ``exp`` (every one if None) now."""
        for key in list(self.collectors):
            if exp is None or key == exp:
                for _, collector in self.collectors.pop(key):
                    self._stop(collector)


__all__ = ["Pings"]
