"""The one plan path: a script resolved once, the counter as the run moves it, the controller's imports."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import netesto.controller.plan as plan_module
from netesto.controller import Lab, make_plan, run
from netesto.controller.plan import Plan, check_actions, planned_flows
from netesto.errors import LabError, ScriptError
from netesto.script import FileCounter, Interpreter

CONTROLLER = Path(plan_module.__file__).parent


def test_a_plan_reads_the_workdirs_counter_and_never_writes_it(tmp_path: Path) -> None:
    (tmp_path / "counter").write_text("41\n")
    p = make_plan("DO_SERVER host=h1 exp=COUNTER\nDO_SERVER host=h1 exp=COUNTER\n", workdir=tmp_path)
    assert [a.exp for a in p.actions] == [42, 43] and p.counts == (42, 43) and p.counter_end == 43
    assert (tmp_path / "counter").read_text() == "41\n"
    assert [a.exp for a in make_plan("DO_SERVER host=h1 exp=COUNTER\n", counter=7).actions] == [8]


@pytest.mark.parametrize("script", [
    "NEXT_COUNTER\nDO_SERVER host=h1 exp=COUNTER\n",  # no counter file yet: nothing to round up
    "DO_SERVER host=h1 exp=COUNTER\nNEXT_COUNTER\nDO_SERVER host=h1 exp=COUNTER\nEND\n",
])
@pytest.mark.parametrize("start", [None, "23\n"])
def test_the_plan_counts_as_the_counter_file_does(tmp_path: Path, script: str, start: str | None) -> None:
    planned, real = tmp_path / "planned", tmp_path / "real"
    for d in (planned, real):
        d.mkdir()
        if start is not None:
            (d / "counter").write_text(start)
    p = make_plan(script, workdir=planned)
    actions = list(Interpreter(counter=FileCounter(real / "counter")).run_text(script))
    assert [a.exp for a in p.actions] == [a.exp for a in actions]
    list(p.counted(planned / "counter"))  # the run writes the file as it reaches the actions
    assert (planned / "counter").exists() == (real / "counter").exists()
    if (real / "counter").exists():
        assert (planned / "counter").read_text() == (real / "counter").read_text()


def test_a_run_interprets_its_script_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Counting(Interpreter):
        def run_text(self, text: str, file: str = "<script>", base_dir: str | None = None):  # type: ignore[override]
            calls.append(file)
            return super().run_text(text, file=file, base_dir=base_dir)

    monkeypatch.setattr(plan_module, "Interpreter", Counting)
    result = run("SET x=1\nECHO $x\n", lab=Lab.loopback(1, base_port=1), workdir=tmp_path, name="<cell>")
    assert calls == ["<cell>"] and result.state is not None and result.state.variables["x"] == "1"


def test_a_plan_is_checked_against_the_lab() -> None:
    lab = Lab.of(h1="127.0.0.1", h2="127.0.0.2", insecure=True)
    p = make_plan("DO_CLIENT host=h1 server=h2 instances=2\n")
    assert isinstance(p, Plan) and planned_flows(p.actions, lab) == ["h1-h2-1-0", "h1-h2-1-1"]
    with pytest.raises(LabError, match="h3"):
        check_actions(make_plan("DO_CLIENT host=h1 server=h3\n").actions, lab)
    with pytest.raises(ScriptError, match="h1-h2-1"):
        check_actions(make_plan("DO_CLIENT host=h1 server=h2\nDO_CLIENT host=h1.x server=h2 group=1\n").actions, lab)


def test_the_testbed_shape_reaches_experiment_json_from_the_lab(tmp_path: Path) -> None:
    from dataclasses import replace

    from netesto.controller.runner import Runner

    lab = replace(Lab.loopback(1, base_port=1), testbed={"name": "tb", "bw": 20_000_000})
    runner = Runner(lab, tmp_path)
    e = runner.experiment(make_plan("DO_SERVER host=h1 exp=3\n").actions[0])  # type: ignore[arg-type]
    doc = json.loads(runner.write_json(e).read_text())
    assert doc["testbed"] == {"name": "tb", "bw": 20_000_000} and doc["exp"] == 3


def test_the_controller_imports_neither_agent_engine_nor_testbed() -> None:
    """Not at module level, not inside a function: the controller sits below them all."""
    banned = ("netesto.agent", "netesto.engine", "netesto.testbed", "netesto.traffic")
    for path in sorted(CONTROLLER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                assert not name.startswith(banned), f"{path.name}:{node.lineno} imports {name}"
