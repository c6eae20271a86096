"""DO_CLIENT trace=, DO_TRACE and DO_WATCH: what they resolve to, and what they refuse (file:line:column)."""

from __future__ import annotations

from typing import Any

import pytest

from netesto.errors import ScriptError
from netesto.script import actions as A
from netesto.script import plan


def only(text: str) -> Any:
    acts = plan(text)
    assert len(acts) == 1, acts
    return acts[0]


@pytest.mark.parametrize("text, expected", [
    ("DO_CLIENT host=c server=s trace=client", A.DoClient(host="c", exp=1, server="s", trace="client")),
    ("DO_CLIENT host=c server=s trace=both", A.DoClient(host="c", exp=1, server="s", trace="both")),
    ("DO_CLIENT host=c server=s", A.DoClient(host="c", exp=1, server="s", trace="")),
    ("DO_TRACE host=h1", A.DoTrace(host="h1", exp=1, buffer_kb=4096)),
    ("DO_TRACE host=h1 exp=4 buffer=64M", A.DoTrace(host="h1", exp=4, buffer_kb=65536)),
    ("DO_WATCH host=h1 port=5000", A.DoWatch(host="h1", exp=1, ports=(5000,))),
    ("DO_WATCH host=h1 name=app lport=80,443 rport=9 addr=10.0.0.2,fd00::/64 interval=0.05",
     A.DoWatch(host="h1", exp=1, name="app", lports=(80, 443), rports=(9,), addrs=("10.0.0.2", "fd00::/64"),
               interval=0.05)),
    ("DO_WATCH host=h1 cgroup=system.slice/nginx.service", A.DoWatch(host="h1", exp=1,
                                                                      cgroup="system.slice/nginx.service")),
    ("DO_WATCH host=h1 pid=4242", A.DoWatch(host="h1", exp=1, pid=4242)),
])
def test_resolves(text: str, expected: Any) -> None:
    assert only(text) == expected


@pytest.mark.parametrize("text, message, column", [
    ("DO_CLIENT host=c server=s trace=sender", "trace", 27),
    ("DO_TRACE host=h1 buffer=1K", "buffer=1K is outside 64K..1G", 18),
    ("DO_WATCH host=h1", "nothing to watch", 1),
    ("DO_WATCH host=h1 port=70000", "port", 18),
    ("DO_WATCH host=h1 addr=10.0.0.300", "bad address", 18),
    ("DO_WATCH host=h1 cgroup=../../etc", "bad cgroup", 18),
    ("DO_WATCH host=h1 port=1 name=-x", "watch name", 25),
    ("DO_WATCH host=h1 port=1 prot=2", "unknown argument 'prot'", 25),
])
def test_refuses_with_the_column(text: str, message: str, column: int) -> None:
    with pytest.raises(ScriptError) as info:
        plan(text)
    err = info.value
    assert message in err.message and err.column == column, (err.message, err.column)


def test_the_plan_line_says_what_a_watch_samples() -> None:
    act = only("DO_WATCH host=h1 port=5000 name=app")
    assert "name=app" in act.args_text() and "ports=5000" in act.args_text()
