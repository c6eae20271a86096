"""A minimal epoll event loop with timers: one per worker process, no threads."""

from __future__ import annotations

import heapq
import itertools
import os
import select
import signal
import time
from typing import Callable, NoReturn

IN = select.EPOLLIN
OUT = select.EPOLLOUT
ERR = select.EPOLLERR | select.EPOLLHUP
INF = float("inf")
# Sockets are polled level-triggered: a busy sender sees EPOLLOUT on every
# poll, so timers are checked between every round of sends.
# Sockets served in turn (many RR flows of one loop) are one-shot, re-armed after
# their handler: level-triggered, a socket reported in one poll stays on epoll's
# ready list until the next poll checks it again, and data that comes meanwhile
# keeps that early place, so a flow whose reply came back within a round was
# served first round after round, ahead of flows whose data came earlier. Armed
# again only after its handler, a socket joins the tail of the list when its data
# comes.
_ONESHOT = select.EPOLLONESHOT
TURNS = os.environ.get("NETESTO_LOOP_TURNS", "") != "0"  # 0 (benches' A/B only): level-triggered
STOP_GRACE = 2.0  # after SIGTERM, a parent's children that have not ended by then are killed


def stop_on_signals(make: Callable[[int], BaseException]) -> Callable[[int], NoReturn]:
    """On SIGTERM or SIGINT raise ``make(signum)`` once, and ignore the signals after it.

    Ctrl-C reaches a worker twice (from the terminal, and forwarded by its
    parent): a second exception raised while the first is being handled would
    cut the flows' orderly end short with a traceback. Returns ``stop(signum)``,
    the same stop raised from code (a parent found gone): it raises even after a
    signal's, whose exception may have been lost, and no signal raises after it.
    """
    fired = False

    def handler(signum: int, frame: object) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise make(signum)

    def stop(signum: int) -> NoReturn:
        nonlocal fired
        fired = True
        raise make(signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


class Timer:
    """A scheduled callback; :meth:`cancel` makes it a no-op."""

    __slots__ = ("when", "callback")

    def __init__(self, when: float, callback: Callable[[], None] | None) -> None:
        self.when = when
        self.callback = callback

    def cancel(self) -> None:
        self.callback = None


class Loop:
    """epoll + a timer heap (monotonic clock)."""

    def __init__(self, on_error: Callable[[Callable[..., None], Exception], None] | None = None) -> None:
        self._ep = select.epoll()
        # Called with (callback, exception) when a handler or timer raises; the
        # default re-raises. Workers use it to fail just the flow at fault.
        self.on_error = on_error
        self._handlers: dict[int, Callable[[int], None]] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        # Called instead of the epoll wait when set, with the next timer's time (inf if none): it
        # returns when that time comes or this loop's epoll fd is readable (see rrgroup.RRGroup.wait)
        self.waiter: Callable[[float], None] | None = None
        self.rr_group: object | None = None  # the RR flow ends served in C (rrgroup.group_of)
        self._turns: dict[int, int] = {}  # fd -> events, of the sockets served in turn (register's turns)

    def fileno(self) -> int:
        """The epoll fd: readable when a registered socket is ready."""
        return self._ep.fileno()

    def register(self, fd: int, events: int, handler: Callable[[int], None], turns: bool = False) -> None:
        """``handler(events)`` when ``fd`` is ready. ``turns``: served in turn with the other such sockets,
        in the order they became ready (see ``_ONESHOT``)."""
        if turns and TURNS:
            self._turns[fd] = events
        self._ep.register(fd, self._armed(fd, events))
        self._handlers[fd] = handler

    def modify(self, fd: int, events: int) -> None:
        self._ep.modify(fd, self._armed(fd, events))

    def _armed(self, fd: int, events: int) -> int:
        """The epoll events of ``fd``: one-shot for a socket served in turn, whose events are kept for _rearm."""
        if fd not in self._turns:
            return events
        self._turns[fd] = events
        return events | _ONESHOT

    def unregister(self, fd: int) -> None:
        self._turns.pop(fd, None)
        if self._handlers.pop(fd, None) is not None:
            try:
                self._ep.unregister(fd)
            except (OSError, ValueError):
                pass

    def next_deadline(self) -> float:
        """Monotonic time of the earliest scheduled timer (inf if none)."""
        return self._timers[0][0] if self._timers else float("inf")

    def second_deadline(self) -> float:
        """Monotonic time of the second earliest scheduled timer (inf if none): a heap's root's children."""
        return min((entry[0] for entry in self._timers[1:3]), default=float("inf"))

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.call_at(time.monotonic() + delay, callback)

    def run(self, done: Callable[[], bool]) -> None:
        """Dispatch events and timers until ``done()`` is true.

        Due timers also run between two handlers of one poll's events: with
        many busy senders a round of handlers takes longer than a sampling
        interval (32 flows x a 2 MiB burst is ~10 ms of copying), and the
        sampler's ticks would come late or be skipped.
        """
        timers = self._timers
        handlers = self._handlers
        turns = self._turns
        poll = self._ep.poll
        monotonic = time.monotonic
        while not done():
            if timers and timers[0][0] <= monotonic():
                self._run_due()
                if done():
                    break
            waiter = self.waiter
            if waiter is not None:
                try:
                    waiter(timers[0][0] if timers else INF)
                except Exception as exc:
                    self._error(waiter, exc)
                timeout = 0.0
            else:
                timeout = timers[0][0] - monotonic() if timers else 1.0
            for fd, events in poll(timeout if timeout > 0 else 0):
                handler = handlers.get(fd)
                if handler is not None:
                    try:
                        handler(events)
                    except Exception as exc:
                        self._error(handler, exc)
                    again = turns.get(fd)
                    if again is not None:
                        self._rearm(fd, again)
                    if timers and timers[0][0] <= monotonic():
                        self._run_due()

    def _rearm(self, fd: int, events: int) -> None:
        """A socket served in turn, armed again after its handler (its fd may have been closed by it)."""
        try:
            self._ep.modify(fd, events | _ONESHOT)
        except (OSError, ValueError):
            self._turns.pop(fd, None)

    def _run_due(self) -> None:
        """Run every timer that is due now (in time order)."""
        timers = self._timers
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)[2]
            callback = timer.callback
            if callback is not None:
                timer.callback = None
                try:
                    callback()
                except Exception as exc:
                    self._error(callback, exc)

    def handler_error(self, callback: Callable[..., None], exc: Exception) -> None:
        """``callback`` (a handler or timer, called outside :meth:`run`'s own calls) raised ``exc``."""
        self._error(callback, exc)

    def _error(self, callback: Callable[..., None], exc: Exception) -> None:
        if self.on_error is None:
            raise exc
        self.on_error(callback, exc)

    def close(self) -> None:
        self._ep.close()


__all__ = ["ERR", "IN", "Loop", "OUT", "STOP_GRACE", "Timer", "stop_on_signals"]
