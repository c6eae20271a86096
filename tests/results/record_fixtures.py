"""Record the results layer's test fixtures from REAL flows of the netesto flow engine.

Runs ``python -m netesto.engine server`` and ``... client`` (real TCP, TCP_INFO
sampled every 10 ms), the ping collector and host stats snapshots, then lays
the files out as the controller runner does::

    <out>/<exp>/experiment.json
    <out>/<exp>/flows/<flow_id>.client.nflow  and  .server.nflow
    <out>/<exp>/ping/h1-h2.nflow
    <out>/<exp>/0/<host>.*  and  <out>/<exp>/1/<host>.*

Usage (what produced tests/results/data/)::

    python tests/results/record_fixtures.py --out tests/results/data --exp 1 --plan mixed
    python tests/results/record_fixtures.py --out tests/results/data --exp 2 --plan cubic2
    python tests/results/record_fixtures.py --out tests/results/data --exp 3 --plan bbr2

Over loopback by default; :func:`record` also takes namespace prefixes so the
netns test re-records between two namespaces.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from netesto.collectors.ping import PingCollector  # noqa: E402

ENGINE = [sys.executable, "-m", "netesto.engine"]
_STREAM: dict[str, Any] = {"test": "TCP_STREAM", "dur": 1.0, "instance": 0}
# plan -> flows; "mixed" = a cubic and a bbr stream and one TCP_RR, each its own group.
PLANS: dict[str, list[dict[str, Any]]] = {
    "mixed": [
        dict(_STREAM, group=1, ca="cubic"),
        dict(_STREAM, group=2, ca="bbr"),
        {"group": 3, "instance": 0, "test": "TCP_RR", "ca": "cubic", "dur": 1.0,
         "req": 1000, "reply": 100},
    ],
    "cubic2": [dict(_STREAM, group=1, ca="cubic", instance=i) for i in (0, 1)],
    "bbr2": [dict(_STREAM, group=1, ca="bbr", instance=i) for i in (0, 1)],
    # the other directions and connection-per-transaction (live netns test only)
    "directions": [
        dict(_STREAM, group=1, ca="cubic", test="TCP_MAERTS"),
        dict(_STREAM, group=2, ca="cubic", test="TCP_BIDIR"),
        {"group": 3, "instance": 0, "test": "TCP_CRR", "ca": "cubic", "dur": 1.0,
         "req": 100, "reply": 200},
    ],
}


def _snapshot(prefix: Sequence[str], dest: Path, host: str) -> None:
    code = ("import sys; from netesto.collectors.hoststats import snapshot; "
            "snapshot(sys.argv[1], sys.argv[2])")
    subprocess.run([*prefix, sys.executable, "-c", code, str(dest), host], check=True, cwd=ROOT,
                   timeout=60)
    # Keep the fixtures small (< 1 MB): only the TCP and core sysctls results use.
    path = dest / f"{host}.sysctl"
    keep = [ln for ln in path.read_text().splitlines(keepends=True)
            if ln.startswith(("net.ipv4.tcp_", "net.core."))]
    path.write_text("".join(keep))


def record(out: Path, exp: int, plan: str = "mixed", *, server_addr: str = "127.0.0.1",
           client_prefix: Sequence[str] = (), server_prefix: Sequence[str] = ()) -> Path:
    """Run the plan's flows from "h1" to "h2" and lay out ``<out>/<exp>/``."""
    expdir = out / str(exp)
    stage = out / f".stage-{exp}"
    shutil.rmtree(stage, ignore_errors=True)
    for host, prefix in (("h1", client_prefix), ("h2", server_prefix)):
        _snapshot(prefix, expdir / "0", host)
    server = subprocess.Popen(
        [*server_prefix, *ENGINE, "server", "--bind", server_addr, "--port", "0",
         "--datadir", str(stage / "srv")],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        first = json.loads(server.stdout.readline())  # type: ignore[union-attr]
        if first.get("event") != "listening":
            raise RuntimeError(f"engine server did not start: {first}")
        port = first["port"]
        flows = []
        for f in PLANS[plan]:
            n = sum(1 for g in PLANS[plan] if g["group"] == f["group"])
            flows.append(dict(f, flow_id=f"h1-h2-{f['group']}-{f['instance']}", instances=n))
        specs = [{"flow_id": f["flow_id"], "test": f["test"], "server": server_addr, "port": port,
                  "ca": f["ca"], "dur": f["dur"], "req": f.get("req", 1), "reply": f.get("reply", 1),
                  "interval": 0.01, "exp": exp} for f in flows]
        spec_file = stage / "specs.json"
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        spec_file.write_text(json.dumps(specs))
        ping = PingCollector(server_addr, expdir / "ping" / "h1-h2.nflow", interval=0.2,
                             duration=2, meta={"client": "h1", "server": "h2"},
                             argv_prefix=client_prefix).start()
        t0 = time.time()
        client = subprocess.run(
            [*client_prefix, *ENGINE, "client", "--specs", str(spec_file), "--datadir",
             str(stage / "cli")], capture_output=True, text=True, timeout=60, cwd=ROOT)
        ping.wait() if hasattr(ping, "wait") else ping.stop()
        if client.returncode != 0:
            raise RuntimeError(f"engine client failed: {client.stdout[-2000:]} {client.stderr[-2000:]}")
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.communicate(timeout=10)
    for host, prefix in (("h1", client_prefix), ("h2", server_prefix)):
        _snapshot(prefix, expdir / "1", host)
    (expdir / "flows").mkdir(parents=True, exist_ok=True)
    for side in ("cli", "srv"):
        for p in (stage / side / str(exp) / "flows").glob("*.nflow"):
            shutil.move(str(p), expdir / "flows" / p.name)
    shutil.rmtree(stage, ignore_errors=True)
    meta_flows = []
    for f, s in zip(flows, specs):
        meta_flows.append(dict(
            flow_id=f["flow_id"], host="h1", server="h2", group=f["group"], instance=f["instance"],
            instances=f["instances"], test=f["test"], ca=f["ca"], dur=f["dur"], delay=0.0,
            req=s["req"], reply=s["reply"], driver="builtin", local_buffer=0, remote_buffer=0,
            pacing=0, rate=0, interval=0.01, exp_name=f"{plan}{len(flows)}", start_at=t0,
            start_skew=0.0, port=port))
    doc = {
        "schema": 1, "exp": exp, "exp_name": f"{plan}{len(flows)}",
        "script": f"# recorded by tests/results/record_fixtures.py --plan {plan}\n",
        "desc": "", "other": [["testNote", "recorded"]], "netesto_version": "0.1.0",
        "flows": meta_flows,
        "hosts": {h: {"kernel": platform.release(), "hostname": socket.gethostname(),
                      "agent_version": "none (record_fixtures)", "clock_offset": 0.0,
                      "clock_rtt": 0.0, "address": server_addr if h == "h2" else ""}
                  for h in ("h1", "h2")},
        "actions": [],
    }
    (expdir / "experiment.json").write_text(json.dumps(doc, indent=1))
    return expdir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--exp", type=int, default=1)
    p.add_argument("--plan", choices=sorted(PLANS), default="mixed")
    a = p.parse_args(argv)
    print(record(a.out, a.exp, a.plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
