"""What a sweep shows while it runs: a bar that moves inside a point on a terminal, one line per update in a log.

Each point's own run progress (the lines its kernel prints: the shipped notebook's
``ConsoleProgress``) is forwarded here as it arrives. On a terminal (or in a
notebook) a tqdm bar counts points; inside a point it advances with the point's
elapsed time against its estimate (never past 95 % of the point before the point
ends) and shows the point's latest line. Anywhere else (a log file, a pipe, CI)
every update is one line of its own, with no carriage return:

    sweep [1/3] ca=cubic,rep=0: started (estimate 5 s)
    sweep [1/3] ca=cubic,rep=0: [   0.00] run on lab dry1 (h1, h2), workdir results
    sweep [1/3] ca=cubic,rep=0: ok in 5.3 s
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, TextIO

from netesto.protocol.text import printable
from netesto.results.manifest import PointRecord

TICK = 1.0  # seconds between the bar's moves inside a point
INSIDE = 0.95  # how far a point's own share of the bar may go before it ends


def on_terminal(stream: Any) -> bool:
    """The stream shows a carriage return as a redraw: a terminal, or a Jupyter kernel's output stream."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    return type(stream).__name__ == "OutStream" and "ipykernel" in sys.modules


class SweepProgress:
    """The sweep's display: ``started``, ``line`` and ``ended`` per point, ``close`` at the end."""

    def __init__(self, total: int, done: int, *, estimates: dict[str, float] | None = None,
                 stream: TextIO | None = None, bar: bool | None = None) -> None:
        self.total, self.done = total, done
        self.estimates = dict(estimates or {})
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._running: dict[str, tuple[float, int]] = {}  # key -> (monotonic start, its number)
        self._count = done
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if on_terminal(self.stream) if bar is None else bar:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=done, unit="point", desc="sweep", dynamic_ncols=True,
                             file=self.stream, bar_format="{l_bar}{bar}| {n:.1f}/{total} [{elapsed}<{remaining}{postfix}]")
            threading.Thread(target=self._tick, name="sweep-progress", daemon=True).start()

    def started(self, rec: PointRecord) -> None:
        with self._lock:
            self._count += 1
            self._running[rec.key] = (time.monotonic(), self._count)
        est = self.estimates.get(rec.key)
        self._say(rec, f"started (estimate {est:.0f} s)" if est else "started")

    def re_estimate(self, estimates: dict[str, float]) -> None:
        """New estimates of the points not started yet (learned from the points that ended)."""
        with self._lock:
            self.estimates.update(estimates)

    def line(self, rec: PointRecord, text: str) -> None:
        self._say(rec, printable(text))

    def ended(self, rec: PointRecord) -> None:
        with self._lock:
            self._running.pop(rec.key, None)
            self.done += 1
        secs = f" in {rec.seconds:.1f} s" if rec.seconds is not None else ""
        self._say(rec, f"{rec.status}{secs}")

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            with self._lock:
                self._bar.n = self.done
                self._bar.close()

    def _say(self, rec: PointRecord, text: str) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.set_postfix_str(f"{rec.key}: {text}"[:120], refresh=False)
                self._move()
                return
            n = self._running.get(rec.key, (0.0, self._count))[1]
            print(f"sweep [{n}/{self.total}] {rec.key}: {text}", file=self.stream, flush=True)

    def _move(self) -> None:
        """The bar at the points done plus each running point's share of its estimate (lock held)."""
        now = time.monotonic()
        inside = sum(min(INSIDE, (now - t0) / self.estimates[key]) for key, (t0, _) in self._running.items()
                     if self.estimates.get(key))
        self._bar.n = round(self.done + inside, 2)
        self._bar.refresh()

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            with self._lock:
                if self._bar is not None and self._running:
                    self._move()


def display(progress: bool | Callable[[PointRecord], None], total: int, done: int,
            estimates: dict[str, float] | None = None) -> SweepProgress | None:
    """The sweep's display for its ``progress`` argument (True: shown; False or a callable: not shown)."""
    return SweepProgress(total, done, estimates=estimates) if progress is True else None


__all__ = ["SweepProgress", "display", "on_terminal"]
