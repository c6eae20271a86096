"""A run as it goes: per-flow rate (and cwnd) samples, host status and time left, from progress events.

:class:`LiveState` folds the runner's progress events into what a live view shows;
it draws nothing, so the notebook's plot (:mod:`netesto.magics.liveview`) and the
plain-text sink :class:`LiveText` (papermill, nbconvert, a terminal) share it. The
samples are the agents' interval summaries: the flow engine's ``progress`` event,
one per flow per second, relayed as a ``flow`` event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from netesto.controller.progress import (
    ActionStarted,
    ConsoleProgress,
    DataStored,
    FlowProgress,
    FlowsScheduled,
    HostError,
    ProgressEvent,
    RunFinished,
    RunStarted,
)

_DOING = {"DO_SERVER": "serving", "DO_CLIENT": "starting flows", "GET_DATA": "fetching data",
          "SET_SYSCTL": "configuring", "SET_QDISC": "configuring", "SET_NETEM": "configuring",
          "SET_MODULE_PARAMS": "configuring", "DO_TCPDUMP": "tcpdump"}


@dataclass(frozen=True)
class Sample:
    """One interval summary of a flow: ``t`` seconds after the run started, ``rate`` in bit/s
    (goodput: the bytes each end received over the interval, both ways; from an engine older
    than ``goodput_bps``, the bytes its sockets took in), ``cwnd`` in packets and ``srtt`` in ms
    when the agent sent them (agents since the live view read them with sock_diag)."""

    flow: str
    host: str
    t: float
    rate: float
    cwnd: float | None = None
    srtt: float | None = None


@dataclass
class _Host:
    doing: str = "idle"
    running: set[str] = field(default_factory=set)
    error: str = ""


class LiveState:
    """What a live view shows, folded from progress events (thread-safe: events come from
    the runner's thread and from agent clients' threads).

    >>> s = LiveState(estimate=10.0)
    >>> s.handle(RunStarted(lab="lab", hosts=("h1", "h2"), workdir="w", t=100.0))
    >>> s.handle(FlowProgress(host="h2", exp=1, flow="f1", event="started", t=101.0))
    >>> s.handle(FlowProgress(host="h2", exp=1, flow="f1", event="progress", data={"rate_bps": 9e7}, t=102.0))
    >>> s.take()
    [Sample(flow='f1', host='h2', t=2.0, rate=90000000.0, cwnd=None, srtt=None)]
    >>> s.take(), s.hosts()["h2"], s.time_left(now=104.0)
    ([], '1 flow running', 6.0)
    """

    def __init__(self, estimate: float = 0.0) -> None:
        self.estimate = estimate
        self.t0 = time.time()
        self.finished: RunFinished | None = None
        self.last: dict[str, Sample] = {}  # the newest sample of every flow seen
        self._hosts: dict[str, _Host] = {}
        self._new: list[Sample] = []
        self._flows_end = 0.0
        self._lock = threading.Lock()

    def handle(self, event: ProgressEvent) -> None:
        with self._lock:
            self._fold(event)

    __call__ = handle

    def _host(self, name: str) -> _Host:
        return self._hosts.setdefault(name, _Host())

    def _fold(self, e: ProgressEvent) -> None:
        if isinstance(e, RunStarted):
            self.t0 = e.t
            for name in e.hosts:
                self._host(name)
        elif isinstance(e, ActionStarted) and e.host:
            self._host(e.host).doing = _DOING.get(e.kind, e.kind.lower())
        elif isinstance(e, FlowsScheduled):
            self._flows_end = max(self._flows_end, e.start_at + e.dur)
        elif isinstance(e, FlowProgress) and e.flow:
            self._flow(e)
        elif isinstance(e, HostError):
            self._host(e.host).error = "dropped: " + e.error if e.fatal else e.error
        elif isinstance(e, DataStored):
            self._host(e.host).doing = f"stored {e.files} file(s)"
        elif isinstance(e, RunFinished):
            self.finished = e
            for h in self._hosts.values():
                h.running.clear()
                h.doing = "stopped, restored" if e.interrupted else "done"

    def _flow(self, e: FlowProgress) -> None:
        h = self._host(e.host)
        if e.event == "started":
            h.running.add(e.flow)
        elif e.event in ("done", "error"):
            h.running.discard(e.flow)
            if not h.running and h.doing == "starting flows":
                h.doing = "flows done"
        elif e.event == "progress":
            rate = _number(e.data.get("goodput_bps", e.data.get("rate_bps")))  # (rate_bps: engines before it)
            if rate is None:
                return
            srtt = _number(e.data.get("srtt_us"))
            sample = Sample(e.flow, e.host, round(e.t - self.t0, 3), rate, _number(e.data.get("cwnd")),
                            srtt / 1000 if srtt is not None else None)
            self.last[e.flow] = sample
            self._new.append(sample)

    def take(self) -> list[Sample]:
        """The samples that arrived since the last call."""
        with self._lock:
            new, self._new = self._new, []
            return new

    def recent(self, within: float, now: float | None = None) -> list[Sample]:
        """Each flow's newest sample, of the flows that sent one in the last ``within`` seconds."""
        since = self.elapsed(now) - within
        with self._lock:
            return sorted((s for s in self.last.values() if s.t >= since), key=lambda s: s.flow)

    def hosts(self) -> dict[str, str]:
        """One status text per host: what it does, its running flows, its last error."""
        with self._lock:
            out = {}
            for name, h in sorted(self._hosts.items()):
                n = len(h.running)
                text = f"{n} flow{'s' if n != 1 else ''} running" if n else h.doing
                out[name] = f"{text} ({h.error})" if h.error else text
            return out

    def elapsed(self, now: float | None = None) -> float:
        return (now if now is not None else time.time()) - self.t0

    def time_left(self, now: float | None = None) -> float:
        """Seconds until the plan's estimate or the last scheduled flow's end, whichever is later."""
        now = now if now is not None else time.time()
        if self.finished is not None:
            return 0.0
        return max(0.0, self.estimate - self.elapsed(now), self._flows_end - now)

    def left_text(self, now: float | None = None) -> str:
        """``12 s left``; past the estimate while work remains, ``finishing`` (never ``0 s left``).

        >>> s = LiveState(estimate=10.0)
        >>> s.t0 = 100.0
        >>> s.left_text(now=104.2), s.left_text(now=112.0)
        ('6 s left', 'finishing (past the 10 s estimate)')
        """
        left = self.time_left(now)
        if self.finished is None and left < 0.5:
            return f"finishing (past the {self.estimate:.0f} s estimate)"
        return f"{left:.0f} s left"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def format_rate(bps: float) -> str:
    """``93.4 Mbit/s``-style text.

    >>> format_rate(93_412_000), format_rate(1.5e9), format_rate(800)
    ('93.4 Mbit/s', '1.50 Gbit/s', '800 bit/s')
    """
    if bps >= 1e9:
        return f"{bps / 1e9:.2f} Gbit/s"
    if bps >= 1e6:
        return f"{bps / 1e6:.1f} Mbit/s"
    if bps >= 1e3:
        return f"{bps / 1e3:.1f} kbit/s"
    return f"{bps:.0f} bit/s"


class LiveText(ConsoleProgress):
    """Plain progress lines (where no widget can show: papermill, nbconvert, a terminal):
    the usual event lines plus, at most every ``every`` seconds while flows run, one line
    with each flow's rate, their sum, the hosts' status and the time left."""

    def __init__(self, stream: TextIO | None = None, *, estimate: float = 0.0, every: float = 1.0,
                 max_flows: int = 8) -> None:
        super().__init__(stream)
        self.state = LiveState(estimate)
        # What gets every sample (the magics hand them to a netesto.plots.livedata.LiveData, kept as ``live``)
        self.on_samples: Callable[[list[Sample]], None] | None = None
        self.live: Any = None
        self.every = every
        self.max_flows = max_flows
        self._last_line = 0.0

    def handle(self, event: ProgressEvent) -> None:
        self.state.handle(event)
        super().handle(event)
        if isinstance(event, FlowProgress) and event.event == "progress":
            self._summary(event.t)
        elif isinstance(event, RunFinished):
            self._hand(self.state.take())

    def _hand(self, samples: list[Sample]) -> None:
        if self.on_samples is not None:
            self.on_samples(samples)

    def _summary(self, now: float) -> None:
        if now - self._last_line < self.every:
            return
        self._last_line = now
        self._hand(self.state.take())
        recent = self.state.recent(2 * self.every + 1, now)
        shown = ", ".join(f"{s.flow} {format_rate(s.rate)}" + (f" cwnd {s.cwnd:.0f}" if s.cwnd is not None else "")
                          for s in recent[: self.max_flows])
        more = f" (+{len(recent) - self.max_flows} more)" if len(recent) > self.max_flows else ""
        hosts = "; ".join(f"{h}: {text}" for h, text in self.state.hosts().items())
        self._line(f"  goodput {shown}{more}; sum {format_rate(sum(s.rate for s in recent))} | {hosts} | "
                   f"{self.state.left_text(now)}")


__all__ = ["LiveState", "LiveText", "Sample", "format_rate"]
