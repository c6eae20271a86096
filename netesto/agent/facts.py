"""Facts about an agent's host that a result or a run's checks need: the versions of the tools it
runs, the queueing disciplines its kernel can install, its network devices."""

from __future__ import annotations

import functools
import gzip
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Sequence

# tool -> the arguments that make it print its version
TOOLS = {"iperf3": ["--version"], "netperf": ["-V"], "tc": ["-V"], "ethtool": ["--version"], "ping": ["-V"],
         "tcpdump": ["--version"]}
_VERSION = re.compile(r"\d+(?:\.\d+)+[\w.+-]*")  # 3.12, 6.1.0, 2.7.1
_DATED = re.compile(r"\b\d{8}\b")  # iputils 20221126


@functools.cache
def tool_versions() -> dict[str, str]:
    """``{"python": "3.11.7", "iperf3": "3.12", ...}`` for the tools found on PATH (asked once)."""
    out = {"python": platform.python_version()}
    for tool, args in TOOLS.items():
        path = shutil.which(tool)
        if path is None:
            continue
        try:
            proc = subprocess.run([path, *args], capture_output=True, text=True, timeout=2)
        except (OSError, subprocess.SubprocessError):
            continue
        m = _VERSION.search(proc.stdout + proc.stderr) or _DATED.search(proc.stdout + proc.stderr)
        out[tool] = m.group(0) if m else "?"
    return out


# Always there with tc at all (sch_generic, sch_mq); sch_fifo brings three names.
_CORE_QDISCS = ("mq", "noqueue", "pfifo_fast")
_FIFO = ("bfifo", "pfifo", "pfifo_head_drop")
_CONFIG_SCH = re.compile(r"^CONFIG_NET_SCH_([A-Z0-9_]+)=[ym]$", re.M)
_MODULE_SCH = re.compile(r"(?:^|/)sch_([a-z0-9_]+)\.ko", re.M)
_NOT_ROOT = frozenset({"ingress", "default", "clsact"})  # config options of net/sched that are no root qdisc


@functools.cache
def qdiscs(release: str = "") -> list[str]:
    """The root qdiscs this kernel can install, sorted: from its build configuration
    (``/proc/config.gz``, else ``/boot/config-<release>``), else its modules (built in, or
    ``sch_*.ko`` files); [] when none of them can be read (then nothing is checked)."""
    release = release or os.uname().release
    for config in (Path("/proc/config.gz"), Path(f"/boot/config-{release}")):
        try:
            raw = config.read_bytes()
            return qdisc_names((gzip.decompress(raw) if config.suffix == ".gz" else raw).decode())
        except (OSError, EOFError, ValueError):
            continue
    here = Path("/lib/modules") / release
    found: list[str] = []
    try:
        found.append((here / "modules.builtin").read_text())
    except OSError:
        pass
    try:
        found += [p.name for p in (here / "kernel" / "net" / "sched").iterdir()]
    except OSError:
        pass
    return qdisc_names(None, found)


def qdisc_names(config: str | None, modules: Sequence[str] = ()) -> list[str]:
    """The root qdiscs a kernel's build ``config`` text, else its ``modules`` (paths or file names),
    gives it; [] when they name none.

    >>> qdisc_names("CONFIG_NET_SCH_HTB=y\\n# CONFIG_NET_SCH_CAKE is not set\\nCONFIG_NET_SCH_FQ_CODEL=m\\n"
    ...             "CONFIG_NET_SCH_INGRESS=y\\nCONFIG_NET_SCH_FIFO=y\\n")
    ['bfifo', 'fq_codel', 'htb', 'mq', 'noqueue', 'pfifo', 'pfifo_fast', 'pfifo_head_drop']
    >>> qdisc_names(None, ["kernel/net/sched/sch_tbf.ko\\nkernel/net/sched/sch_fq.ko", "sch_cake.ko.zst"])
    ['cake', 'fq', 'mq', 'noqueue', 'pfifo_fast', 'tbf']
    >>> qdisc_names(None, [])
    []
    """
    if config is not None:
        names = {m.lower() for m in _CONFIG_SCH.findall(config)}
    else:
        names = {m for text in modules for m in _MODULE_SCH.findall(text)}
    if not names:
        return []
    if "fifo" in names:
        names |= set(_FIFO)
    return sorted((names | set(_CORE_QDISCS)) - _NOT_ROOT - {"fifo"})


def interfaces() -> list[str]:
    """The network devices of this host (of the agent's network namespace), sorted."""
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        return []


__all__ = ["TOOLS", "interfaces", "qdisc_names", "qdiscs", "tool_versions"]
