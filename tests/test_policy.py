"""A plan refuses exactly what an agent would refuse: the policy walked through both."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto import policy
from netesto.agent.control import HostControl
from netesto.errors import PolicyError, ScriptError
from netesto.script import plan


def plans(line: str) -> bool:
    try:
        plan(line + "\n")
    except ScriptError:
        return False
    return True


@pytest.fixture
def agent(tmp_path: Path) -> HostControl:
    return HostControl(tmp_path / "journal", "h1")  # checks only: nothing here touches the host


def agent_takes_sysctl(agent: HostControl, name: str, values: str) -> bool:
    try:
        agent.check_sysctls({name: values.replace(",", " ")})
    except PolicyError:
        return False
    return True


def sample_values(name: str) -> list[str]:
    """For each sysctl: values in range, at the edges, outside them, of the wrong count or kind."""
    rule = policy.SYSCTLS[name]
    if isinstance(rule, str):
        return ["cubic", "fq_codel", "Cubic", "c;rm", "cubic,bbr", "x" * 17]
    ok = [str(lo) for lo, _ in rule]
    out = [",".join(ok), ",".join(str(hi) for _, hi in rule), ",".join(str(hi + 1) for _, hi in rule),
           ",".join(str(lo - 1) for lo, _ in rule), ",".join(ok + ok), "x", "-1"]
    return out


@pytest.mark.parametrize("name", [*policy.SYSCTLS, "net.ipv4.tcp_cong_dscp_mask", "kernel.panic"])
def test_sysctls_plan_as_the_agent_takes_them(agent: HostControl, name: str) -> None:
    values = sample_values(name) if name in policy.SYSCTLS else ["1"]
    verdicts = [(v, plans(f"SET_SYSCTL host=h1 {name}={v}"), agent_takes_sysctl(agent, name, v)) for v in values]
    assert all(p == a for _, p, a in verdicts), verdicts
    if name in policy.SYSCTLS:
        assert any(p for _, p, _ in verdicts) and not all(p for _, p, _ in verdicts)  # the walk tells both kinds
    else:
        assert not any(p for _, p, _ in verdicts)


@pytest.mark.parametrize("qdisc", [*policy.QDISCS, "hfsc_typo", "ingress", "clsact"])
def test_qdiscs_plan_as_the_agent_takes_them(agent: HostControl, qdisc: str) -> None:
    try:
        agent.qdisc_argv("veth0", qdisc, "replace")
        taken = True
    except PolicyError:
        taken = False
    assert plans(f"SET_QDISC host=h1 qdisc={qdisc} action=replace") == taken == (qdisc in policy.QDISCS)


@pytest.mark.parametrize(("module", "param"), [(m, p) for m, ps in policy.MODULE_PARAMS.items() for p in ps]
                         + [("tcp_cubic", "beta"), ("tcp_bbr", "x")])
def test_module_params_plan_as_the_agent_takes_them(agent: HostControl, module: str, param: str) -> None:
    allowed = param in policy.MODULE_PARAMS.get(module, ())
    assert plans(f"SET_MODULE_PARAMS host=h1 module={module} {param}=1") == allowed
    if not allowed:
        with pytest.raises(PolicyError, match="not allowed"):
            agent.set_module_params(module, {param: "1"})
