"""A run in a background thread: the caller (a notebook cell) returns at once with a handle.

``handle = run_in_background(script, lab=..., workdir=...)``; ``handle.stop()`` stops
it as Ctrl-C would (flows stopped, hosts restored, what was collected kept and
processed); ``handle.wait()`` returns the :class:`~netesto.controller.result.RunResult`
(a stopped run's, partial, has ``interrupted`` set) or raises the run's error.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from netesto.errors import NetestoError, RunInterrupted


class BackgroundRun:
    """Runs ``target(cancel)`` in a daemon thread; ``cancel`` is the Event :meth:`stop` sets
    (pass it to :func:`netesto.controller.run` as ``cancel=``)."""

    def __init__(self, target: Callable[[threading.Event], Any], *, name: str = "netesto-background-run") -> None:
        self._target = target
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[BackgroundRun], None]] = []
        self._lock = threading.Lock()
        self.started = time.time()
        self.ended: float | None = None  # time.time() when the run ended (None while it runs)
        # The run's live samples (netesto.plots.livedata.LiveData) when its progress view keeps them:
        # ``live.holoviews("goodput")`` is a DynamicMap that follows the run.
        self.live: Any = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self._result = self._target(self._cancel)
        except BaseException as exc:  # kept for wait(): a thread's exception has nowhere else to go
            self._error = exc
            if isinstance(exc, NetestoError):
                self._result = exc.detail  # what the run kept (a RunResult), if it got that far
        finally:
            self.ended = time.time()
            with self._lock:
                self._done.set()
                callbacks = list(self._callbacks)
            for callback in callbacks:
                try:
                    callback(self)
                except Exception:  # a display callback must not hide the run's outcome
                    pass

    def on_done(self, callback: Callable[[BackgroundRun], None]) -> None:
        """Call ``callback(self)`` when the run ends (at once if it has)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def stop(self) -> None:
        """Ask the run to stop at its next wait (flows stopped, hosts restored, data kept)."""
        self._cancel.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def stopping(self) -> bool:
        return self._cancel.is_set() and not self.done

    @property
    def result(self) -> Any:
        """The RunResult once the run ended (None before, or if it failed before reaching the hosts)."""
        return self._result

    @property
    def error(self) -> BaseException | None:
        """The run's error, a :class:`RunInterrupted` after :meth:`stop`."""
        return self._error

    def wait(self, timeout: float | None = None) -> Any:
        """The RunResult, once the run ended; a stopped run's partial one (``interrupted``).

        Raises the run's error (after everything collected was stored), or TimeoutError.
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"the run is still going after {timeout:g} s (stop() ends it)")
        if self._error is not None and not isinstance(self._error, RunInterrupted):
            raise self._error
        return self._result

    def __repr__(self) -> str:
        if not self.done:
            state = "stopping" if self.stopping else f"running for {time.time() - self.started:.0f} s"
        elif isinstance(self._error, RunInterrupted):
            state = "stopped"
        elif self._error is not None:
            state = f"failed: {self._error}"
        else:
            state = "done"
        exps = getattr(self._result, "exps", None)
        return f"<BackgroundRun {state}" + (f": experiments {exps}>" if exps is not None else ">")


def run_in_background(script: Any, lab: Any, workdir: Any = ".", **kw: Any) -> BackgroundRun:
    """:func:`netesto.controller.run` in a background thread; the handle at once."""
    from netesto.controller.api import run

    return BackgroundRun(lambda cancel: run(script, lab, workdir, cancel=cancel, **kw))


__all__ = ["BackgroundRun", "run_in_background"]
