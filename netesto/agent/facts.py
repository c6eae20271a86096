"""Facts about an agent's host that a result should carry: the versions of the tools it runs."""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess

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


__all__ = ["TOOLS", "tool_versions"]
