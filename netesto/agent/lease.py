"""The controller's lease: renewed by every request; on expiry the agent stops and restores."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Lease:
    """Held by the last controller that spoke to us, for ``seconds`` after its last request.

    ``tick()`` says what happened since the previous call: ``"warning"`` once
    when a third of the lease is left, ``"expired"`` once when it runs out.
    """

    seconds: float = 30.0
    holder: bytes | None = None
    deadline: float = 0.0
    _warned: bool = False

    def renew(self, identity: bytes, now: float | None = None) -> None:
        self.holder = identity
        self.deadline = (time.monotonic() if now is None else now) + self.seconds
        self._warned = False

    @property
    def active(self) -> bool:
        return self.holder is not None

    def remaining(self, now: float | None = None) -> float:
        if not self.active:
            return 0.0
        return self.deadline - (time.monotonic() if now is None else now)

    def tick(self, now: float | None = None) -> str | None:
        if not self.active or self.seconds <= 0:
            return None
        left = self.remaining(now)
        if left <= 0:
            self.holder = None
            return "expired"
        if not self._warned and left <= self.seconds / 3:
            self._warned = True
            return "warning"
        return None


__all__ = ["Lease"]
