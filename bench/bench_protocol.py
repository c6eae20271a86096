"""Agent protocol cost: request round trip vs a bare pyzmq ROUTER/DEALER echo, and fetch throughput.

Run: ``python3 -m bench.bench_protocol [--n 2000] [--fetch-mib 256]``. Every
figure is measured in the same run against the same machine load: a bare
ROUTER echo process (msgpack in, msgpack out) vs a real netesto-agent
answering ``time`` requests through AgentClient, both without and with
CURVE. Targets: ratio <= 1.5; fetch with CURVE >= 100 MB/s on loopback.
The machine is shared and has 2 vCPUs: expect 10-30 % noise between runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import zmq
import zmq.auth

REPO = Path(__file__).resolve().parent.parent


def bare_server(port_file: str, keys: str | None) -> None:
    """A ROUTER that echoes each request as a msgpack reply (the floor we compare with)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.linger = 0
    if keys:
        # Authenticate clients the way the agent does (zmq.auth + a ZAP domain), so the
        # comparison is CURVE-with-authentication on both sides.
        from zmq.auth.thread import ThreadAuthenticator

        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_curve(domain="bench", location=os.path.join(keys, "authorized"))
        sock.zap_domain = b"bench"
        pub, sec = zmq.auth.load_certificate(os.path.join(keys, "agent.key_secret"))
        sock.curve_publickey, sock.curve_secretkey, sock.curve_server = pub, sec, True
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    Path(port_file).write_text(str(port))
    while True:
        ident, data = sock.recv_multipart()
        req = msgpack.unpackb(data)
        sock.send_multipart([ident, msgpack.packb({"v": "1.0", "k": "rep", "id": req["id"], "ok": True,
                                                   "a": {"time": time.time()}})])


def _wait_file(path: Path, proc: subprocess.Popen) -> int:
    deadline = time.monotonic() + 20
    while not path.exists() or not path.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("benchmark peer did not start")
        time.sleep(0.02)
    return int(path.read_text())


def start_bare(tmp: Path, keys: Path | None) -> tuple[subprocess.Popen, int]:
    port_file = tmp / f"bare-{bool(keys)}.port"
    port_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.bench_protocol", "--bare-server", str(port_file)]
    if keys:
        argv += ["--keys", str(keys)]
    proc = subprocess.Popen(argv, cwd=REPO)
    return proc, _wait_file(port_file, proc)


class BareClient:
    """The floor: a DEALER sending a msgpack map and reading the reply, nothing else."""

    def __init__(self, port: int, keys: Path | None) -> None:
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.linger = 0
        if keys:
            self.sock.curve_serverkey = zmq.auth.load_certificate(str(keys / "agent.key"))[0]
            self.sock.curve_publickey, self.sock.curve_secretkey = zmq.auth.load_certificate(
                str(keys / "controller.key_secret"))
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.n = 0

    def request(self, type: str) -> None:
        self.n += 1
        self.sock.send(msgpack.packb({"v": "1.0", "k": "req", "id": self.n, "t": type, "a": {}}))
        msgpack.unpackb(self.sock.recv())

    def close(self) -> None:
        self.sock.close()


def start_agent(tmp: Path, keys: Path | None, tag: str) -> tuple[subprocess.Popen, int, Path]:
    ready, datadir = tmp / f"{tag}.ready", tmp / f"{tag}-data"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "netesto.agent.cli", "--bind", "127.0.0.1", "--port", "0", "--datadir", str(datadir),
            "--ready-file", str(ready), "--log-file", str(tmp / f"{tag}.log"), "--lease", "0"]
    argv += ["--keys", str(keys / "agent.key_secret"), "--authorized", str(keys / "authorized")] if keys else ["--insecure"]
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, _wait_file(ready, proc), datadir


def client_for(port: int, keys: Path | None):
    from netesto.controller.client import AgentClient

    if keys:
        return AgentClient("bench", "127.0.0.1", port, server_key=keys / "agent.key",
                           client_keys=keys / "controller.key_secret", heartbeat=0, timeout=30)
    return AgentClient("bench", "127.0.0.1", port, insecure=True, heartbeat=0, timeout=30)


def round_trips(tmp: Path, n: int, keys: Path | None, rounds: int = 10) -> dict[str, list[float]]:
    """Round trips of four client/server pairs, measured in alternating blocks so load changes hit all alike.

    ``bare`` (bare client -> bare server) is the floor and ``agent`` (AgentClient ->
    netesto-agent) what users get; ``client`` (AgentClient -> bare server) and
    ``server`` (bare client -> agent) split the difference between the two ends.
    """
    bare_proc, bare_port = start_bare(tmp, keys)
    agent_proc, agent_port, _ = start_agent(tmp, keys, f"agent-{bool(keys)}")
    clients = {"bare": BareClient(bare_port, keys), "agent": client_for(agent_port, keys),
               "client": client_for(bare_port, keys), "server": BareClient(agent_port, keys)}
    out: dict[str, list[float]] = {label: [] for label in clients}
    try:
        for c in clients.values():
            for _ in range(100):  # warm-up: connection, CURVE handshake
                c.request("time")
        per = max(1, n // rounds)
        for _ in range(rounds):
            for label, c in clients.items():
                sink = out[label]
                for _ in range(per):
                    t0 = time.perf_counter()
                    c.request("time")
                    sink.append(time.perf_counter() - t0)
        return out
    finally:
        for c in clients.values():
            c.close()
        for proc in (bare_proc, agent_proc):
            proc.kill()
            proc.wait()


def fetch_rates(tmp: Path, mib: int, keys: Path) -> dict[str, float]:
    """MB/s of AgentClient.fetch with CURVE into a disk directory and into tmpfs (protocol only)."""
    proc, port, datadir = start_agent(tmp, keys, "fetch")
    out = {}
    try:
        exp = datadir / "1" / "flows"
        exp.mkdir(parents=True)
        block = os.urandom(1 << 20)
        with open(exp / "big.nflow", "wb") as f:
            for _ in range(mib):
                f.write(block)
        os.sync()
        c = client_for(port, keys)
        shm = Path("/dev/shm")
        targets = {"disk": tmp / "fetched"}
        if shm.is_dir():
            targets["tmpfs"] = Path(tempfile.mkdtemp(prefix="bench-fetch-", dir=shm))
        try:
            # First run: includes the agent hashing the file for fetch_list (what a GET_DATA costs).
            cold = tmp / "fetched-cold"
            t0 = time.perf_counter()
            c.fetch(1, cold, ack=False)
            out["disk, agent sha256 included"] = mib * (1 << 20) / (time.perf_counter() - t0) / 1e6
            shutil.rmtree(cold, ignore_errors=True)
            for label, dest in targets.items():
                c.request("fetch_list", {"exp": 1})  # digest cached by the agent now
                t0 = time.perf_counter()
                c.fetch(1, dest, ack=False)
                out[label] = mib * (1 << 20) / (time.perf_counter() - t0) / 1e6
        finally:
            for dest in targets.values():
                shutil.rmtree(dest, ignore_errors=True)
        c.close()
        return out
    finally:
        proc.kill()
        proc.wait()


def us(values: list[float], q: float = 0.5) -> float:
    if q == 0.5:
        return statistics.median(values) * 1e6
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="round trips per measurement")
    p.add_argument("--fetch-mib", type=int, default=256, help="size of the fetched file")
    p.add_argument("--pin", type=int, default=None, metavar="CPU",
                   help="pin every process of the benchmark to one CPU (see testbed-facts: CPU placement)")
    p.add_argument("--bare-server", help=argparse.SUPPRESS)
    p.add_argument("--keys", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.bare_server:
        bare_server(args.bare_server, args.keys)
        return 0
    from netesto.commands.keys import create_keys

    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})  # children inherit it

    with tempfile.TemporaryDirectory(prefix="bench-protocol-") as d:
        tmp = Path(d)
        keys = tmp / "keys"
        for name in ("agent", "controller"):
            create_keys(keys, name)
        (keys / "authorized").mkdir()
        (keys / "authorized" / "controller.key").write_bytes((keys / "controller.key").read_bytes())
        where = f"all pinned to CPU {args.pin}" if args.pin is not None else "unpinned"
        print(f"request round trip, {args.n} sequential requests each, loopback, separate processes, {where}, "
              "bare and agent alternating in blocks (median / p99, us)")
        for label, k in (("plain", None), ("CURVE", keys)):
            times = round_trips(tmp, args.n, k)
            bare, ours = times["bare"], times["agent"]
            ratio = statistics.median(ours) / statistics.median(bare)
            print(f"  {label:5}  bare pyzmq ROUTER/DEALER {us(bare):7.1f} / {us(bare, 0.99):7.1f}   "
                  f"netesto agent {us(ours):7.1f} / {us(ours, 0.99):7.1f}   ratio {ratio:.2f} (target <= 1.5)")
            print(f"         split: AgentClient -> bare server {us(times['client']):7.1f}, "
                  f"bare client -> agent {us(times['server']):7.1f} (median, us)")
        rates = fetch_rates(tmp, args.fetch_mib, keys)
        print(f"fetch with CURVE, {args.fetch_mib} MiB file, loopback (chunks, crc32 each, sha256 per file; "
              f"MB/s): " + ", ".join(f"into {k} {v:.0f}" for k, v in rates.items())
              + " (target >= 100)")
    print("(shared 2-vCPU machine: figures move 10-30 % between runs; compare the ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
