"""Runner orchestration through its client seam: batching, GET_DATA, shaping, faults.

The agents here are in-process stand-ins that record calls (the real agents
are exercised by test_integration.py); what is checked is the runner's own
logic: common start instants in each agent's clock, waiting before fetching,
skipping repeated GET_DATA, routing qdiscs to the shaping agent, dropping an
unreachable host while keeping the others' data, restoring at the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from netesto.controller.client import WaitResult
from netesto.controller.lab import Lab
from netesto.controller.progress import DataStored, HostError, RecordingProgress
from netesto.controller.runner import Runner
from netesto.errors import AgentUnreachable, LabError, PolicyError, VersionMismatch
from netesto.protocol.replies import (
    HelloReply,
    NetemReply,
    PingReply,
    QdiscReply,
    RestoreReply,
    ServerReply,
    SnapshotReply,
    StartFlowsReply,
    StopReply,
)
from netesto.script.actions import DoClient, DoServer, GetData, ProcessExp, RandWait, SetNetem, SetQdisc, Wait


class StandIn:
    """Records calls; offset = agent clock - controller clock."""

    def __init__(self, name: str, offset: float, dead: set[str]) -> None:
        self.name, self.offset, self.dead = name, offset, dead
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def _call(self, what: str, *args: Any) -> None:
        if self.name in self.dead:
            raise AgentUnreachable("no answer within 5 s", host=self.name)
        self.calls.append((what, args))

    protocol = "1.0"

    def hello(self) -> HelloReply:
        self._call("hello")
        return HelloReply(hostname=self.name, kernel="6.x", package="0.1.0", protocol=self.protocol)

    def clock_offset(self, samples: int = 8) -> tuple[float, float]:
        self._call("clock_offset", samples)
        return self.offset, 0.0001

    def snapshot(self, exp: int, order: int, host: str) -> SnapshotReply:
        self._call("snapshot", exp, order, host)
        return SnapshotReply([])

    def prepare_server(self, exp: int, token: str, *, driver: str = "builtin", ports=None) -> ServerReply:
        self._call("prepare_server", exp, token, *((driver, ports) if driver != "builtin" else ()))
        return ServerReply((ports or [5000])[0], driver=driver)

    def start_flows(self, exp: int, specs: list, at: float) -> StartFlowsReply:
        self._call("start_flows", exp, specs, at)
        return StartFlowsReply([s.flow_id for s in specs], 1, "specs.json")

    def ping_start(self, exp: int, target: str, name: str, *, duration: float = 10.0) -> PingReply:
        assert duration > 0.1
        self._call("ping_start", exp, target, name)
        return PingReply(f"ping/{self.name}-{name}.nflow")

    def wait_flows(self, exp: int, timeout: float, stop: Any = None) -> WaitResult:
        self._call("wait_flows", exp, timeout)
        return WaitResult(str(exp), [], [], [], {}, {}, True, [], complete=True)

    def fetch(self, exp: int, dest: Path) -> list[Path]:
        self._call("fetch", exp, dest)
        p = Path(dest) / "flows" / f"{self.name}.client.nflow"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * 10)
        return [p]

    def set_qdisc(self, *args: Any) -> QdiscReply:
        self._call("set_qdisc", *args)
        return QdiscReply(args[0], [], args[1])

    def set_netem(self, *args: Any) -> NetemReply:
        if args[1] > 1000:
            raise PolicyError("delay outside 0..1000 ms", host=self.name)
        self._call("set_netem", *args)
        return NetemReply(args[0], [])

    def restore(self) -> RestoreReply:
        self._call("restore")
        return RestoreReply([], [])

    def stop(self, exp: int | None = None) -> StopReply:
        self._call("stop", exp)
        return StopReply([], [])

    def close(self) -> None:
        pass


def make(tmp_path: Path, offsets: dict[str, float], lab: Lab | None = None):
    dead: set[str] = set()
    agents: dict[str, StandIn] = {}

    def factory(host, _lab):
        agents[host.name] = StandIn(host.name, offsets.get(host.name, 0.0), dead)
        return agents[host.name]

    rec = RecordingProgress()
    lab = lab or Lab.loopback(len(offsets), names=list(offsets))
    runner = Runner(lab, tmp_path, progress=rec, client_factory=factory, lead=0.2, lead_per_host=0.0, wait_margin=3.0)
    return runner, agents, dead, rec


def calls(agent: StandIn, what: str) -> list[tuple[Any, ...]]:
    return [args for name, args in agent.calls if name == what]


def exp_actions(*clients: DoClient, pause: float = 0.0):
    acts = [DoServer(host="s", exp=1, order=0, start=1)]
    for c in clients:
        acts.append(c)
        acts.append(RandWait(low=pause, high=pause))
    acts += [GetData(host="s", exp=1), GetData(host="c1", exp=1), GetData(host="c2", exp=1),
             GetData(host="c1", exp=1), ProcessExp(exp=1, desc="d")]
    return acts


def test_batched_do_clients_share_one_instant_in_each_agents_clock(tmp_path: Path) -> None:
    runner, agents, _, rec = make(tmp_path, {"s": 0.0, "c1": 100.0, "c2": -50.0})
    c1 = DoClient(host="c1", exp=1, server="s", dur=0.2, test="TCP_STREAM", req=0, group=1)
    c2 = DoClient(host="c2", exp=1, server="s", dur=0.2, delay=0.1, test="TCP_STREAM", req=0, group=2, instances=2)
    result = runner.run(exp_actions(c1, c2))
    (_, specs1, at1), = calls(agents["c1"], "start_flows")
    (_, specs2, at2), = calls(agents["c2"], "start_flows")
    # one controller instant: the agents' instants differ exactly by their offsets
    assert at1 - at2 == pytest.approx(150.0)
    assert specs1[0].start_at == pytest.approx(at1)
    assert [s.start_at for s in specs2] == pytest.approx([at2 + 0.1] * 2)
    assert [s.flow_id for s in specs2] == ["c2-s-2-0", "c2-s-2-1"]
    assert specs1[0].server == "127.0.0.1" and specs1[0].port == 5000
    assert specs1[0].token == calls(agents["s"], "prepare_server")[0][1]
    assert calls(agents["c1"], "ping_start") == [(1, "127.0.0.1", "s")]
    # GET_DATA waited for the flows before fetching; the repeated GET_DATA c1 was skipped
    names = [n for n, _ in agents["c1"].calls]
    assert names.index("wait_flows") < names.index("fetch")
    assert len(calls(agents["c1"], "fetch")) == 1
    assert [e.host for e in rec.of(DataStored)] == ["s", "c1", "c2"]
    doc = json.loads((tmp_path / "1" / "experiment.json").read_text())
    assert doc["schema"] == 1 and doc["desc"] == "d" and len(doc["flows"]) == 3
    assert doc["hosts"]["c1"]["clock_offset"] == 100.0
    assert {f["flow_id"] for f in doc["flows"]} == {"c1-s-1-0", "c2-s-2-0", "c2-s-2-1"}
    assert result.exps == [1] and result.ok
    # nothing changed on any host: nothing to restore
    assert not any(calls(a, "restore") for a in agents.values())


def test_a_real_pause_gives_each_do_client_its_own_instant(tmp_path: Path) -> None:
    runner, agents, _, _ = make(tmp_path, {"s": 0.0, "c1": 0.0, "c2": 0.0})
    c1 = DoClient(host="c1", exp=1, server="s", dur=0.2, group=1)
    c2 = DoClient(host="c2", exp=1, server="s", dur=0.2, group=2)
    runner.run(exp_actions(c1, c2, pause=0.3))
    at1 = calls(agents["c1"], "start_flows")[0][2]
    at2 = calls(agents["c2"], "start_flows")[0][2]
    assert at2 - at1 >= 0.29


def test_qdisc_goes_to_the_shaping_agent_and_is_restored(tmp_path: Path) -> None:
    lab = Lab.of(
        h1={"control": "127.0.0.1", "port": 20001, "shape": {"agent": "router", "dev": "r-h1"}},
        h2={"control": "127.0.0.1", "port": 20002, "dev": "eth9"},
        router={"control": "127.0.0.1", "port": 20003, "role": "router"},
        insecure=True,
    )
    runner, agents, _, _ = make(tmp_path, {"h1": 0, "h2": 0, "router": 0}, lab=lab)
    runner.run([SetQdisc(host="h1.mynetwork.com", exp=1, qdisc="tbf", rate="10mbit"),
                SetNetem(host="h2", exp=1, delay=20.0), Wait(seconds=0.01)])
    assert calls(agents["router"], "set_qdisc") == [("r-h1", "tbf", "", "10mbit", "", "", "")]
    assert calls(agents["h2"], "set_netem") == [("eth9", 20.0, 0.0, 0.0, 0, 1000)]
    assert "h1" not in agents
    assert calls(agents["router"], "restore") and calls(agents["h2"], "restore")


def test_refusal_aborts_restores_and_names_the_host(tmp_path: Path) -> None:
    runner, agents, _, _ = make(tmp_path, {"h1": 0, "h2": 0})
    with pytest.raises(PolicyError, match="h2.*delay outside"):
        runner.run([SetNetem(host="h1", exp=1, delay=5.0), SetNetem(host="h2", exp=1, delay=5000.0),
                    Wait(seconds=5.0)])
    assert calls(agents["h1"], "restore") and calls(agents["h2"], "restore")


def test_unreachable_host_is_dropped_others_kept(tmp_path: Path) -> None:
    runner, agents, dead, rec = make(tmp_path, {"s": 0.0, "c1": 0.0, "c2": 0.0})
    c1 = DoClient(host="c1", exp=1, server="s", dur=0.2, group=1)
    c2 = DoClient(host="c2", exp=1, server="s", dur=0.2, group=2)
    acts = exp_actions(c1, c2)
    acts.insert(3, SetQdisc(host="s", exp=1, qdisc="tbf"))

    def actions():
        for i, a in enumerate(acts):
            if i == 5:
                dead.add("c2")  # c2 dies while its flows run
            yield a

    with pytest.raises(AgentUnreachable) as info:
        runner.run(actions())
    assert info.value.host == "c2" and "c2" in str(info.value)
    result = info.value.detail
    assert result.exps == [1]
    stored = {e.host for e in rec.of(DataStored)}
    assert stored == {"s", "c1"}
    assert [e.host for e in rec.of(HostError) if e.fatal] == ["c2"]
    assert calls(agents["s"], "restore")  # changed settings restored on reachable hosts
    assert (tmp_path / "1" / "experiment.json").is_file()
    assert (tmp_path / "1" / "flows" / "c1.client.nflow").is_file()


def test_unknown_host_is_caught_before_anything_runs(tmp_path: Path) -> None:
    runner, agents, _, _ = make(tmp_path, {"h1": 0, "h2": 0})
    acts = [DoServer(host="h1", exp=1), DoClient(host="h2", exp=1, server="h3.mynetwork.com")]
    with pytest.raises(LabError, match="'h3.mynetwork.com'.*h1, h2"):
        runner.validate(acts)
    with pytest.raises(LabError, match="'h3.mynetwork.com'"):
        runner.run(acts)  # a list is validated before the first action
    assert agents == {}


def test_protocol_major_mismatch_is_reported_with_both_versions(tmp_path: Path) -> None:
    StandIn.protocol = "2.0"
    try:
        runner, agents, _, _ = make(tmp_path, {"h1": 0})
        with pytest.raises(VersionMismatch, match="h1.*1.0.*2.0"):
            runner.run([DoServer(host="h1", exp=1)])
    finally:
        StandIn.protocol = "1.0"


def test_iperf3_flows_get_one_server_port_each(tmp_path: Path) -> None:
    runner, agents, _, _ = make(tmp_path, {"s": 0.0, "c1": 0.0})
    a = DoClient(host="c1", exp=1, server="s", dur=0.2, test="TCP_STREAM", req=0, instances=2, driver="iperf3", group=1)
    b = DoClient(host="c1", exp=1, server="s", dur=0.2, test="TCP_STREAM", req=0, instances=1, driver="iperf3", group=2)
    runner.run([a, b, GetData(host="c1", exp=1)])
    (_, specs, _), = calls(agents["c1"], "start_flows")
    assert [(s.flow_id, s.port, s.driver) for s in specs] == [
        ("c1-s-1-0", 5201, "iperf3"), ("c1-s-1-1", 5202, "iperf3"), ("c1-s-2-0", 5203, "iperf3")]
    assert [c[2:] for c in calls(agents["s"], "prepare_server")] == [("iperf3", [5201, 5202]), ("iperf3", [5203])]


def test_waits_last_as_written(tmp_path: Path) -> None:
    """WAIT 0.6 and RAND_WAIT 0.3 0.3 sleep that long (not skipped, not stretched by polling)."""
    import time

    from netesto.controller.progress import ActionFinished

    runner, _, _, rec = make(tmp_path, {"h1": 0.0})
    t0 = time.monotonic()
    runner.run([Wait(seconds=0.6), RandWait(low=0.3, high=0.3)])
    elapsed = time.monotonic() - t0
    took = [ev.elapsed for ev in rec.events if isinstance(ev, ActionFinished) and ev.kind in ("WAIT", "RAND_WAIT")]
    assert len(took) == 2 and took[0] >= 0.6 and took[1] >= 0.3, took
    # A loaded machine can only add; 0.5 s of slack still tells 0.9 s from a doubled 1.8 s.
    assert 0.9 <= elapsed < 1.4, elapsed


def test_flow_ids_that_collide_on_the_lab_are_refused_before_anything_runs(tmp_path: Path) -> None:
    # h2 and h2.lab are one lab host: both DO_CLIENTs would make flow h2-h1-1-0.
    from netesto.errors import ScriptError
    from netesto.script import plan

    lab = Lab.of(h1="127.0.0.1", h2="127.0.0.2", insecure=True)
    actions = plan("DO_CLIENT host=h2 server=h1\nDO_CLIENT host=h2.lab server=h1 group=1\n", file="m.nts")
    with pytest.raises(ScriptError) as err:
        Runner(lab, tmp_path).validate(actions)
    assert (err.value.file, err.value.line) == ("m.nts", 2) and "h2-h1-1" in err.value.message


def test_an_unknown_host_in_a_lazy_script_is_reported_at_its_line(tmp_path: Path) -> None:
    from netesto.script import Interpreter

    runner, agents, _, _ = make(tmp_path, {"h1": 0, "h2": 0})
    acts = Interpreter().run_text("DO_SERVER host=h1 start=1\nDO_CLIENT host=h2 server=h9 dur=1\n", file="m.nts")
    with pytest.raises(LabError, match="^m.nts:2: host 'h9' is not in lab"):
        runner.run(acts)  # an iterator: checked as it is consumed


def test_a_failed_run_that_fetched_nothing_says_so_rather_than_data_kept_from_no_host(tmp_path: Path) -> None:
    # "Data kept for experiment(s): 1 (from no host)" said data was kept that was not.
    runner, agents, dead, _ = make(tmp_path, {"s": 0.0, "c1": 0.0})
    c1 = DoClient(host="c1", exp=1, server="s", dur=0.2, group=1)

    def actions():
        yield DoServer(host="s", exp=1, order=0, start=1)
        yield c1
        dead.update({"s", "c1"})  # both die while the flow runs
        yield GetData(host="s", exp=1)

    with pytest.raises(AgentUnreachable) as info:
        runner.run(actions())
    text = str(info.value)
    assert "no host" not in text, text
    assert "Data kept for experiment(s): none" in text and "nothing fetched of experiment(s) 1" in text, text
    assert "'netesto run --collect' fetches it" in text
