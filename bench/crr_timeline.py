"""Where a TCP_CRR transaction's time goes, tool by tool: its chain of system calls, traced.

``nice -n 10 python3 -m bench.crr_timeline [--reps 3] [--cpus 0,1] [--window 0.5]`` (root, ``perf``).

The engine closing server-first and netperf (which closes so), each in turn on a fresh veth pair, for
``--reps`` interleaved 3 s runs; ``perf record -a`` traces the system calls of both ends for ``--window``
seconds in each run's middle (their entries and exits, with the client on one CPU and the server on
another). A transaction is a chain across the two CPUs, split where one end hands it to the other:

- ``request out -> reply out``: the client enters ``sendto`` with the request, until the server enters
  ``sendto`` with the reply (the server's wakeup, accept and read included);
- ``reply out -> client has it``: until the client's wait for the reply returns (``poll`` or ``recvfrom``);
- ``client: reply in -> next request``: the client reads the reply and the server's close, closes,
  connects and sends the next request.

Printed per tool, medians over the reps of each run's median: those three, the period (request to next
request) and the time inside each system call on each end. Tracing slows every call by about the same
(perf's per-event cost), so read the columns against each other, not as the untraced rate.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_crr import ends, one_run
from bench.common import placement, ready, rotated, where

TOOLS = ("engine server", "netperf")
CALLS = ("socket", "connect", "sendto", "recvfrom", "poll", "close", "accept", "accept4")
EVENTS = ",".join(f"syscalls:sys_{edge}_{call}" for call in CALLS for edge in ("enter", "exit"))
LINE = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):")
SEGMENTS = ("request out -> reply out", "reply out -> client has it", "client: reply in -> next request", "period")


def record(name: str, bin_dir: Path, cpus: tuple[int | None, int | None], workdir: Path, window: float) -> str:
    """``perf script`` of ``window`` s of system calls in the middle of one 3 s run of ``name``."""
    data = workdir / "perf.data"
    with one_run(name, bin_dir, cpus, workdir, dur=3) as (client, server_pid):
        time.sleep(1.2)  # both ends up before the window opens
        subprocess.run(["perf", "record", "-q", "-a", "-e", EVENTS, "-o", str(data), "--", "sleep", str(window)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        roles = ends(name, client, server_pid)
    text = subprocess.run(["perf", "script", "--ns", "-i", str(data), "-F", "pid,cpu,time,event"],
                          capture_output=True, text=True, check=True).stdout
    who = {pid: end for end, pids in roles.items() for pid in pids}
    return "\n".join(f"{who[int(m.group(1))]} {m.group(3)} {m.group(4)} {m.group(5)}"
                     for line in text.splitlines() if (m := LINE.match(line)) and int(m.group(1)) in who)


def analyse(trace: str) -> dict[str, float]:
    """Median microseconds of each chain segment and of each call on each end, from :func:`record`'s lines."""
    events = [(end, float(ts) * 1e6, edge, call) for end, ts, edge, call in (line.split() for line in trace.splitlines())]
    inside: dict[str, list[float]] = {}
    entered: dict[tuple[str, str], float] = {}
    chain: dict[str, list[float]] = {seg: [] for seg in SEGMENTS}
    request = reply = woke = None
    for end, us, edge, call in events:
        if edge == "enter":
            entered[end, call] = us
        elif (end, call) in entered:
            inside.setdefault(f"{end} {call}", []).append(us - entered.pop((end, call)))
        if end == "client" and edge == "enter" and call == "sendto":
            if request is not None and reply is not None and woke is not None:
                for seg, span in zip(SEGMENTS, (reply - request, woke - reply, us - woke, us - request)):
                    chain[seg].append(span)
            request, reply, woke = us, None, None
        elif end == "server" and edge == "enter" and call == "sendto" and request is not None and reply is None:
            reply = us
        elif (end == "client" and edge == "exit" and call in ("poll", "recvfrom") and reply is not None
              and woke is None):
            woke = us
    got = {seg: statistics.median(spans) for seg, spans in chain.items() if spans}
    got.update({f"in {key}": statistics.median(spans) for key, spans in inside.items() if len(spans) > 50})
    got["transactions"] = len(chain["period"])
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cpus", type=placement, default=(0, 1), help="client,server CPUs (default 0,1)")
    parser.add_argument("--window", type=float, default=0.5, help="seconds traced in each run (default 0.5)")
    args = parser.parse_args()
    bin_dir = ready("crr_timeline", ("perf",))
    if bin_dir is None:
        return 1
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in TOOLS}
    with tempfile.TemporaryDirectory(prefix="crr_timeline") as tmp:
        for rep in range(args.reps):
            for name in rotated(list(TOOLS), rep):
                got = analyse(record(name, bin_dir, args.cpus, Path(tmp), args.window))
                runs[name].append(got)
                print(f"  rep {rep + 1} {name:14} period {got.get('period', float('nan')):6.1f} us "
                      f"({got['transactions']} transactions traced)", flush=True)
    print(f"# TCP_CRR closing server-first, {where(args.cpus)}, {args.reps} interleaved 3 s runs per tool, "
          f"{args.window:g} s traced in each; median over runs of each run's median, microseconds (traced)")
    keys = list(SEGMENTS) + sorted({k for got in runs.values() for g in got for k in g if k.startswith("in ")})
    print(f"  {'':38}" + "".join(f"{name:>16}" for name in TOOLS))
    for key in keys:
        cells = [[g[key] for g in runs[name] if key in g] for name in TOOLS]
        print(f"  {key:38}" + "".join(f"{statistics.median(c):16.1f}" if c else f"{'-':>16}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
