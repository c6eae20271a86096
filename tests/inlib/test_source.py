"""SOURCE finds the packaged libraries from any directory; a user's own file comes first."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.errors import ScriptError
from netesto.script import FileLoader, Interpreter, MemoryCounter, plan
from netesto.script.store import packaged_inlib_dirs

from .planning import REPO, experiments

LIBS = ("inlib", "inlib.rateTest", "inlib.vsTest", "inlib.caTest")
RUN_STREAM = "RUN MServerStream servers=s clients=c ca=reno dur=1\n"


def test_the_libraries_are_package_data():
    dirs = packaged_inlib_dirs()
    assert dirs
    for name in LIBS:
        assert any((Path(d) / name).is_file() for d in dirs), name


@pytest.mark.parametrize("lib", LIBS)
def test_source_from_an_unrelated_directory(tmp_path, monkeypatch, lib):
    work = tmp_path / "somewhere" / "else"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    interp = Interpreter(loader=FileLoader(), counter=MemoryCounter())
    assert list(interp.run_text(f"SOURCE {lib}\n", file=str(work / "script.nts"))) == []
    assert "MServerRR" in interp.macros  # every library brings inlib along


def test_a_users_inlib_in_the_cwd_takes_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inlib").write_text(
        "BEGIN MServerStream servers clients ca dur\nECHO my own $servers\nEND MServerStream\n",
        encoding="utf-8")
    actions = plan("SOURCE inlib\n" + RUN_STREAM, loader=FileLoader())
    assert [(a.kind, a.text) for a in actions] == [("ECHO", "my own s")]


def test_other_libraries_keep_a_users_inlib(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inlib").write_text(
        "BEGIN MServerRR servers clients expName ca dur instances reqs reply\n"
        "ECHO mine $expName\nEND MServerRR\n", encoding="utf-8")
    actions = plan("SOURCE inlib\nSOURCE inlib.rateTest\nSET servers1=s\nSET clients1=c\n"
                   "SET ca=reno\nSET dur=1\nSET rate1r=1\nRUN ExpRate\n", loader=FileLoader())
    assert [(a.kind, a.text) for a in actions] == [("ECHO", "mine 1s1c01.fr")]


def test_sourcing_twice_is_harmless(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "SOURCE inlib\nSOURCE inlib.rateTest\nSOURCE inlib\nSOURCE inlib.vsTest\n" + RUN_STREAM
    assert len(experiments(plan(text, loader=FileLoader()))) == 1


def test_unknown_macro_suggests_the_library_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScriptError) as info:
        plan("SOURCE inlib\nRUN MServerStrem servers=s clients=c ca=reno dur=1\n",
             loader=FileLoader())
    assert "MServerStream" in str(info.value)


def test_a_packaged_library_runs_with_the_checkout_path_in_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    actions = plan("SOURCE inlib\n" + RUN_STREAM, loader=FileLoader())
    client = next(a for a in actions if a.kind == "DO_CLIENT")
    assert Path(client.loc.file).name == "inlib"
    assert client.loc.stack and "RUN MServerStream" in client.loc.stack[0]
    assert (REPO / "inlib" / "inlib").is_file()
