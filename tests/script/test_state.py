"""Interpreter.state(): what one script defined, carried into the next (a notebook's cells)."""

from __future__ import annotations

import pytest

from netesto.errors import LabError, ScriptError
from netesto.script import Interpreter, MemoryCounter, State, plan

FIRST = """\
SOURCE inlib
RUN InlibShortWaits
SET dur=5
HOST_SUFFIX lab.example
DESC two cells
BEGIN mymacro
DO_SERVER host=h1 exp=COUNTER start=1
DO_CLIENT host=h2 server=h1 test=TCP_STREAM dur=$dur
END mymacro
"""


def _first() -> State:
    interp = Interpreter(counter=MemoryCounter())
    assert list(interp.run_text(FIRST)) == []  # only definitions: no action
    return interp.state()


def test_state_carries_variables_macros_sourced_files_and_suffix_into_the_next_script():
    st = _first()
    assert st.variables["dur"] == "5" and st.variables["settleWait"] == "1"
    assert {"mymacro", "MServerRR", "InlibShortWaits"} <= set(st.macros)
    assert any(key.endswith("inlib") for key in st.sourced)
    actions = plan("RUN mymacro\nRUN OneFlowStream server=h1 client=h2 ca=cubic dur=$dur\nPROCESS_EXP\n", state=st)
    kinds = [a.kind for a in actions]
    assert kinds[:2] == ["DO_SERVER", "DO_CLIENT"] and "MServerRR" in st.macros
    client = actions[1]
    assert client.dur == 5.0 and client.host == "h2.lab.example" and client.server == "h1.lab.example"
    assert actions[-1].desc == "two cells"


def test_without_the_state_the_next_script_fails_as_before():
    with pytest.raises(ScriptError, match="unknown macro 'mymacro'"):
        plan("RUN mymacro\n")
    with pytest.raises(ScriptError, match=r"undefined variable \$dur"):
        plan("ECHO $dur\n")


def test_a_second_source_of_the_same_library_does_not_undo_later_sets():
    # One script that SOURCEs inlib twice reads it once; so do two cells.
    st = _first()
    interp = Interpreter(state=st)
    list(interp.run_text("SET settleWait=7\nSOURCE inlib\n"))
    assert interp.state().variables["settleWait"] == "7"


def test_defines_apply_on_top_of_the_state_and_the_lab_suffix_yields_to_host_suffix():
    st = _first()
    interp = Interpreter(state=st, defines={"dur": "9"}, host_suffix="other.example")
    [client] = [a for a in interp.run_text("RUN mymacro\n") if a.kind == "DO_CLIENT"]
    assert client.dur == 9.0 and client.host == "h2.lab.example"
    # No HOST_SUFFIX in the state: the interpreter's own (the lab's) applies.
    [server] = plan("DO_SERVER host=h1\n", state=Interpreter().state(), host_suffix="lab2")
    assert server.host == "h1.lab2"


def test_a_state_is_independent_of_the_interpreters_that_made_and_use_it():
    interp = Interpreter(counter=MemoryCounter())
    list(interp.run_text(FIRST))
    st = interp.state()
    list(interp.run_text("SET dur=6\nBEGIN later\nWAIT 1\nEND later\n"))
    assert st.variables["dur"] == "5" and "later" not in st.macros  # a snapshot, not a view
    other = Interpreter(state=st)
    list(other.run_text("SET dur=7\nSET new=1\nHOST_SUFFIX NONE\nBEGIN mine\nWAIT 1\nEND mine\nSOURCE inlib.caTest\n"))
    plan("SET dur=8\nBEGIN planned\nWAIT 1\nEND planned\n", state=st)
    assert st.variables["dur"] == "5" and "new" not in st.variables
    assert "mine" not in st.macros and "planned" not in st.macros
    assert not any(key.endswith("caTest") for key in st.sourced) and st.host_suffix == "lab.example"
    assert interp.state().variables["dur"] == "6" and other.state().variables["dur"] == "7"
    with pytest.raises(TypeError):
        st.variables["dur"] = "1"  # type: ignore[index]
    assert repr(st).startswith("State(") and "variables" in repr(st)


def test_experiment_bookkeeping_starts_afresh_in_each_script():
    # The last exp/host are per run: a cell without exp= takes a new counter value
    # instead of writing into the previous cell's experiment directory.
    counter = MemoryCounter()
    first = Interpreter(counter=counter)
    list(first.run_text("DO_SERVER host=h1 exp=COUNTER\n"))
    second = Interpreter(counter=counter, state=first.state())
    [action] = list(second.run_text("DO_SERVER host=h1\n"))
    assert action.exp == 2
    with pytest.raises(ScriptError, match="host= is required"):
        list(Interpreter(state=first.state()).run_text("GET_DATA\n"))


def test_run_takes_the_state_forward_and_a_script_error_hands_none_back(tmp_path):
    # netesto.run() with a lab nobody serves: scripts without actions touch no agent.
    import netesto
    from netesto.controller import Lab

    lab = Lab.of(h1={"control": "127.0.0.1", "port": 1}, insecure=True)
    first = netesto.run(FIRST, lab=lab, workdir=tmp_path)
    assert first.exps == [] and first.state is not None and "mymacro" in first.state.macros
    second = netesto.run("SET dur=$dur$dur\n", lab=lab, workdir=tmp_path, state=first.state)
    assert second.state is not None and second.state.variables["dur"] == "55"
    assert first.state.variables["dur"] == "5"
    with pytest.raises(ScriptError, match="unknown macro 'mymacro'"):
        netesto.run("RUN mymacro\n", lab=lab, workdir=tmp_path)  # no state: as before
    with pytest.raises(ScriptError, match="unknown macro 'nosuch'") as err:
        netesto.run("SET x=1\nRUN nosuch\n", lab=lab, workdir=tmp_path, state=second.state)
    assert err.value.detail is None
    # The dry plan starts from the state too (the macro, HOST_SUFFIX): an unknown
    # host still fails before any agent is touched or a counter value is taken.
    with pytest.raises(LabError, match="host 'h2.lab.example' is not in lab"):
        netesto.run("RUN mymacro\n", lab=lab, workdir=tmp_path, state=second.state)
    assert not (tmp_path / "counter").exists()
