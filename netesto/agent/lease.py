"""Controller leases: renewed by every request; when the last one lapses the agent stops and restores."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Lease:
    """Each controller (ROUTER identity) holds the lease for ``seconds`` after its last request.

    Events go to every current holder (a runner and a status monitor can both be
    connected). ``tick()`` says what happened since the previous call:
    ``"warning"`` once when a third of the lease is left, ``"expired"`` once when
    the last holder lapsed. ``seconds <= 0`` means leases never expire.
    """

    seconds: float = 30.0
    deadlines: dict[bytes, float] = field(default_factory=dict)
    _warned: bool = False

    def renew(self, identity: bytes, now: float | None = None) -> None:
        self.deadlines[identity] = (time.monotonic() if now is None else now) + self.seconds
        self._warned = False

    @property
    def active(self) -> bool:
        return bool(self.deadlines)

    @property
    def holder(self) -> bytes | None:
        """The controller heard from most recently (None if none holds the lease)."""
        if not self.deadlines:
            return None
        return max(self.deadlines, key=self.deadlines.__getitem__)

    def holders(self) -> list[bytes]:
        return list(self.deadlines)

    def remaining(self, now: float | None = None) -> float:
        if not self.deadlines:
            return 0.0
        return max(self.deadlines.values()) - (time.monotonic() if now is None else now)

    def tick(self, now: float | None = None) -> str | None:
        if not self.deadlines or self.seconds <= 0:
            return None
        now = time.monotonic() if now is None else now
        for identity, deadline in list(self.deadlines.items()):
            if deadline <= now and len(self.deadlines) > 1:
                del self.deadlines[identity]  # another controller still holds the lease
        left = self.remaining(now)
        if left <= 0:
            self.deadlines.clear()
            return "expired"
        if not self._warned and left <= self.seconds / 3:
            self._warned = True
            return "warning"
        return None


__all__ = ["Lease"]
