"""Restore puts back the root qdisc a host had before (real agents, real tc, in namespaces)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.agent.agentproc import run_in_ns, wait_for
from tests.agent.test_agent_netns import prelude

pytestmark = pytest.mark.netns

# fq / fq_codel are not in this kernel (testbed-facts.md): bfifo and pfifo with non-default
# limits stand in for a hand-configured classless root; tbf's options come back rounded by tc.
ORIGINALS = {
    "bfifo": ["handle", "5:", "bfifo", "limit", "123456"],
    "pfifo": ["handle", "6:", "pfifo", "limit", "77"],
    "tbf": ["handle", "7:", "tbf", "rate", "50mbit", "burst", "20k", "latency", "30ms"],
    "tbf-high-rate": ["handle", "8:", "tbf", "rate", "1gbit", "burst", "100k", "latency", "5ms"],
    # Values whose burst and latency tc shows rounded so that giving them back misses by a step.
    "tbf-rounded": ["handle", "a:", "tbf", "rate", "5342968kbit", "burst", "1905289", "latency", "195ms"],
    "tbf-limit": ["handle", "b:", "tbf", "rate", "882122kbit", "burst", "1010430", "limit", "8252015"],
}


def tc(ns: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tc", "-n", ns, *argv], capture_output=True, text=True, check=True)


def qdiscs(ns: str) -> list[dict]:
    return json.loads(tc(ns, "-j", "qdisc", "show", "dev", "veth0").stdout)


def client_call(ns: str, keys, addr: str, port: int, body: str) -> dict:
    return run_in_ns(ns, prelude(keys) + f"""
        c = client("h1", {addr!r}, {port})
        r = {{}}
""" + body + """
        c.close()
        show(r)
    """)


@pytest.mark.parametrize("name", list(ORIGINALS))
def test_restore_rebuilds_the_original_classless_root(name, veth_pair, agents, keys):
    ns = veth_pair.a
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", *ORIGINALS[name])
    before = qdiscs(ns)
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    out = client_call(ns, keys, veth_pair.addr_a, agent.port, """
        r["htb"] = c.set_qdisc("veth0", "htb", rate="100mbit", burst="15k", limit="300000")
        r["tbf"] = c.set_qdisc("veth0", "tbf", rate="20mbit", burst="15k", limit="30000")
        r["del"] = c.set_qdisc("veth0", "", action="del")
        r["restore"] = c.restore()
    """)
    assert "warnings" not in out["htb"], out
    assert out["restore"]["errors"] == [], out
    assert any("veth0" in x for x in out["restore"]["restored"]), out
    assert qdiscs(ns) == before


def test_an_htb_tree_is_reported_not_rebuilt_and_the_default_comes_back(veth_pair, agents, keys):
    ns = veth_pair.a
    default = qdiscs(ns)
    # The shape of our own testbed router's bottleneck.
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", "handle", "1:", "htb", "default", "1", "r2q", "1000")
    tc(ns, "class", "replace", "dev", "veth0", "parent", "1:", "classid", "1:1", "htb", "rate", "100mbit",
       "burst", "15k", "cburst", "15k")
    tc(ns, "qdisc", "replace", "dev", "veth0", "parent", "1:1", "handle", "10:", "bfifo", "limit", "150000")
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    out = client_call(ns, keys, veth_pair.addr_a, agent.port, """
        r["tbf"] = c.set_qdisc("veth0", "tbf", rate="20mbit", burst="15k", limit="30000")
        r["restore"] = c.restore()
    """)
    warning = " ".join(out["tbf"].get("warnings", []))
    assert "veth0" in warning and "qdisc htb 1: root" in warning and "cannot be rebuilt" in warning, out
    errors = out["restore"]["errors"]
    assert len(errors) == 1, out
    assert "veth0" in errors[0] and "NOT restored exactly" in errors[0], errors
    assert "qdisc htb 1: root" in errors[0] and "bfifo 10: parent 1:1" in errors[0], errors
    assert "class htb 1:1" in errors[0], errors
    assert qdiscs(ns) == default  # the safe part: no experiment qdisc left behind
    journal = json.loads((agent.datadir / ".agent" / "journal.json").read_text())
    assert journal["qdisc"] == {}


def test_journal_replay_after_sigkill_rebuilds_the_original(veth_pair, agents, keys):
    ns = veth_pair.a
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", *ORIGINALS["tbf"])
    before = qdiscs(ns)
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="one")
    client_call(ns, keys, veth_pair.addr_a, agent.port, """
        c.set_qdisc("veth0", "htb", rate="100mbit", burst="15k", limit="300000")
    """)
    assert qdiscs(ns)[0]["kind"] == "htb"
    agent.kill()  # SIGKILL mid-experiment: only the journal knows what was there
    journal = json.loads((agent.datadir / ".agent" / "journal.json").read_text())
    assert journal["qdisc"]["veth0"]["kind"] == "tbf"
    again = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, tag="two", datadir=agent.datadir)
    assert wait_for(lambda: qdiscs(ns) == before, timeout=10), (qdiscs(ns), before, again.log_text())


def _with_journal(datadir, qdisc):
    """A data directory whose restore journal holds just these qdisc entries (as a previous agent left it)."""
    (datadir / ".agent").mkdir(parents=True)
    (datadir / ".agent" / "journal.json").write_text(json.dumps(
        {"sysctl": {}, "module": {}, "qdisc": qdisc, "netem_fallback": {}}))
    return datadir


def test_an_old_journal_entry_without_a_record_still_restores_the_default(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    default = qdiscs(ns)
    datadir = _with_journal(tmp_path / "old-data", {"veth0": "noqueue"})
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", "handle", "9:", "tbf", "rate", "20mbit", "burst", "15k",
       "limit", "30000")
    agents(keys=keys, netns=ns, bind=veth_pair.addr_a, datadir=datadir)
    assert wait_for(lambda: qdiscs(ns) == default, timeout=10), qdiscs(ns)


def test_a_refused_set_qdisc_leaves_the_original_tree_alone_on_restore(veth_pair, agents, keys):
    ns = veth_pair.a
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", "handle", "1:", "htb", "default", "1")
    tc(ns, "class", "replace", "dev", "veth0", "parent", "1:", "classid", "1:1", "htb", "rate", "100mbit")
    before = qdiscs(ns)
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a)
    out = client_call(ns, keys, veth_pair.addr_a, agent.port, """
        try:
            c.set_qdisc("veth0", "tbf", rate="20mbit", other="nosuchoption 1")
        except NetestoError as e:
            r["refused"] = str(e)
        r["restore"] = c.restore()
    """)
    assert "nosuchoption" in out["refused"], out
    # tc changed nothing, so there is nothing to undo: the hand-built tree stays.
    assert out["restore"]["errors"] == [], out
    assert qdiscs(ns) == before


def test_a_damaged_qdisc_record_is_reported_and_the_agent_still_starts(veth_pair, agents, keys, tmp_path):
    ns = veth_pair.a
    default = qdiscs(ns)
    datadir = _with_journal(tmp_path / "bad-data", {
        "veth0": {"default": False, "kind": "bfifo", "handle": "5:", "options": {"limit": "lots"},
                  "show": "qdisc bfifo 5: root limit lots"}})
    tc(ns, "qdisc", "replace", "dev", "veth0", "root", "handle", "9:", "pfifo", "limit", "10")
    agent = agents(keys=keys, netns=ns, bind=veth_pair.addr_a, datadir=datadir)
    assert wait_for(lambda: qdiscs(ns) == default, timeout=10), qdiscs(ns)
    # The agent logs what it could not rebuild just after it restored the default: wait for the line.
    assert agent.logged("NOT restored exactly", "qdisc bfifo 5: root limit lots"), agent.log_text()[-2000:]
