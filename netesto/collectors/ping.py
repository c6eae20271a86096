"""Ping collector: runs iputils ``ping -D`` and records every probe in a ``.nflow`` file.

One collector per client->server pair writes
``<datadir>/<exp>/ping/<client>-<server>.nflow`` with
:data:`~netesto.raw.columns.PING_COLUMNS` (one row per probe; a lost
probe is a row whose ``rtt`` is NaN, found from gaps in ``icmp_seq`` and,
at the end, from the "packets transmitted" count) and a summary block with
the tool's own statistics (sent, received, loss %, min/avg/max/mdev in us).

Parsing is done by pure functions (:func:`parse_reply`, :func:`parse_summary`,
:class:`SeqTracker`) tested on output captured from the real tool.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Sequence

from netesto.errors import TrafficError
from netesto.raw.columns import PING_COLUMNS
from netesto.raw.nflow import FlowWriter

# "[1795323481.346621] 64 bytes from 10.177.7.2: icmp_seq=1 ttl=64 time=0.409 ms"
_REPLY = re.compile(
    r"^\[(?P<ts>\d+\.\d+)\]\s+\d+\s+bytes from\s+(?P<src>.+?):\s+"
    r"icmp_seq=(?P<seq>\d+)\b.*?\btime=(?P<rtt>[\d.]+)\s*(?P<unit>ms|us|s)\b(?P<rest>.*)$"
)
_SENT = re.compile(
    r"(?P<sent>\d+) packets transmitted, (?P<recv>\d+) received"
    r"(?:, \+(?P<dup>\d+) duplicates)?(?:, \+(?P<err>\d+) errors)?, (?P<loss>[\d.]+)% packet loss"
)
_RTT = re.compile(
    r"rtt min/avg/max/mdev = (?P<min>[\d.]+)/(?P<avg>[\d.]+)/(?P<max>[\d.]+)/(?P<mdev>[\d.]+) (?P<unit>ms|us)"
)
_UNIT_US = {"s": 1e6, "ms": 1e3, "us": 1.0}
_SEQ_MOD = 1 << 16  # icmp_seq is 16 bits and wraps


@dataclass(frozen=True)
class PingReply:
    """One echo reply: wall-clock receive time (from ``-D``), sequence, RTT in us."""

    t_wall: float
    seq: int
    rtt_us: float
    duplicate: bool = False


@dataclass(frozen=True)
class PingSummary:
    """The statistics block ping prints on exit; RTTs in us (NaN if none)."""

    sent: int
    received: int
    loss_pct: float
    rtt_min: float = math.nan
    rtt_avg: float = math.nan
    rtt_max: float = math.nan
    rtt_mdev: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "received": self.received,
            "loss_pct": self.loss_pct,
            "rtt_min": self.rtt_min,
            "rtt_avg": self.rtt_avg,
            "rtt_max": self.rtt_max,
            "rtt_mdev": self.rtt_mdev,
        }


def parse_reply(line: str) -> PingReply | None:
    """The reply on one ``ping -D`` output line, or ``None`` for any other line.

    >>> parse_reply("[1795323481.346621] 64 bytes from 10.177.7.2: icmp_seq=1 ttl=64 time=0.409 ms")
    PingReply(t_wall=1795323481.346621, seq=1, rtt_us=409.0, duplicate=False)
    >>> parse_reply("PING 10.177.7.2 (10.177.7.2) 56(84) bytes of data.") is None
    True
    """
    m = _REPLY.match(line.strip())
    if not m:
        return None
    return PingReply(
        t_wall=float(m.group("ts")),
        seq=int(m.group("seq")),
        rtt_us=float(m.group("rtt")) * _UNIT_US[m.group("unit")],
        duplicate="DUP!" in m.group("rest"),
    )


def parse_summary(text: str) -> PingSummary | None:
    """The statistics block of a complete ping output (``None`` if it has none)."""
    sent = _SENT.search(text)
    if not sent:
        return None
    out = PingSummary(
        sent=int(sent.group("sent")),
        received=int(sent.group("recv")),
        loss_pct=float(sent.group("loss")),
    )
    rtt = _RTT.search(text)
    if rtt:
        scale = _UNIT_US[rtt.group("unit")]
        out = PingSummary(
            out.sent,
            out.received,
            out.loss_pct,
            float(rtt.group("min")) * scale,
            float(rtt.group("avg")) * scale,
            float(rtt.group("max")) * scale,
            float(rtt.group("mdev")) * scale,
        )
    return out


class SeqTracker:
    """Turns replies into rows ``(t_wall, seq, rtt_us)``, inserting NaN rows for lost probes.

    A probe is declared lost when a later sequence number arrives first
    (ping sends in order, so a gap means the earlier replies never came or
    came after the next one; a late reply is then dropped as out of order).
    Its time is estimated from the previous probe and the interval.
    Sequence numbers are unwrapped past 65535. :meth:`finish` adds rows for
    probes sent after the last reply (from the summary's sent count).
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last_seq = 0  # unwrapped; ping starts at icmp_seq=1
        self.last_t: float | None = None
        self.lost = 0

    def feed(self, reply: PingReply) -> list[tuple[float, int, float]]:
        if reply.duplicate:
            return []
        seq = self._unwrap(reply.seq)
        if seq <= self.last_seq:
            return []
        rows: list[tuple[float, int, float]] = []
        base_t = self.last_t if self.last_t is not None else reply.t_wall - (seq - 1) * self.interval
        base_seq = self.last_seq if self.last_t is not None else 1
        for missing in range(self.last_seq + 1, seq):
            rows.append((base_t + (missing - base_seq) * self.interval, missing, math.nan))
            self.lost += 1
        rows.append((reply.t_wall, seq, reply.rtt_us))
        self.last_seq, self.last_t = seq, reply.t_wall
        return rows

    def finish(self, sent: int, now: float | None = None) -> list[tuple[float, int, float]]:
        """NaN rows for probes ``last_seq+1 .. sent`` that never got a reply."""
        rows = []
        base_t = self.last_t if self.last_t is not None else (now or time.time()) - sent * self.interval
        for missing in range(self.last_seq + 1, sent + 1):
            rows.append((base_t + (missing - self.last_seq) * self.interval, missing, math.nan))
            self.lost += 1
        self.last_seq = max(self.last_seq, sent)
        return rows

    def _unwrap(self, seq16: int) -> int:
        base = self.last_seq - (self.last_seq % _SEQ_MOD)
        seq = base + seq16
        if seq < self.last_seq - _SEQ_MOD // 2:
            seq += _SEQ_MOD
        return seq


def ping_argv(target: str, interval: float = 0.2, duration: float | None = None) -> list[str]:
    """The ping command line (IPv6 literals get ``-6``).

    >>> ping_argv("10.0.0.2", 0.2, 5)
    ['ping', '-n', '-D', '-i', '0.2', '-w', '5', '10.0.0.2']
    >>> ping_argv("fd00::2")[:2]
    ['ping', '-6']
    """
    argv = ["ping"]
    try:
        if ipaddress.ip_address(target.split("%")[0]).version == 6:
            argv.append("-6")
    except ValueError:
        pass  # a host name: ping resolves it
    argv += ["-n", "-D", "-i", f"{interval:g}"]
    if duration is not None:
        argv += ["-w", f"{max(1, math.ceil(duration)):d}"]
    argv.append(target)
    return argv


def ping_path(datadir: str | os.PathLike[str], exp: int, client: str, server: str) -> Path:
    """``<datadir>/<exp>/ping/<client>-<server>.nflow`` (short host names)."""
    return Path(datadir) / str(exp) / "ping" / f"{_short(client)}-{_short(server)}.nflow"


def _short(host: str) -> str:
    return host if _is_ip(host) else host.split(".")[0]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


class PingCollector:
    """Runs ping towards ``target`` and writes its probes to ``dest_path`` as they arrive.

    ``argv_prefix`` runs ping through another command (e.g.
    ``["ip", "netns", "exec", "ns1"]``). :meth:`stop` ends ping with SIGINT
    so it still prints its statistics; :meth:`wait` waits for a ``duration``
    run to end. Both close the file and return the :class:`PingSummary`.
    """

    def __init__(
        self,
        target: str,
        dest_path: str | os.PathLike[str],
        interval: float = 0.2,
        duration: float | None = None,
        meta: dict[str, Any] | None = None,
        *,
        argv_prefix: Sequence[str] = (),
    ) -> None:
        if not 0.002 <= interval <= 60:
            raise TrafficError(f"ping {target}: interval must be 0.002..60 s, got {interval}")
        self.target = target
        self.dest_path = Path(dest_path)
        self.interval = interval
        self.duration = duration
        self.meta = dict(meta or {})
        self.argv = [*argv_prefix, *ping_argv(target, interval, duration)]
        self.summary: PingSummary | None = None
        self.rows = 0
        self._proc: subprocess.Popen[str] | None = None
        self._writer: FlowWriter | None = None
        self._thread: threading.Thread | None = None
        self._tail: list[str] = []
        self._err_tail: list[str] = []
        self._err_thread: threading.Thread | None = None
        self._started = threading.Event()
        self._mono_offset = 0.0
        self._tracker = SeqTracker(interval)
        self._closed = False

    def start(self) -> "PingCollector":
        """Start ping; raise :class:`TrafficError` if it cannot run or open its socket."""
        if shutil.which("ping") is None or shutil.which(self.argv[0]) is None:
            raise TrafficError("ping not found on PATH; install it (apt-get install iputils-ping)")
        self.dest_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                env=dict(os.environ, LC_ALL="C"),
            )
        except OSError as exc:
            raise TrafficError(f"cannot run {' '.join(self.argv)}: {exc.strerror}") from exc
        self._mono_offset = time.monotonic() - time.time()
        header = dict(self.meta, kind="ping", target=self.target, interval=self.interval,
                      argv=self.argv, start_wall=time.time(), start_mono=time.monotonic())
        # about one block a second: a crash loses at most the last second of probes
        flush_rows = max(1, round(1.0 / self.interval))
        self._writer = FlowWriter(self.dest_path, PING_COLUMNS, header, flush_rows=flush_rows)
        self._thread = threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True)
        self._thread.start()
        # ping writes one stderr line per failed send (e.g. "Network is unreachable"):
        # drain it so a long run cannot block on a full pipe; keep the last lines.
        self._err_thread = threading.Thread(target=self._read_err, args=(self._proc.stderr,),
                                            daemon=True)
        self._err_thread.start()
        # ping prints "PING ..." once its socket is open; if it exits first it failed.
        deadline = time.monotonic() + 5
        while not self._started.wait(0.02):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._thread.join(1)
                self._err_thread.join(1)
                err = self._stderr_text()
                self._abort()
                hint = ""
                if "permit" in err.lower() or "socket" in err.lower():
                    hint = (" (ping needs CAP_NET_RAW or net.ipv4.ping_group_range covering"
                            " this user's group)")
                raise TrafficError(f"ping {self.target} failed to start: {err or 'no output'}{hint}")
        return self

    def stop(self, timeout: float = 5.0) -> PingSummary | None:
        """End ping now (SIGINT, so it prints its statistics) and close the file."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                # ip netns exec execs ping, so the pid is ping's own.
                self._proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> PingSummary | None:
        """Wait for ping to end (its ``-w`` deadline), close the file, return the summary."""
        if self._proc is None or self._closed:
            return self.summary
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for thread in (self._thread, self._err_thread):
            if thread is not None:
                thread.join(5)
        self._finish()
        return self.summary

    def _read(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        for line in stream:
            if line.startswith("PING "):
                self._started.set()
                continue
            reply = parse_reply(line)
            if reply is None:
                if line.strip():
                    self._tail.append(line)
                continue
            for row in self._tracker.feed(reply):
                self._append(row)

    def _read_err(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        for line in stream:
            self._err_tail.append(line.rstrip())
            del self._err_tail[:-10]

    def _stderr_text(self) -> str:
        return "; ".join(line for line in self._err_tail if line.strip())

    def _append(self, row: tuple[float, int, float]) -> None:
        assert self._writer is not None
        t_wall, seq, rtt = row
        self._writer.append((t_wall, t_wall + self._mono_offset, seq, rtt))
        self.rows += 1

    def _finish(self) -> None:
        if self._closed or self._writer is None:
            return
        self._closed = True
        self.summary = parse_summary("".join(self._tail))
        if self.summary is not None:
            for row in self._tracker.finish(self.summary.sent):
                self._append(row)
        block: dict[str, Any] = {
            "status": "ok" if self.summary is not None else "error",
            "lost": self._tracker.lost,
            "returncode": self._proc.returncode if self._proc else None,
        }
        if self._err_tail:
            block["stderr"] = self._stderr_text()
        if self.summary is not None:
            block.update(self.summary.to_dict())
        else:
            err = self._stderr_text()
            block["error"] = err or "ping printed no statistics"
        self._writer.close(block)

    def _abort(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close({"status": "error", "error": "ping failed to start"})

    def __enter__(self) -> "PingCollector":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = [
    "PingCollector",
    "PingReply",
    "PingSummary",
    "SeqTracker",
    "parse_reply",
    "parse_summary",
    "ping_argv",
    "ping_path",
]
