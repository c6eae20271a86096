"""Progress reporting: the events a run emits and the sinks that show them.

The runner calls ``progress(event)`` with one of the frozen event dataclasses
below. Any callable works; :class:`Progress` is a convenient base whose
``handle`` dispatches to ``on_<event name>`` methods, :class:`ConsoleProgress`
prints one line per event (the ``netesto run`` output), :class:`RecordingProgress`
keeps every event (tests, notebooks). ``FlowProgress`` events may arrive from
an agent client's event thread: sinks must not assume the runner's thread.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from netesto.protocol.text import printable


@dataclass(frozen=True)
class ProgressEvent:
    """Base of every progress event; ``t`` is controller wall-clock time."""

    t: float = field(default_factory=time.time, kw_only=True)

    @property
    def name(self) -> str:
        out = []
        for i, c in enumerate(type(self).__name__):
            if c.isupper() and i:
                out.append("_")
            out.append(c.lower())
        return "".join(out)


@dataclass(frozen=True)
class RunStarted(ProgressEvent):
    lab: str
    hosts: tuple[str, ...]
    workdir: str


@dataclass(frozen=True)
class ExperimentStarted(ProgressEvent):
    exp: int
    exp_name: str


@dataclass(frozen=True)
class ActionStarted(ProgressEvent):
    kind: str
    host: str
    exp: int | None
    text: str  # "key=value ..." of the action
    loc: str


@dataclass(frozen=True)
class ActionFinished(ProgressEvent):
    kind: str
    host: str
    exp: int | None
    elapsed: float
    error: str = ""


@dataclass(frozen=True)
class FlowsScheduled(ProgressEvent):
    exp: int
    host: str
    flows: tuple[str, ...]
    start_at: float  # controller time
    dur: float  # from start_at to the end of the last of them
    spans: tuple[tuple[float, float], ...] = ()  # each flow's (dur, delay) as the script wrote them
    lead: float = 0.0  # s from the batch's scheduling to start_at (controller/startlead.py)


@dataclass(frozen=True)
class FlowProgress(ProgressEvent):
    """An engine event relayed by an agent (``event`` is started/progress/done/error)."""

    host: str
    exp: int | None
    flow: str
    event: str
    data: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class HostError(ProgressEvent):
    host: str
    error: str
    fatal: bool = False  # the host is dropped for the rest of the run


@dataclass(frozen=True)
class Notice(ProgressEvent):
    """Something worth knowing that is not an error (leftover data, a late start)."""

    host: str
    text: str


@dataclass(frozen=True)
class DataStored(ProgressEvent):
    host: str
    exp: int
    files: int
    bytes: int
    dest: str


@dataclass(frozen=True)
class EchoText(ProgressEvent):
    text: str


@dataclass(frozen=True)
class ExperimentProcessed(ProgressEvent):
    exp: int
    path: str
    note: str = ""  # e.g. "results extra not installed"


@dataclass(frozen=True)
class RunFinished(ProgressEvent):
    experiments: tuple[int, ...]
    elapsed: float
    errors: tuple[str, ...] = ()
    interrupted: bool = False  # stopped early (Ctrl-C, a kernel interrupt, a cancel): the data is partial


ProgressCallback = Callable[[ProgressEvent], None]


class Progress:
    """Base sink: ``handle(event)`` calls ``on_<event.name>(event)`` if defined."""

    def __call__(self, event: ProgressEvent) -> None:
        self.handle(event)

    def handle(self, event: ProgressEvent) -> None:
        method = getattr(self, f"on_{event.name}", None)
        if method is not None:
            method(event)


class NullProgress(Progress):
    """Shows nothing."""


class RecordingProgress(Progress):
    """Keeps every event in ``events`` (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []
        self._lock = threading.Lock()

    def handle(self, event: ProgressEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, cls: type[ProgressEvent]) -> list[Any]:
        with self._lock:
            return [e for e in self.events if isinstance(e, cls)]


def _flow_lengths(e: FlowsScheduled) -> str:
    """The flows' lengths as written, delays apart: ``1 flow(s) of 10 s from 5 s``
    (not the 15 s until the last one ends, which a delay would have looked like)."""
    if not e.spans:
        return f"{len(e.flows)} flow(s) of {e.dur:g} s"
    counts: dict[tuple[float, float], int] = {}
    for span in e.spans:
        counts[span] = counts.get(span, 0) + 1
    return ", ".join(f"{n} flow(s) of {dur:g} s" + (f" from {delay:g} s" if delay else "")
                     for (dur, delay), n in counts.items())


class ConsoleProgress(Progress):
    """One plain-text line per event (flow progress only when ``verbose``)."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.verbose = verbose
        self._t0 = time.time()
        self._lock = threading.Lock()

    def _line(self, text: str) -> None:
        # Every line may quote an agent (errors, flow events, host names): escaped and bounded, so an
        # agent can neither forge lines nor drive the terminal, nor print more than MAX_SHOWN_TEXT.
        with self._lock:
            print(f"[{time.time() - self._t0:7.2f}] {printable(text)}", file=self.stream, flush=True)

    def on_run_started(self, e: RunStarted) -> None:
        self._t0 = e.t
        self._line(f"run on lab {e.lab} ({', '.join(e.hosts)}), workdir {e.workdir}")

    def on_experiment_started(self, e: ExperimentStarted) -> None:
        self._line(f"experiment {e.exp} {e.exp_name}")

    def on_action_started(self, e: ActionStarted) -> None:
        if self.verbose or e.kind not in ("ECHO", "DEBUG"):
            host = f" {e.host}" if e.host else ""
            self._line(f"{e.kind}{host} {e.text}".rstrip())

    def on_action_finished(self, e: ActionFinished) -> None:
        if e.error:
            self._line(f"{e.kind} {e.host} failed: {e.error}")

    def on_flows_scheduled(self, e: FlowsScheduled) -> None:
        self._line(f"  {e.host}: {_flow_lengths(e)} in exp {e.exp}")

    def on_flow_progress(self, e: FlowProgress) -> None:
        if not e.flow:
            if self.verbose:
                self._line(f"  {e.host}: {e.event.replace('_', ' ')}")
            return
        if self.verbose or e.event == "error":
            extra = f" {e.data.get('error', '')}" if e.event == "error" else ""
            self._line(f"  flow {e.flow} on {e.host}: {e.event}{extra}")

    def on_host_error(self, e: HostError) -> None:
        self._line(f"ERROR {e.host}: {e.error}" + (" (host dropped)" if e.fatal else ""))

    def on_notice(self, e: Notice) -> None:
        self._line(f"note: {e.host}: {e.text}" if e.host else f"note: {e.text}")

    def on_data_stored(self, e: DataStored) -> None:
        self._line(f"  stored {e.files} file(s), {e.bytes} bytes from {e.host} in {e.dest}")

    def on_echo_text(self, e: EchoText) -> None:
        self._line(e.text)

    def on_experiment_processed(self, e: ExperimentProcessed) -> None:
        note = f" ({e.note})" if e.note else ""
        self._line(f"experiment {e.exp} processed: {e.path}{note}")

    def on_run_finished(self, e: RunFinished) -> None:
        exps = ", ".join(str(x) for x in e.experiments) or "none"
        status = f", {len(e.errors)} error(s)" if e.errors else ""
        done = "interrupted after" if e.interrupted else "done in"
        self._line(f"{done} {e.elapsed:.1f} s: experiments {exps}{status}")


__all__ = [
    "ActionFinished",
    "ActionStarted",
    "ConsoleProgress",
    "DataStored",
    "EchoText",
    "ExperimentProcessed",
    "ExperimentStarted",
    "FlowProgress",
    "FlowsScheduled",
    "HostError",
    "Notice",
    "NullProgress",
    "Progress",
    "ProgressCallback",
    "ProgressEvent",
    "RecordingProgress",
    "RunFinished",
    "RunStarted",
]
