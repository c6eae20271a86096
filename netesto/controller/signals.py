"""Signals around a run: SIGTERM and SIGHUP stop it as Ctrl-C does, and none cuts its cleanup short."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _install(handler: Callable[[int, FrameType | None], None], sigs: tuple[int, ...]) -> dict[int, object]:
    """Install ``handler`` for ``sigs``; the handlers it replaced (nothing off the main thread)."""
    old: dict[int, object] = {}
    if threading.current_thread() is not threading.main_thread():
        return old  # only the main thread may set handlers; a thread's run is stopped by its cancel Event
    for sig in sigs:
        old[sig] = signal.signal(sig, handler)
    return old


def _restore(old: dict[int, object]) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]


@contextmanager
def shield_signals(notice: Callable[[], None]) -> Iterator[None]:
    """While the block runs (stopping flows, fetching, restoring hosts), Ctrl-C, SIGTERM and
    SIGHUP only call ``notice`` ("restoring, please wait"): a host left half-restored is worse
    than a few more seconds."""

    def handler(signum: int, frame: FrameType | None) -> None:
        notice()

    old = _install(handler, STOP_SIGNALS)
    try:
        yield
    finally:
        _restore(old)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the block, so a run they stop takes the
    same path as Ctrl-C: flows stopped, hosts restored, data kept (the command-line's choice;
    the library leaves process-wide handlers alone)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = _install(handler, (signal.SIGTERM, signal.SIGHUP))
    try:
        yield
    finally:
        _restore(old)


__all__ = ["STOP_SIGNALS", "shield_signals", "signals_interrupt"]
