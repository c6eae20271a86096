"""A run's first signal stops it even when the KeyboardInterrupt it raises is lost on the way."""

from __future__ import annotations

import signal
import threading

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
        assert stop.is_set() and signals.first == signal.SIGINT and later == []
        signal.raise_signal(signal.SIGINT)  # a later one only hurries the cleanup: it never raises
        assert later == [signal.SIGINT] and signals.signals == [signal.SIGINT, signal.SIGINT]

