"""What the peer benches share: the engine on a veth pair, the peer tools, placement and the verdict.

Every peer bench (``bench_stream``, ``bench_rr``, ``bench_crr``) compares
like with like and says how: the peers get the engine's write/read sizes
and the same CPU placement (one ``setsid``/``taskset`` prefix for every client,
one for every server: each end in a session of its own, see :func:`place`),
many engine flows meet a many-flow peer, and each case runs at least 3
interleaved repetitions (the order of the tools turns every repetition). A
case prints every repetition's values, then each ratio as the median of the
per-repetition ratios (engine over the peer run of the same repetition) with
its [min-max] spread, the target and ok/MISSED.

netperf and neper are not in Debian: ``../shared/peers/build.sh`` builds
them from their public sources into a cache and prints the bin directory;
:func:`peer_bin` runs it (it returns at once once built). They serve the
benches and tests only; the project never installs them.

Run every bench with ``nice -n 10`` in front (``nice -n 10 python3 -m
bench.bench_rr``): every process it starts, the engine's and the peers',
inherits the same niceness.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import json
import math
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from netesto.raw.histogram import Histogram
from netesto.raw.nflow import RawFlow, read_flow
from tests import netns

ENGINE = [sys.executable, "-m", "netesto.engine"]
BUILD_SH = Path(__file__).resolve().parents[2] / "shared" / "peers" / "build.sh"
PEER_TOOLS = ("netperf", "netserver", "tcp_rr", "tcp_crr", "tcp_stream")


class PeerMissing(RuntimeError):
    """A peer tool the bench needs is not built or not installed."""


def peer_bin(build_sh: Path = BUILD_SH) -> Path:
    """The directory holding netperf, netserver and neper's tools, built by ``build.sh`` if needed."""
    if not build_sh.is_file():
        raise PeerMissing(f"netperf/neper: {build_sh} not found (it lives in ../shared/peers next to the "
                          "repository); set up the peers as that folder's README says")
    proc = subprocess.run(["bash", str(build_sh)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PeerMissing(f"netperf/neper: {build_sh} failed: {proc.stderr.strip()[-400:]}")
    where = Path(proc.stdout.strip().splitlines()[-1])
    missing = [t for t in PEER_TOOLS if not (where / t).is_file()]
    if missing:
        raise PeerMissing(f"netperf/neper: {', '.join(missing)} missing in {where}")
    return where


def keyvals(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a peer tool's output (netperf ``-k``, neper)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def reps(text: str) -> int:
    """An argparse type: repetitions, at least 3."""
    n = int(text)
    if n < 3:
        raise argparse.ArgumentTypeError(f"at least 3 repetitions, got {n}")
    return n


def arguments(doc: str, dur: float, cpus: bool = True) -> argparse.ArgumentParser:
    """The options every peer bench takes: ``--dur``, ``--reps`` (>= 3), ``--busy`` and, with ``cpus``,
    ``--cpus``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dur", type=float, default=dur, help="seconds per run (netperf, neper: whole seconds)")
    parser.add_argument("--reps", type=reps, default=3, help="interleaved repetitions per case (>= 3)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N busy loops beside every tool for the whole bench (the kernel places them)")
    if cpus:
        parser.add_argument("--cpus", type=placement, default=(0, 1),
                            help="client CPU,server CPU for every tool (default 0,1), or none")
    return parser


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def guard() -> None:
    """However the bench ends, its namespaces go, with the processes in them: those of bench and test runs
    that died without their cleanup go first, SIGTERM raises SystemExit (so the benches' ``finally``
    blocks run), and at exit every namespace of this run is removed."""
    netns.remove_stale()
    signal.signal(signal.SIGTERM, _terminated)
    atexit.register(netns.cleanup_all)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def delayline_testbed(bench: str, prefix: str, **config: Any) -> Iterator[tuple[Any, Path] | None]:
    """A 2-host testbed (``config`` as :meth:`TestbedConfig.parse` takes it) whose delay comes from the delay
    line: its ``up`` result and a scratch directory, taken down after; None, after saying why, where there
    are no namespaces or the kernel has netem (nothing of the delay line to measure)."""
    from netesto.testbed import lifecycle

    ok, why = lifecycle.namespaces_supported()
    if not ok:
        print(f"{bench}: skipped: {why}")
        yield None
        return
    guard()
    name = f"{prefix}{os.getpid() % 10000}"
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        res = lifecycle.up(lifecycle.TestbedConfig.parse(name=name, hosts=2, dir=tmp, **config))
        try:
            if res.state["delay_mode"] != "delayline":
                print("netem is available here: the testbed uses it, not the delay line; nothing to measure")
                yield None
            else:
                yield res, tmp
        finally:
            lifecycle.down(name)


def ready(name: str, tools: Sequence[str] = ()) -> Path | None:
    """The peers' bin directory once ``setsid``, ``taskset`` and ``tools`` are on PATH; None after saying what is
    missing.
    The bench is :func:`guard`-ed from here on."""
    guard()
    missing = [t for t in ("setsid", "taskset", *tools) if shutil.which(t) is None]
    if missing:
        print(f"{name}: needs {', '.join(missing)} on PATH")
        return None
    try:
        return peer_bin()
    except PeerMissing as exc:
        print(f"{name}: {exc}")
        return None


def place(cpu: int | None) -> list[str]:
    """The prefix that starts one end of a tool as a user's shell or an agent daemon would: in a session of its
    own, under ``taskset`` on ``cpu`` (None: unpinned).

    With the scheduler's autogroups on (``kernel.sched_autogroup_enabled``, processes in the root cpu cgroup)
    each session is one group with one share: ends started from the bench's own session would share one
    group's weight, split across both CPUs, against each busy loop's whole group (``busy_loops`` starts each
    in its own session), and ran 24-28 % of their CPU to a busy loop's 68 %. Every tool's ends, the
    engine's and each peer's, start so: like with like."""
    return ["setsid", "-w", *([] if cpu is None else ["taskset", "-c", str(cpu)])]


def placement(text: str) -> tuple[int | None, int | None]:
    """``"0,1"`` -> client CPU 0, server CPU 1; ``"none"`` -> unpinned."""
    if text == "none":
        return None, None
    cli, srv = (int(x) for x in text.split(","))
    return cli, srv


def where(cpus: tuple[int | None, int | None]) -> str:
    cli, srv = cpus
    return "unpinned" if cli is None else f"client CPU {cli}, server CPU {srv}"


class Engine:
    """The engine's server in namespace b; clients run from namespace a. ``options`` go to both
    ends' command lines (``("--sample-duty", "0.5")``)."""

    def __init__(self, pair: netns.VethPair, workdir: Path, server_prefix: Sequence[str] = (),
                 options: Sequence[str] = ()) -> None:
        self.pair = pair
        self.workdir = workdir
        self.options = list(options)
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc = pair.popen(pair.b, [*server_prefix, *ENGINE, "server", "--bind", pair.addr_b, "--port", "0",
                                        "--datadir", str(workdir / "srv"), *self.options],
                               stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = json.loads(self.proc.stdout.readline())["port"]
        self.runs = 0

    def run(self, flows: list[dict[str, Any]], workers: int | None = None,
            client_prefix: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Run flows (dicts without server/port); returns the client summaries."""
        self.runs += 1
        specs = [dict(f, server=self.pair.addr_b, port=self.port, exp=self.runs) for f in flows]
        path = self.workdir / f"specs{self.runs}.json"
        path.write_text(json.dumps(specs))
        argv = [*client_prefix, *ENGINE, "client", "--specs", str(path), "--datadir", str(self.workdir / "cli"),
                *self.options]
        if workers:
            argv += ["--workers", str(workers)]
        proc = self.pair.run(self.pair.a, argv, timeout=120)
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        ends = [e for e in events if e["event"] in ("done", "error")]
        bad = [e for e in ends if e["event"] == "error"]
        if bad or proc.returncode:
            raise RuntimeError(f"engine flows failed: {bad or proc.stderr}")
        return [e["summary"] for e in ends]

    def server_summaries(self, flow_ids: list[str], timeout: float = 10.0) -> list[dict[str, Any]]:
        """The server ends' summaries of the last run's flows (the receiver's counts), once written."""
        paths = [self.workdir / "srv" / str(self.runs) / "flows" / f"{fid}.server.nflow" for fid in flow_ids]
        deadline = time.monotonic() + timeout
        while True:
            found = [read_flow(p).summary if p.exists() else None for p in paths]
            if all(found):
                return found  # type: ignore[return-value]
            if time.monotonic() > deadline:
                raise RuntimeError(f"no server summary for {[f for f, s in zip(flow_ids, found) if not s]}")
            time.sleep(0.05)

    def client_flow(self, flow_id: str) -> RawFlow:
        """The last run's client end of ``flow_id``: its ``.nflow`` file read."""
        return read_flow(self.workdir / "cli" / str(self.runs) / "flows" / f"{flow_id}.client.nflow")

    def server_flow(self, flow_id: str) -> RawFlow:
        """The last run's server end of ``flow_id`` (once written: :meth:`server_summaries` waits for it)."""
        return read_flow(self.workdir / "srv" / str(self.runs) / "flows" / f"{flow_id}.server.nflow")

    def p99_us(self, flow_ids: list[str]) -> float:
        """p99 latency (us) of the last run's client flows, their histograms merged (the ``.nflow`` summaries)."""
        merged = Histogram()
        for fid in flow_ids:
            summary = self.client_flow(fid).summary
            merged.merge(Histogram.from_dict((summary or {})["latency_hist"]))
        return merged.summary(0.001).p99

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# The case the verdicts printed now belong to (the title of the last table), for the scorecard.
_case = ""
SCORE_ENV = "NETESTO_BENCH_SCORE"  # a file each verdict with a target is added to (a JSON line), if set


def busy_note(busy: int) -> str:
    """The header line that says what else ran beside the tools."""
    return f"# {busy} busy loop(s) beside every tool" if busy else "# nothing else of ours running"


def score(label: str, median: float, low: float, high: float, n: int, op: str, target: float, ok: bool) -> None:
    """Add a targeted reading to the scorecard file (``$NETESTO_BENCH_SCORE``), if one is asked for."""
    path = os.environ.get(SCORE_ENV)
    if not path:
        return
    row = {"bench": Path(sys.argv[0]).stem, "case": _case, "label": label.strip(), "median": median, "min": low,
           "max": high, "reps": n, "op": op, "target": target, "ok": ok}
    with open(path, "a") as out:
        out.write(json.dumps(row) + "\n")


def table(title: str, columns: dict[str, list[float]], fmt: str = ".0f") -> None:
    """The case's title, then one line per repetition with every tool's value."""
    global _case
    _case = title.split("  [")[0]
    print(f"\n{title}")
    print("  rep" + "".join(f"{name:>22}" for name in columns))
    for i in range(len(next(iter(columns.values())))):
        print(f"  {i + 1:>3}" + "".join(f"{vals[i]:>22{fmt}}" for vals in columns.values()))


def verdict(label: str, ours: list[float], theirs: list[float], op: str | None = ">=",
            target: float | None = 1.0) -> bool | None:
    """Print the median of the per-repetition ratios ours/theirs, its [min-max] and the target.

    ``target`` None: no target (a labelled reading, e.g. peers at their defaults).
    Returns whether the target held (None without one).
    """
    ratios = [a / b if b else (1.0 if a == 0 else float("inf")) for a, b in zip(ours, theirs)]  # (0/0: level)
    med = statistics.median(ratios)
    line = f"  {label:<44} median {med:6.2f} [{min(ratios):.2f}-{max(ratios):.2f}] of {len(ratios)} reps"
    if target is None:
        print(f"{line}   (no target)", flush=True)
        return None
    ok = med >= target if op == ">=" else med <= target
    print(f"{line}   target {op} {target:g}: {'ok' if ok else 'MISSED'}", flush=True)
    score(label, med, min(ratios), max(ratios), len(ratios), op or ">=", target, ok)
    return ok


def leading(readings: dict[str, list[float]], higher: bool = True) -> str:
    """The tool whose median reading over the repetitions is best: highest (goodput) or lowest (retransmissions).

    "The best peer" is a tool, chosen once over all the repetitions, and the
    engine's per-repetition ratios are taken against it. Taking the best of
    several peers afresh in each repetition compares one noisy reading with
    the extreme of several: biased against the engine even when every tool
    is the same (``python3 -m bench.stream_null``, an engine against copies
    of itself, read 0.94 of the best copy in each repetition, 1.02 of the
    copy with the best median). NaN readings (a tool that reports none)
    rank last.
    """
    def key(name: str) -> float:
        vals = [v for v in readings[name] if not math.isnan(v)]
        if not vals:
            return -math.inf
        med = statistics.median(vals)
        return med if higher else -med

    return max(readings, key=key)


def each_rep_extreme(readings: dict[str, list[float]], higher: bool = True) -> list[float]:
    """The best reading of any tool in each repetition: highest or lowest (biased: see :func:`leading`)."""
    pick = max if higher else min
    return [pick(vals) for vals in zip(*readings.values())]


def rotated(items: list[Any], rep: int) -> list[Any]:
    """``items`` turned by ``rep`` places: the tools take turns going first."""
    k = rep % len(items)
    return items[k:] + items[:k]


def summary_line(results: list[bool | None]) -> None:
    held = [r for r in results if r is not None]
    print(f"\n# targets: {sum(held)} of {len(held)} held, {len(held) - sum(held)} MISSED", flush=True)


__all__ = ["ENGINE", "SCORE_ENV", "Engine", "PeerMissing", "arguments", "busy_note", "each_rep_extreme", "leading",
           "peer_bin", "place", "placement", "ready", "reps", "rotated", "score", "summary_line", "table", "verdict",
           "where"]
