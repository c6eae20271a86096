"""The agent's spare flow-engine client: started ahead, handed the next flows, replaced, ended with the agent."""

from __future__ import annotations

import os
import signal

from netesto.procs import SPARE_NAME
from netesto.proctable import alive, children, read
from tests.agent.agentproc import wait_for


def _spares(agent_pid: int) -> list[int]:
    """The agent's children waiting as spares."""
    return [pid for pid in children(agent_pid) if read(pid, "comm").strip() == SPARE_NAME.encode()]



def _spec(port: int, flow: str, dur: float = 0.3) -> dict:
    return dict(flow_id=flow, test="TCP_STREAM", server="127.0.0.1", port=port, dur=dur)


def test_the_spare_runs_the_next_flows_and_another_waits_once_they_end(agents, keys, tmp_path):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    assert wait_for(lambda: len(_spares(agent.proc.pid)) == 1, timeout=20), agent.log_text()[-2000:]
    (first,) = _spares(agent.proc.pid)
    with agent.client() as c:
        port = c.prepare_server(4, "").port
        started = c.start_flows(4, [_spec(port, "h1-h1-1-0")])
        assert started.pid == first  # handed to the spare: no process started for them
        st = c.wait_flows(4, timeout=20)
        assert st.complete and st.done == ["h1-h1-1-0"], st
        assert len(c.fetch(4, tmp_path / "got")) >= 1
        # once no flows run here, another waits
        assert wait_for(lambda: len(_spares(agent.proc.pid)) == 1 and _spares(agent.proc.pid) != [first], timeout=20)
        (second,) = _spares(agent.proc.pid)
        assert not alive(first)  # the first ended with its flows
    agent.kill(signal.SIGTERM)
    assert wait_for(lambda: not alive(second), timeout=10)  # and the spare ends with the agent
    assert not list((agent.datadir / ".agent").glob("*.stderr"))


def test_flows_start_when_the_spare_died(agents, keys):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    assert wait_for(lambda: len(_spares(agent.proc.pid)) == 1, timeout=20)
    (spare,) = _spares(agent.proc.pid)
    os.kill(spare, signal.SIGKILL)
    with agent.client() as c:
        port = c.prepare_server(5, "").port
        started = c.start_flows(5, [_spec(port, "h1-h1-1-0")])
        assert started.pid != spare
        st = c.wait_flows(5, timeout=20)
        assert st.complete and st.done == ["h1-h1-1-0"] and st.failed == [], st
    assert agent.logged("the spare flow engine client", f"(pid {spare}) had ended"), agent.log_text()[-2000:]


def test_a_second_batch_while_flows_run_starts_a_client_of_its_own(agents, keys):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    assert wait_for(lambda: len(_spares(agent.proc.pid)) == 1, timeout=20)
    with agent.client() as c:
        port = c.prepare_server(6, "").port
        one = c.start_flows(6, [_spec(port, "h1-h1-1-0", dur=1.5)])
        two = c.start_flows(6, [_spec(port, "h1-h1-2-0")])
        assert one.pid != two.pid
        assert _spares(agent.proc.pid) == []  # none is started while flows run
        st = c.wait_flows(6, timeout=20)
        assert st.complete and sorted(st.done) == ["h1-h1-1-0", "h1-h1-2-0"], st
