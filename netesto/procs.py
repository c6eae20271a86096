"""Process ties through Linux prctl: children that die with their parent, tight timers, names."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any, Callable

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_TIMERSLACK = 29
SPARE_NAME = "netesto-spare"  # a flow-engine client waiting for its specs (netesto.agent.spare), as ps shows it
SPARE_RUNNING = "netesto-client"  # ... and once it has them
_libc: Any = None


def _prctl(option: int, value: int | bytes) -> bool:
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


def name_process(name: str) -> None:
    """Call this process ``name`` (its /proc comm, what ps and top show; 15 bytes at most)."""
    _prctl(PR_SET_NAME, name.encode()[:15])


__all__ = ["SPARE_NAME", "SPARE_RUNNING", "die_with_parent", "name_process", "parent_death_signal", "precise_timers"]
