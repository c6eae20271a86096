"""Fixtures for agent tests: a session key directory, agents killed by PID after each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.agentproc import AgentProc, Keys, start_agent


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys.make(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def agents(tmp_path: Path):
    """``agents(**kw)`` starts an agent; every agent started is killed (by PID) at teardown."""
    started: list[AgentProc] = []

    def start(**kw) -> AgentProc:
        agent = start_agent(tmp_path, **kw)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.kill()
