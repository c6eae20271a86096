"""Signals around a run: the first stops it (as Ctrl-C does), later ones hurry its cleanup, none cuts the restore.

A run has two phases. While it runs (the script's actions, and the wait for the
flows still running when the script ends) the first Ctrl-C, SIGTERM or SIGHUP
raises KeyboardInterrupt: the runner stops the flows, fetches what exists,
restores the hosts and raises RunInterrupted with the exit status of the signal
(130, 143, 129). During the cleanup a signal never raises: it calls the
runner's ``later`` callback, which says "restoring the hosts, please wait" and
makes the cleanup skip its waits for flows and the processing of what was
fetched (the raw data and experiment.json stay) - but never the restore. The first signal switches the phase inside the handler itself, so
a burst of Ctrl-C cannot land a second KeyboardInterrupt in the cleanup.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by ``signum``: 128 + its number (Ctrl-C 130, SIGTERM 143)."""
    return 128 + int(signum)


def _main_thread() -> bool:
    # Only the main thread may set handlers; a run in another thread is stopped by its cancel Event.
    return threading.current_thread() is threading.main_thread()


def _aside(fn: Callable[..., None], *args: Any) -> None:
    """Run ``fn`` in a thread of its own. A signal handler runs inside whatever the main thread was
    doing, which may hold a lock ``fn`` takes: a second Ctrl-C that came while the first one's
    "restoring the hosts" line was being printed waited for the progress line's lock its own thread
    held, and the run hung for good (an Event's set takes a lock too)."""
    threading.Thread(target=fn, args=args, name="netesto-signal", daemon=True).start()


class RunSignals:
    """The handlers of one run (main thread only; elsewhere this does nothing).

    During the run, SIGINT and those of SIGTERM/SIGHUP that have a Python handler already
    (the command line's :func:`signals_interrupt`) stop it; a library run leaves a SIGTERM
    it was not asked to take to its default. :meth:`cleanup` takes all three."""

    def __init__(self, later: Callable[[int], None], stop: Callable[[], None] | None = None) -> None:
        self.later = later
        self.stop = stop  # also asked at the first signal: the run's next wait stops it, should the raise be lost
        self.phase = "run"
        self.first: int | None = None  # the signal that stopped the run
        self.signals: list[int] = []  # every one received, in order
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if self.phase == "run":
            self.phase = "cleanup"
            self.first = signum
            if self.stop is not None:
                # A KeyboardInterrupt raised in a finalizer (a socket's __del__ that the garbage collector
                # ran just then) is printed and dropped: the run went on to its end (rc 0, flows of 30 s
                # run out) while the later signals only hurried a cleanup that had not begun.
                _aside(self.stop)
            raise KeyboardInterrupt(signal.Signals(signum).name)
        _aside(self.later, signum)

    def _take(self, sig: int) -> None:
        if sig not in self._old:
            self._old[sig] = signal.signal(sig, self._handle)

    def __enter__(self) -> "RunSignals":
        if _main_thread():
            for sig in STOP_SIGNALS:
                if sig == signal.SIGINT or callable(signal.getsignal(sig)):
                    self._take(sig)
        return self

    def cleanup(self) -> None:
        """From now on every stop signal only calls ``later``: the hosts are being restored."""
        self.phase = "cleanup"
        if _main_thread():
            for sig in STOP_SIGNALS:
                self._take(sig)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the block, so a run they stop takes the
    same path as Ctrl-C: flows stopped, hosts restored, data kept (the command-line's choice;
    the library leaves process-wide handlers alone). After the block every stop signal is
    ignored: the run is over and the command line only reports and exits, and a third Ctrl-C
    that came after the run's end killed it there (status -2 instead of 130)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    main = _main_thread()
    if main:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, handler)
    try:
        yield
    finally:
        if main:
            for num in STOP_SIGNALS:
                signal.signal(num, signal.SIG_IGN)


__all__ = ["RunSignals", "STOP_SIGNALS", "exit_status", "signals_interrupt"]
