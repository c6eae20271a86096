"""Process ties through Linux prctl: children that die with their parent, tight timers, names."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any, Callable

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_SET_NAME = 15
PR_SET_TIMERSLACK = 29
SPARE_NAME = "netesto-spare"  # a flow-engine client waiting for its specs (netesto.agent.spare), as ps shows it
SPARE_RUNNING = "netesto-client"  # ... and once it has them
_libc: Any = None


def _load() -> Any:
    """The C library (None where there is none to load): loaded once, in the process that asks first."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
    return _libc


def _prctl(option: int, value: Any) -> bool:
    """``prctl(option, value)``; False where there is no prctl (not Linux)."""
    try:
        _load().prctl(option, value, 0, 0, 0)
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
    """A ``preexec_fn`` tying the child to the calling process (no server outlives the agent).

    The C library is loaded here, in the parent: a child forked from a process with
    threads (the agent's ZeroMQ I/O threads) must not take the loader's lock.
    """
    parent = os.getpid()
    _load()
    return lambda: die_with_parent(parent, sig)


def death_signal() -> int:
    """The signal this process gets when its parent dies; 0 when none was asked (or no prctl)."""
    sig = ctypes.c_int(0)
    if not _prctl(PR_GET_PDEATHSIG, ctypes.byref(sig)):
        return 0
    return sig.value


def orphaned(parent: int) -> int:
    """The death signal this process asked for, if ``parent`` is no longer its parent; else 0.

    For a process that must not outlive ``parent`` (an engine server, its workers) and
    checks now and then: the kernel sends the signal as it moves the child to a new
    parent, but a signal can be blocked or ignored, and its stop lost in a handler. A
    process that still runs with a new parent stops as if the signal had stopped it.
    """
    if os.getppid() == parent:
        return 0
    return death_signal()


def precise_timers() -> None:
    """Ask for 1 ns timer slack (default 50 us) in this process: sleeps end when asked."""
    _prctl(PR_SET_TIMERSLACK, 1)


def name_process(name: str) -> None:
    """Call this process ``name`` (its /proc comm, what ps and top show; 15 bytes at most)."""
    _prctl(PR_SET_NAME, name.encode()[:15])


__all__ = ["SPARE_NAME", "SPARE_RUNNING", "death_signal", "die_with_parent", "name_process", "orphaned",
           "parent_death_signal", "precise_timers"]
