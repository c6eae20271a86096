"""Per-ACK congestion state from the kernel: ``tcp:tcp_probe`` and its siblings, recorded for some ports.

``python -m netesto.collectors.tcpprobe --spec FILE`` (the agent starts it,
one per trace) makes a tracefs instance of its own (trace clock ``mono``: the
CLOCK_MONOTONIC that ``time.monotonic()`` reads), enables ``tcp_probe``,
``tcp_retransmit_skb`` and ``tcp_cong_state_set`` with a kernel-side filter on
the experiment's ports (other traffic never reaches the buffer), prints
``{"event": "ready"}`` and copies the ring buffer's pages from every CPU's
``trace_pipe_raw`` into a spool file as they fill, untouched: the run costs a
read per sub-buffer, not work per event. On SIGTERM it turns the events off,
drains what is left, reads each CPU's ``stats`` (``dropped events``: the
events a full buffer refused), removes the instance, then decodes the spool
and writes each flow end's ``.ntrace`` (:mod:`netesto.collectors.tracesplit`)
and ``<exp>/traces/<host>.json`` (``<host>-2.json`` for a second trace of the experiment), its summary,
which it also prints.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from netesto.collectors.procmain import collector_main
from netesto.collectors.tracefs import EventSpec, Instance
from netesto.collectors.tracesplit import SPOOL_RECORD, Clock, Decoder, read_clock_pair, spool_pages, write_split
from netesto.errors import TrafficError

DEFAULT_EVENTS = ("tcp_probe", "tcp_retransmit_skb", "tcp_cong_state_set")
MAX_PORTS = 32
CLOCK = "mono"


def port_filter(ports: Sequence[int]) -> str:
    """The tracefs filter that keeps a port's events (either end of the connection).

    >>> port_filter([5201, 12867])
    'sport == 5201 || dport == 5201 || sport == 12867 || dport == 12867'
    """
    return " || ".join(f"sport == {p} || dport == {p}" for p in ports)


@dataclass(frozen=True)
class TraceSpec:
    """One trace: where its files go, its tracefs instance, the ports it keeps, its buffer."""

    exp: str
    datadir: str
    host: str
    instance: str
    ports: tuple[int, ...]
    spool: str
    events: tuple[str, ...] = DEFAULT_EVENTS
    buffer_kb: int = 4096  # per CPU
    subbuf_kb: int = 0  # bytes a read takes, in KiB (0: the kernel's, a page)
    poll: float = 0.01  # s between rounds of reads

    def __post_init__(self) -> None:
        if not self.ports or len(self.ports) > MAX_PORTS:
            raise TrafficError(f"a trace needs 1..{MAX_PORTS} ports, got {len(self.ports)}")
        for p in self.ports:
            if not isinstance(p, int) or isinstance(p, bool) or not 0 < p < 65536:
                raise TrafficError(f"trace: bad port {p!r}")
        unknown = set(self.events) - set(DEFAULT_EVENTS)
        if unknown:
            raise TrafficError(f"trace: unknown events {sorted(unknown)}; known: {', '.join(DEFAULT_EVENTS)}")
        if not 64 <= self.buffer_kb <= 1 << 20:
            raise TrafficError(f"trace: buffer_kb {self.buffer_kb} is outside 64..1048576")

    @classmethod
    def from_json(cls, text: str) -> "TraceSpec":
        data = json.loads(text)
        data["ports"] = tuple(data["ports"])
        data["events"] = tuple(data.get("events", DEFAULT_EVENTS))
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Recorder:
    """The instance, its per-CPU readers and the spool, from :meth:`start` to :meth:`stop`."""

    spec: TraceSpec
    instance: Instance | None = None
    fds: dict[int, int] = field(default_factory=dict)
    pages: int = 0
    bytes: int = 0
    clock_pairs: list[tuple[float, float]] = field(default_factory=list)

    def start(self) -> None:
        spec = self.spec
        inst = Instance(spec.instance)
        inst.create()
        self.instance = inst
        try:
            inst.configure(clock=CLOCK, buffer_kb=spec.buffer_kb, subbuf_kb=spec.subbuf_kb)
            self.formats = {name: inst.event_format(EventSpec("tcp", name)) for name in spec.events}
            self.layout = inst.page_layout()
            self.read_size = inst.subbuf_size()
            self._spool = open(spec.spool, "wb")
            self.fds = {cpu: inst.open_raw(cpu) for cpu in inst.cpus()}
            self.clock_pairs.append(read_clock_pair())
            for name in spec.events:
                inst.enable(EventSpec("tcp", name, port_filter(spec.ports)))
        except BaseException:
            self.close()
            raise

    def drain(self) -> int:
        """Copy every page the CPUs' buffers hold now into the spool; the bytes copied."""
        got = 0
        for cpu, fd in self.fds.items():
            while True:
                try:
                    page = os.read(fd, self.read_size)
                except BlockingIOError:
                    break
                if not page:
                    break
                self._spool.write(SPOOL_RECORD.pack(cpu, len(page)))
                self._spool.write(page)
                self.pages += 1
                got += len(page)
        self.bytes += got
        return got

    def stop(self) -> dict[str, Any]:
        """Events off, the rest drained, each CPU's counters read; the instance removed."""
        assert self.instance is not None
        self.instance.disable()
        while self.drain():
            pass
        stats = {cpu: self.instance.stats(cpu) for cpu in self.fds}
        self.clock_pairs.append(read_clock_pair())
        self.close()
        return {
            "dropped": {str(c): int(s.get("dropped events", 0)) for c, s in stats.items()},
            "overrun": {str(c): int(s.get("overrun", 0) + s.get("commit overrun", 0)) for c, s in stats.items()},
            "unread": {str(c): int(s.get("entries", 0)) for c, s in stats.items()},
        }

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        spool = getattr(self, "_spool", None)
        if spool is not None and not spool.closed:
            spool.close()
        if self.instance is not None:
            self.instance.remove()


def record(spec: TraceSpec, stopping: Callable[[], bool], *,
           ready: Callable[[], None] | None = None) -> dict[str, Any]:
    """Record until ``stopping()``, then split; the summary (also ``<exp>/traces/<host>.json``)."""
    rec = Recorder(spec)
    t0, cpu0 = time.monotonic(), _cpu_seconds()
    rec.start()
    if ready is not None:
        ready()
    try:
        while not stopping():
            rec.drain()
            time.sleep(spec.poll)
        counters = rec.stop()
    finally:
        rec.close()
    cpu_read, t1 = _cpu_seconds() - cpu0, time.monotonic()
    decoder = Decoder(rec.layout, rec.formats)
    with open(spec.spool, "rb") as fh:
        for _cpu, page in spool_pages(fh):
            decoder.page(page)
    os.unlink(spec.spool)
    out = decoder.out
    dropped = sum(counters["dropped"].values()) + sum(counters["overrun"].values())
    total = sum(out.events.values())
    clock = Clock(tuple(rec.clock_pairs))
    meta = {"host": spec.host, "instance": spec.instance, "clock": CLOCK, "events_recorded": list(spec.events),
            "filter": port_filter(spec.ports), "mono_to_wall": [list(p) for p in rec.clock_pairs]}
    exp_dir = Path(spec.datadir) / spec.exp
    shared = {"status": "ok", "host_events": total, "host_dropped": dropped,
              "host_missed_in_pages": out.missed_in_pages, "start_mono": t0, "end_mono": t1}
    split = write_split(out, exp_dir, spec.host, clock, meta, shared)
    summary = {**meta, **shared, **counters, "events": out.events, "pages": rec.pages, "bytes": rec.bytes,
               "duration": t1 - t0, "cpu_read_seconds": cpu_read,
               "cpu_decode_seconds": _cpu_seconds() - cpu0 - cpu_read, **split}
    (exp_dir / "traces").mkdir(parents=True, exist_ok=True)
    target, k = exp_dir / "traces" / f"{spec.host}.json", 1
    while target.exists():  # an earlier trace of the experiment on this host (other ports)
        k += 1
        target = exp_dir / "traces" / f"{spec.host}-{k}.json"
    target.write_text(json.dumps(summary, indent=1, sort_keys=True))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    return collector_main(argv, "netesto.collectors.tcpprobe",
                          "record tcp:tcp_probe events of some ports until SIGTERM",
                          lambda text, ready, stopping: record(TraceSpec.from_json(text), stopping, ready=ready))


__all__ = ["DEFAULT_EVENTS", "Recorder", "TraceSpec", "main", "port_filter", "record"]

if __name__ == "__main__":
    sys.exit(main())
