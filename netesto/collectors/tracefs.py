"""A tracefs instance of our own: its clock, buffer, events with kernel-side filters, raw readers, stats.

tracefs is not always mounted (not at boot here, and ``ip netns exec`` gives
a process a fresh ``/sys`` without it): :func:`tracefs_root` mounts it at
``/sys/kernel/tracing`` when it can (root). Each trace gets its own
``instances/<name>``, with its own ring buffer, clock and event switches, so
concurrent users, tests and the host's own tracing never share a buffer;
:meth:`Instance.remove` takes it away again (events off, then ``rmdir``).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from netesto.collectors.ringbuf import EventFormat, PageLayout
from netesto.errors import TrafficError

MOUNT_POINT = "/sys/kernel/tracing"
INSTANCE_PREFIX = "netesto-"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _mounted() -> str | None:
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "tracefs":
                    return parts[1]
    except OSError:
        pass
    return None


def tracefs_root(mount: bool = True) -> Path:
    """Where tracefs is mounted, mounting it at :data:`MOUNT_POINT` if it is not (and ``mount``)."""
    where = _mounted()
    if where is None and mount and os.path.isdir(MOUNT_POINT):
        done = subprocess.run(["mount", "-t", "tracefs", "nodev", MOUNT_POINT], capture_output=True, text=True)
        if done.returncode != 0:
            raise TrafficError(f"tracefs is not mounted and mounting it failed: {done.stderr.strip()} "
                               f"(as root: mount -t tracefs nodev {MOUNT_POINT})")
        where = _mounted()
    if where is None:
        raise TrafficError(f"tracefs is not mounted (as root: mount -t tracefs nodev {MOUNT_POINT})")
    return Path(where)


def parse_stats(text: str) -> dict[str, float]:
    """``per_cpu/cpuN/stats`` as numbers (``entries``, ``overrun``, ``dropped events``, ...).

    >>> parse_stats("entries: 3\\noverrun: 0\\noldest event ts:  3633.324700\\ndropped events: 2\\n")["dropped events"]
    2.0
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            try:
                out[key.strip()] = float(value.strip())
            except ValueError:
                continue
    return out


@dataclass(frozen=True)
class EventSpec:
    """An event to record: ``group/name`` and its filter (tracefs filter syntax; "" = every one)."""

    group: str
    name: str
    filter: str = ""


class Instance:
    """``<tracefs>/instances/<name>``, made by :meth:`create` and gone after :meth:`remove`."""

    def __init__(self, name: str, root: Path | None = None) -> None:
        if not _NAME.match(name):
            raise TrafficError(f"bad tracefs instance name {name!r}")
        self.root = root or tracefs_root()
        self.name = name
        self.path = self.root / "instances" / name
        self.enabled: list[EventSpec] = []

    def create(self) -> "Instance":
        try:
            os.mkdir(self.path)
        except FileExistsError:
            raise TrafficError(f"tracefs instance {self.name} exists already (another trace of this name "
                               f"runs, or one was left behind: rmdir {self.path})") from None
        except OSError as exc:
            raise TrafficError(f"cannot create tracefs instance {self.path}: {exc.strerror}") from exc
        return self

    def write(self, rel: str, value: str) -> None:
        try:
            with open(self.path / rel, "w") as fh:
                fh.write(value)
        except OSError as exc:
            detail = self._error_log() if exc.errno == errno.EINVAL else ""
            raise TrafficError(f"tracefs {self.name}/{rel} = {value!r}: {exc.strerror}{detail}") from exc

    def read(self, rel: str) -> str:
        with open(self.path / rel) as fh:
            return fh.read()

    def _error_log(self) -> str:
        try:
            lines = (self.root / "error_log").read_text().strip().splitlines()
        except OSError:
            return ""
        return f" ({' '.join(lines[-3:])})" if lines else ""

    def configure(self, *, clock: str = "mono", buffer_kb: int = 4096, subbuf_kb: int = 0,
                  overwrite: bool = False) -> None:
        """Clock, per-CPU buffer size, sub-buffer size (0: the kernel's) and what a full buffer does:
        ``overwrite=False`` drops new events (counted in ``dropped events``), keeping what is
        unread whole."""
        available = self.read("trace_clock")
        if clock not in available.replace("[", " ").replace("]", " ").split():
            raise TrafficError(f"trace clock {clock!r} not offered by this kernel ({available.strip()})")
        self.write("trace_clock", clock)
        if subbuf_kb and (self.path / "buffer_subbuf_size_kb").exists():
            self.write("buffer_subbuf_size_kb", str(subbuf_kb))
        self.write("buffer_size_kb", str(buffer_kb))
        self.write("options/overwrite", "1" if overwrite else "0")

    def event_format(self, spec: EventSpec) -> EventFormat:
        try:
            return EventFormat.parse(self.read(f"events/{spec.group}/{spec.name}/format"))
        except FileNotFoundError:
            raise TrafficError(f"this kernel has no trace event {spec.group}:{spec.name}") from None

    def page_layout(self) -> PageLayout:
        return PageLayout.parse(self.read("events/header_page"))

    def subbuf_size(self) -> int:
        """Bytes a ``trace_pipe_raw`` read hands out (one sub-buffer)."""
        try:
            return int(self.read("buffer_subbuf_size_kb").strip()) * 1024
        except (OSError, ValueError):
            return os.sysconf("SC_PAGE_SIZE")

    def enable(self, spec: EventSpec) -> None:
        base = f"events/{spec.group}/{spec.name}"
        if spec.filter:
            self.write(f"{base}/filter", spec.filter)
        self.write(f"{base}/enable", "1")
        self.enabled.append(spec)

    def disable(self) -> None:
        for spec in self.enabled:
            try:
                self.write(f"events/{spec.group}/{spec.name}/enable", "0")
            except TrafficError:
                pass
        self.enabled.clear()

    def cpus(self) -> list[int]:
        return sorted(int(p.name[3:]) for p in (self.path / "per_cpu").iterdir() if p.name[3:].isdigit())

    def open_raw(self, cpu: int) -> int:
        """A non-blocking fd of ``per_cpu/cpu<cpu>/trace_pipe_raw`` (reads consume the events)."""
        return os.open(self.path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)

    def stats(self, cpu: int) -> dict[str, float]:
        return parse_stats(self.read(f"per_cpu/cpu{cpu}/stats"))

    def remove(self) -> None:
        """Events off, the instance gone (its buffers freed). Quiet if it is gone already."""
        if not self.path.exists():
            return
        self.disable()
        try:
            os.rmdir(self.path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise TrafficError(f"cannot remove tracefs instance {self.path}: {exc.strerror}") from exc


def leftover_instances(owner: str, root: Path | None = None) -> list[str]:
    """Instances named ``netesto-<owner>-...`` (every ``netesto-`` one for owner ""): a collector killed
    before its cleanup left them."""
    prefix = INSTANCE_PREFIX + (f"{owner}-" if owner else "")
    try:
        base = (root or tracefs_root(mount=os.geteuid() == 0)) / "instances"
        return sorted(p.name for p in base.iterdir() if p.name.startswith(prefix))
    except (OSError, TrafficError):
        return []


__all__ = ["EventSpec", "INSTANCE_PREFIX", "Instance", "MOUNT_POINT", "leftover_instances", "parse_stats",
           "tracefs_root"]
