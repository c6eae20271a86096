"""Whose sockets: a process's cgroup v2 and its id (the kernel's filter condition), a process tree's sockets."""

from __future__ import annotations

import os
import subprocess
from typing import Iterable

from netesto.errors import TrafficError

CGROUP_MOUNT = "/sys/fs/cgroup"


def cgroup_root(mount: bool = True) -> str:
    """Where the cgroup v2 hierarchy is mounted, mounting it at :data:`CGROUP_MOUNT` if it is not (a
    process under ``ip netns exec`` gets a fresh /sys without it; root only)."""
    def mounted() -> str | None:
        with open("/proc/self/mounts") as fh:
            return next((p[1] for p in (line.split() for line in fh) if len(p) > 2 and p[2] == "cgroup2"), None)

    where = mounted()
    if where is None and mount and os.path.isdir(CGROUP_MOUNT):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP_MOUNT], capture_output=True)
        where = mounted()
    if where is None:
        raise TrafficError(f"no cgroup v2 hierarchy is mounted (as root: mount -t cgroup2 none {CGROUP_MOUNT})")
    return where


def cgroup_id(path: str) -> int:
    """The cgroup v2 id of a cgroup (``/sys/fs/cgroup/a/b``, or ``a/b`` under the hierarchy's root): the
    inode number of its directory, as the kernel's filter compares it."""
    root = cgroup_root()
    rel = path[len(CGROUP_MOUNT):] if path.startswith(CGROUP_MOUNT + "/") or path == CGROUP_MOUNT else path
    full = os.path.join(root, rel.lstrip("/"))
    try:
        return os.stat(full).st_ino
    except OSError as exc:
        raise TrafficError(f"cgroup {path}: {exc.strerror}") from exc


def process_cgroup(pid: int) -> str:
    """The cgroup v2 path of process ``pid`` under the hierarchy's root (``/proc/PID/cgroup``'s ``0::``)."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError as exc:
        raise TrafficError(f"process {pid}: {exc.strerror}") from exc
    raise TrafficError(f"process {pid} is in no cgroup v2 hierarchy")


def fd_targets(pids: Iterable[int]) -> set[str]:
    """What the open file descriptors of the processes ``pids`` point at (``/proc/PID/fd`` links:
    paths, ``socket:[inode]``, ...; gone processes hold none)."""
    out = set()
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                out.add(os.readlink(f"/proc/{pid}/fd/{name}"))
            except OSError:
                continue
    return out


def process_inodes(pids: Iterable[int]) -> set[int]:
    """The inodes of the sockets the processes ``pids`` hold open (gone processes hold none)."""
    return {int(t[8:-1]) for t in fd_targets(pids) if t.startswith("socket:[")}


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (threads' children included)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


__all__ = ["CGROUP_MOUNT", "cgroup_id", "cgroup_root", "descendants", "fd_targets", "process_cgroup", "process_inodes"]
