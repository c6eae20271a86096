"""`netesto flow client`'s CPU line: a flow that ran shows its share of a core, a failed one none.

A refused connect lived ~1 ms, nearly all of it on the CPU: "cpu 0.00 s (99 % of a
core)" read as a busy flow.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

NETESTO = [sys.executable, "-m", "netesto"]


def test_a_flow_that_ran_shows_its_cpu_share_and_a_refused_one_none(tmp_path: Path) -> None:
    server = subprocess.Popen([*NETESTO, "flow", "server", "--bind", "127.0.0.1", "--port", "0",
                               "--datadir", str(tmp_path / "srv")], stdout=subprocess.PIPE, text=True)
    try:
        port = re.match(r"listening on 127\.0\.0\.1:(\d+)", server.stdout.readline()).group(1)  # type: ignore[union-attr]
        ran = subprocess.run([*NETESTO, "flow", "client", "--datadir", str(tmp_path / "c"), "-H", "127.0.0.1",
                              "-p", port, "-l", "1"], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert re.search(r"^    cpu \d+\.\d\d s \(\d+ % of a core, worker process\), \d+ samples$", ran.stdout, re.M), \
            ran.stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: a connect to it is refused
    try:
        refused = subprocess.run([*NETESTO, "flow", "client", "--datadir", str(tmp_path / "c"), "-H", "127.0.0.1",
                                  "-p", str(closed.getsockname()[1]), "-l", "1"], capture_output=True, text=True,
                                 timeout=60)
    finally:
        closed.close()
    assert refused.returncode == 1 and "ERROR cannot connect" in refused.stdout, refused.stdout + refused.stderr
    assert re.search(r"^    cpu \d+\.\d\d s \(worker process\), \d+ samples$", refused.stdout, re.M), refused.stdout
    assert "% of a core" not in refused.stdout
