"""A controller driving 50 agents on loopback through one RUN (a 50-client script).

51 real ``netesto-agent`` processes on 127.0.0.1 (insecure: loopback only): one
server agent and 50 client agents. The script is one inlib ``MServerRR`` RUN
with the 50 clients (short tail waits), so the runner connects 51 agents,
snapshots them, starts 50 flows at one common instant, waits for them, fetches
every host's files and writes experiment.json.

Peer: the same 50 flows run by one local flow-engine process with no agents
and no controller (``python -m netesto.engine client``), measured in the same
run; the ratio of wall times is the controller+agents overhead factor. The
machine is shared by 8 engineers on 2 vCPUs: numbers are noisy.

    python3 -m bench.bench_scale [--clients 50] [--dur 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netesto.controller import Lab, run
from netesto.controller.progress import DataStored, FlowsScheduled, HostError, RecordingProgress, RunStarted
from netesto.errors import NetestoError
from netesto.protocol.flowspec import FlowSpec

ROOT = Path(__file__).resolve().parents[1]


def start_agents(names: list[str], tmp: Path) -> dict[str, tuple[subprocess.Popen, int]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = {}
    for name in names:
        argv = [sys.executable, "-m", "netesto.agent.cli", "--bind", "127.0.0.1", "--port", "0",
                "--test-bind", "127.0.0.1", "--insecure", "--datadir", str(tmp / name), "--name", name,
                "--ready-file", str(tmp / f"{name}.port"), "--log-file", str(tmp / f"{name}.log")]
        procs[name] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
    out = {}
    deadline = time.monotonic() + 120
    for name, proc in procs.items():
        ready = tmp / f"{name}.port"
        while not (ready.exists() and ready.read_text().strip()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"agent {name} did not start")
            time.sleep(0.05)
        out[name] = (proc, int(ready.read_text().split()[0]))
    return out


def stop_agents(agents: dict[str, tuple[subprocess.Popen, int]]) -> None:
    for proc, _ in agents.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc, _ in agents.values():
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)


def bare_engine(n: int, dur: float, tmp: Path) -> float:
    """Wall time of the same n flows in one local engine (server + client), no agents."""
    data = tmp / "bare"
    data.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "netesto.engine", "server", "--bind", "127.0.0.1",
                               "--port", str(port), "--datadir", str(data), "--token", "bench"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        specs = [FlowSpec(flow_id=f"c{i}-srv-1-0", test="TCP_RR", server="127.0.0.1", port=port, ca="cubic",
                          dur=dur, req=1024, reply=1, token="bench", exp=1).to_dict() for i in range(n)]
        (data / "specs.json").write_text(json.dumps(specs))
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "netesto.engine", "client", "--specs", str(data / "specs.json"),
                        "--datadir", str(data)], stdout=subprocess.DEVNULL, env=env, check=False)
        return time.time() - t0
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--dur", type=float, default=2.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale"))
    clients = [f"c{i + 1}" for i in range(args.clients)]
    t_start = time.time()
    agents = start_agents(["srv", *clients], tmp)
    t_agents = time.time() - t_start
    try:
        lab = Lab.of(**{n: {"control": "127.0.0.1", "port": p} for n, (_, p) in agents.items()}, insecure=True)
        text = ("SOURCE inlib\nRUN InlibShortWaits\n"
                f"RUN MServerRR servers=srv clients={','.join(clients)} reqs=1K ca=cubic dur={args.dur:g} "
                "expName=scale\n")
        rec = RecordingProgress()
        error = ""
        t0 = time.time()
        try:
            result = run(text, lab=lab, workdir=tmp / "work", progress=rec)
            exps = result.exps
        except NetestoError as exc:
            error = exc.format_message()
            exps = [e.exp for e in getattr(exc.detail, "experiments", ())]
        took = time.time() - t0
        sched = rec.of(FlowsScheduled)
        stored = rec.of(DataStored)
        errors = rec.of(HostError)
        first_sched = min((e.t for e in sched), default=t0)
        lead = (sched[0].start_at - first_sched) if sched else 0.0
        exp_dir = tmp / "work" / str(exps[0]) if exps else tmp / "work"
        client_files = len(list(exp_dir.glob("flows/*.client.nflow")))
        server_files = len(list(exp_dir.glob("flows/*.server.nflow")))
        doc = json.loads((exp_dir / "experiment.json").read_text()) if (exp_dir / "experiment.json").exists() else {}
        skews = sorted(abs(f["start_skew"]) * 1e3 for f in doc.get("flows", []) if f["start_skew"] is not None)
        bare = bare_engine(args.clients, args.dur, tmp)
        print(f"scale: 1 server + {args.clients} client agents on loopback, one RUN MServerRR, "
              f"{args.clients} TCP_RR flows of {args.dur:g} s (noisy shared 2-vCPU host)")
        print(f"  agents started in            {t_agents:7.1f} s")
        print(f"  run() total                  {took:7.1f} s")
        print(f"    connect+hello+snapshots    {first_sched - t0:7.1f} s (until the flows were scheduled)")
        print(f"    start lead                 {lead:7.1f} s")
        print(f"    flows + fetch + process    {t0 + took - first_sched - lead:7.1f} s")
        print(f"  hosts that stored data       {len({e.host for e in stored}):7d} of {args.clients + 1}")
        print(f"  raw files client/server      {client_files:4d} / {server_files}")
        if skews:
            print(f"  start skew p50/p99/max       {skews[len(skews) // 2]:.1f} / "
                  f"{skews[min(len(skews) - 1, int(0.99 * (len(skews) - 1)))]:.1f} / {skews[-1]:.1f} ms")
        print(f"  host errors                  {len(errors)}" + (f": {errors[0].host}: {errors[0].error}" if errors else ""))
        print(f"  run error                    {error or 'none'}")
        print(f"  peer: one local engine, same flows, no agents: {bare:.1f} s; "
              f"ratio run/peer {took / bare:.1f}x")
    finally:
        stop_agents(agents)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
