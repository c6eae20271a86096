"""The libraries for real: ExpRate with short waits, run by ``netesto run`` against two agents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from netesto.controller import Lab

from ..controller.agentproc import make_keys, start_agent

SCRIPT = """
SOURCE inlib.rateTest
RUN InlibShortWaits
SET servers1=h2
SET clients1=h1
SET ca=cubic
SET dur=1
SET rate1=1
RUN ExpRate
"""


@pytest.mark.netns
def test_exp_rate_runs_on_real_agents(veth_pair, tmp_path: Path) -> None:
    pair = veth_pair
    keys = make_keys(tmp_path / "keys")
    where = {"h1": (pair.a, pair.addr_a), "h2": (pair.b, pair.addr_b)}
    agents = {}
    try:
        for name, (ns, addr) in where.items():
            agents[name] = start_agent(lambda argv, ns=ns: pair.popen(ns, argv), name, addr,
                                       tmp_path, keys=keys)
        hosts = {n: {"control": where[n][1], "port": a.port,
                     "public_key": str(keys.agent(n)[0]), "dev": "veth0"}
                 for n, a in agents.items()}
        lab = tmp_path / "lab.toml"
        lab.write_text(Lab.from_dict({"lab": {"name": "inlib",
                                              "controller_key": str(keys.controller_secret)},
                                      "hosts": hosts}).to_toml())
        script = tmp_path / "rate.nts"
        script.write_text(SCRIPT)
        work = tmp_path / "work"
        proc = pair.popen(pair.a, [sys.executable, "-m", "netesto", "run", str(script),
                                   "--lab", str(lab), "--workdir", str(work)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, out + err
        assert (work / "counter").read_text().strip() == "2"
        docs = [json.loads((work / str(n) / "experiment.json").read_text()) for n in (1, 2)]
        assert [d["exp_name"] for d in docs] == ["1s1c01.fr", "1s1c01.fs"]
        assert [[(f["flow_id"], f["test"], f["ca"]) for f in d["flows"]] for d in docs] == [
            [("h1-h2-1-0", "TCP_RR", "cubic")], [("h1-h2-1-0", "TCP_STREAM", "cubic")]]
        for n in (1, 2):
            flows = {p.name for p in (work / str(n) / "flows").iterdir()}
            assert {"h1-h2-1-0.client.nflow", "h1-h2-1-0.server.nflow"} <= flows
            assert any((work / str(n) / "1").glob("h2.*"))  # the closing snapshot
    finally:
        for agent in agents.values():
            agent.stop()
