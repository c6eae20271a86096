"""getsockopt(TCP_INFO) socket by socket in a sampler's tick, in C (``bench/tcpinfo_cold.c``).

The sampler reads every flow end's socket once a tick, 10 ms apart. Timing each read of a tick
says what a cold cache costs and where: the first read of a tick pays for the kernel's cold
code, the others only for their own socket's lines (the code is warm again by then). Built
with the system's C compiler into a temporary directory; ``python3 -m bench.bench_sampling
--cost-only`` prints it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("tcpinfo_cold.c")


def cold_reads(flows: int, ticks: int = 300) -> dict[str, dict[str, float]] | None:
    """{"spaced": {...}, "back to back": {...}} of us per read (first, others, all); None without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tcpinfo_cold") as tmp:
        exe = Path(tmp) / "tcpinfo_cold"
        subprocess.run([cc, "-O2", "-o", str(exe), str(SOURCE)], check=True, capture_output=True)
        return {what: json.loads(subprocess.run([str(exe), str(flows), str(ticks), spaced], check=True,
                                                capture_output=True, text=True).stdout)
                for what, spaced in (("spaced", "1"), ("back to back", "0"))}


def print_cold_reads(flows: int) -> None:
    got = cold_reads(flows)
    if got is None:
        print("# getsockopt(TCP_INFO) read by read: no C compiler, skipped")
        return
    print(f"# getsockopt(TCP_INFO) read by read, in C, {flows} idle loopback connections, us a read "
          "(the first read of a tick finds the kernel's code cold, the others only their socket's lines)")
    for what, r in got.items():
        label = "ticks 10 ms apart" if what == "spaced" else "ticks back to back"
        print(f"  {label}: the tick's first read {r['first']:.2f}, each other {r['others']:.2f}, "
              f"mean {r['all']:.2f}", flush=True)


__all__ = ["cold_reads", "print_cold_reads"]
