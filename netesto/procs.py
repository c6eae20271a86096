"""Process ties through Linux prctl: children that die with their parent, tight timers."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any, Callable

PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29
_libc: Any = None


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is no prctl (not Linux)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return True


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """In a child: get ``sig`` when the parent dies, even by SIGKILL.

    Checks ``parent`` afterwards: a parent that died before the prctl would
    otherwise leave this child running with no one to stop it.
    """
    if _prctl(PR_SET_PDEATHSIG, int(sig)) and os.getppid() != parent:
        os.kill(os.getpid(), sig)


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` tying the child to the calling process (no server outlives the agent)."""
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)


def precise_timers() -> None:
    """Ask for 1 ns timer slack (default 50 us) in this process: sleeps end when asked."""
    _prctl(PR_SET_TIMERSLACK, 1)


__all__ = ["die_with_parent", "parent_death_signal", "precise_timers"]
