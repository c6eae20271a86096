"""Host statistics snapshots (the original's ``0/`` and ``1/``).

:func:`snapshot` writes, for one host, into ``dest_dir``::

    <host>.snmp  .snmp6  .netstat     /proc/net/{snmp,snmp6,netstat} verbatim
    <host>.sysctl                     every readable net.* sysctl, "key = value"
    <host>.stat                       /proc/stat verbatim
    <host>.ifstat                     "<iface> <counter> <value>" from /sys/class/net/*/statistics
    <host>.ethtool-S  .ethtool-k  .ethtool-c   ethtool per interface (see below)
    <host>.tc                         ``tc -s qdisc show``
    <host>.info                       JSON: host, hostname, kernel, time, version, interfaces

The ethtool and tc files hold one section per interface, each opened by a
line ``### <iface> <command>``; a missing tool or an operation the driver does
not support is recorded in its section as ``### <iface> <command> error: <text>``
and is not fatal. Everything is read in the calling process's network
namespace (run the snapshot inside the namespace to measure it).

Their parsers are in :mod:`netesto.raw.hoststats`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterable

from netesto._version import __version__
from netesto.errors import TrafficError

PROC = Path("/proc")
SYS_NET = Path("/sys/class/net")
SECTION = "### "
_TOOL_TIMEOUT = 10.0


def default_interfaces(sys_net: Path = SYS_NET) -> list[str]:
    """Non-loopback interfaces that are administratively up, sorted."""
    out = []
    try:
        names = sorted(os.listdir(sys_net))
    except OSError:
        return []
    for name in names:
        if name == "lo":
            continue
        try:
            flags = int((sys_net / name / "flags").read_text(), 16)
        except (OSError, ValueError):
            continue
        if flags & 0x1:  # IFF_UP
            out.append(name)
    return out


def read_sysctls(root: Path = PROC / "sys" / "net") -> list[tuple[str, str]]:
    """Every readable sysctl under ``root`` as (``net.x.y``, value) pairs, sorted.

    Read straight from /proc/sys (no ``sysctl -a`` process). Values keep
    sysctl's whitespace collapsed to single tabs; write-only and unreadable
    entries are skipped. Dots in path parts (e.g. VLAN names) become ``/``
    as sysctl prints them.
    """
    pairs: list[tuple[str, str]] = []
    base = root.parent
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(base)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            try:
                value = path.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            key = ".".join(part.replace(".", "/") for part in (*rel_dir.parts, name))
            pairs.append((key, "\t".join(value.split())))
    pairs.sort()
    return pairs


def read_ifstat(interfaces: Iterable[str], sys_net: Path = SYS_NET) -> str:
    """``<iface> <counter> <value>`` lines from /sys/class/net/<iface>/statistics."""
    lines = []
    for iface in interfaces:
        stats = sys_net / iface / "statistics"
        try:
            names = sorted(os.listdir(stats))
        except OSError:
            continue
        for name in names:
            try:
                value = (stats / name).read_text().strip()
            except OSError:
                continue
            lines.append(f"{iface} {name} {value}")
    return "\n".join(lines) + ("\n" if lines else "")


def _run_tool(argv: list[str]) -> tuple[bool, str]:
    tool = shutil.which(argv[0])
    if tool is None:
        return False, f"{argv[0]} not found on PATH"
    try:
        proc = subprocess.run(
            [tool, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=_TOOL_TIMEOUT,
            env=dict(os.environ, LC_ALL="C"),
        )
    except subprocess.TimeoutExpired:
        return False, f"{' '.join(argv)} timed out after {_TOOL_TIMEOUT:g} s"
    except OSError as exc:
        return False, f"{' '.join(argv)}: {exc.strerror}"
    if proc.returncode != 0:
        err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return False, err[-1] if err else f"exit status {proc.returncode}"
    return True, proc.stdout


def ethtool_text(option: str, interfaces: Iterable[str]) -> str:
    """One section per interface of ``ethtool <option> <iface>`` output."""
    parts = []
    for iface in interfaces:
        ok, text = _run_tool(["ethtool", option, iface])
        if ok:
            parts.append(f"{SECTION}{iface} ethtool {option}\n{text.rstrip()}\n")
        else:
            parts.append(f"{SECTION}{iface} ethtool {option} error: {text.strip()}\n")
    return "".join(parts)


def snapshot(
    dest_dir: str | os.PathLike[str],
    host: str,
    interfaces: Iterable[str] | None = None,
) -> list[Path]:
    """Write one host's statistics files into ``dest_dir``; return their paths."""
    dest = Path(dest_dir)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrafficError(f"snapshot of {host}: cannot create {dest}: {exc.strerror}") from exc
    ifaces = list(interfaces) if interfaces is not None else default_interfaces()
    written: list[Path] = []
    t_wall = time.time()

    def put(suffix: str, text: str) -> None:
        path = dest / f"{host}.{suffix}"
        try:
            path.write_text(text)
        except OSError as exc:
            raise TrafficError(f"snapshot of {host}: cannot write {path}: {exc.strerror}") from exc
        written.append(path)

    for suffix, src in (("snmp", "net/snmp"), ("snmp6", "net/snmp6"), ("netstat", "net/netstat"),
                        ("stat", "stat")):
        try:
            put(suffix, (PROC / src).read_text())
        except OSError as exc:
            # e.g. snmp6 without IPv6: recorded, not fatal
            put(suffix, f"{SECTION}error: cannot read /proc/{src}: {exc.strerror}\n")
    put("sysctl", "".join(f"{k} = {v}\n" for k, v in read_sysctls()))
    put("ifstat", read_ifstat(ifaces))
    for option, suffix in (("-S", "ethtool-S"), ("-k", "ethtool-k"), ("-c", "ethtool-c")):
        put(suffix, ethtool_text(option, ifaces))
    ok, text = _run_tool(["tc", "-s", "qdisc", "show"])
    put("tc", text if ok else f"{SECTION}error: {text.strip()}\n")
    info = {
        "host": host,
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "time": t_wall,
        "netesto_version": __version__,
        "interfaces": ifaces,
    }
    put("info", json.dumps(info, indent=1, sort_keys=True) + "\n")
    return written


__all__ = [
    "default_interfaces",
    "ethtool_text",
    "read_ifstat",
    "read_sysctls",
    "snapshot",
]
