"""A collector process (netesto.collectors.procmain) ends with the agent that started it."""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

from tests.leftovers import alive, tied_to_a_parent


def test_a_collector_whose_agent_is_gone_stops_and_reports_though_its_death_signal_never_came(tmp_path):
    # A socket watch (or a tcp_probe trace) whose agent died would sample on, and write, for good.
    spec = dict(exp="1", datadir=str(tmp_path), host="h1", name="w", interval=0.01, ports=[5999])
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    starter, pid = tied_to_a_parent([sys.executable, "-m", "netesto.collectors.sockwatch", "--spec",
                                     str(tmp_path / "spec.json")])
    try:
        assert json.loads(starter.stdout.readline())["event"] == "ready"
        starter.kill()
        starter.wait()
        # its last line, on the pipe the dead parent shared (the collector checks its parent each tick)
        assert select.select([starter.stdout], [], [], 5)[0], "the collector runs on without its agent"
        done = json.loads(starter.stdout.readline())
        assert done["event"] == "done", done
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(pid)  # ended (its reaping is PID 1's, which a loaded runner can delay)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
