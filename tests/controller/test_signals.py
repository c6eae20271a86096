"""A run's signals: the first stops it even when its KeyboardInterrupt is lost on the way, and no
signal waits for a lock the code it interrupted holds."""

from __future__ import annotations

import signal
import threading

import pytest

from netesto.controller.signals import RunSignals


def test_the_first_signal_also_asks_the_run_to_stop_at_its_next_wait() -> None:
    stop = threading.Event()
    later: list[int] = []
    with RunSignals(later.append, stop=stop.set) as signals:
        # raised in a finalizer that the garbage collector ran at that instant, a KeyboardInterrupt is
        # printed and dropped ("Exception ignored in ... __del__"); swallowed here the same way
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        assert stop.wait(5) and signals.first == signal.SIGINT and later == []
        signal.raise_signal(signal.SIGINT)  # a later one only hurries the cleanup: it never raises
        assert signals.signals == [signal.SIGINT, signal.SIGINT]
    for _ in range(50):
        if later:
            break
        threading.Event().wait(0.1)
    assert later == [signal.SIGINT]


@pytest.mark.timeout(30)
def test_a_signal_during_the_cleanup_never_waits_for_a_lock_the_interrupted_code_holds() -> None:
    # a second Ctrl-C landed while the first one's progress line was printed, under the line's lock:
    # the handler's own line waited for that lock in the same thread, and the run hung for good
    lock = threading.Lock()
    said = threading.Event()

    def later(signum: int) -> None:
        with lock:
            said.set()

    with RunSignals(later) as signals:
        signals.cleanup()
        with lock:
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the lock
        assert said.wait(5)
