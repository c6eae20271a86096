"""Counters (the original's counter file) and SOURCE loaders."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.errors import ScriptError
from netesto.script import FileCounter, FileLoader, Interpreter, MemoryCounter, MemoryLoader, plan
from netesto.script.store import next_round, packaged_inlib_dirs


def test_file_counter_counter_and_prev(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    text = ("SET exp=COUNTER\nFOR s IN a,b DO\nDO_SERVER host=$s exp=$exp\nSET exp=PREV\nDONE\n"
            "DO_CLIENT host=c server=a\nPROCESS_EXP\nDO_SERVER host=a exp=COUNTER\n")
    acts = plan(text, counter=FileCounter(path))
    assert [a.exp for a in acts] == [1, 1, 1, 1, 2]
    assert path.read_text().strip() == "2"
    acts = plan(text, counter=FileCounter(path))  # a second run continues from the file
    assert [a.exp for a in acts] == [3, 3, 3, 3, 4]
    assert path.read_text().strip() == "4"


def test_file_counter_is_updated_as_actions_are_consumed(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    path.write_text("100\n")
    stream = Interpreter(counter=FileCounter(path)).run_text(
        "DO_SERVER host=a exp=COUNTER\nDO_SERVER host=a exp=COUNTER")
    assert path.read_text().strip() == "100"
    assert next(stream).exp == 101
    assert path.read_text().strip() == "101"


@pytest.mark.parametrize("start, after", [(0, 10), (23, 30), (19, 30), (20, 30), (29, 40), (31, 40)])
def test_next_counter(tmp_path: Path, start: int, after: int) -> None:
    path = tmp_path / "counter"
    path.write_text(f"{start}\n")
    plan("NEXT_COUNTER", counter=FileCounter(path))
    assert int(path.read_text()) == after
    assert next_round(start) == after
    mem = MemoryCounter(start)
    plan("ECHO x\nEND", counter=mem)
    assert mem.value == after


def test_next_counter_without_file_does_nothing(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    plan("NEXT_COUNTER", counter=FileCounter(path))
    assert not path.exists()


def test_file_loader_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    extra = tmp_path / "extra"
    extra.mkdir()
    (scripts / "a").write_text("ECHO next-to-script\n")
    (cwd / "a").write_text("ECHO cwd\n")
    (cwd / "b").write_text("ECHO cwd-b\n")
    (extra / "c").write_text("ECHO extra-c\n")
    (scripts / "main").write_text("SOURCE a\nSOURCE b\nSOURCE c\n")
    monkeypatch.chdir(cwd)
    acts = list(Interpreter(loader=FileLoader([extra])).run_file(scripts / "main"))
    assert [a.text for a in acts] == ["next-to-script", "cwd-b", "extra-c"]


def test_file_loader_finds_packaged_inlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = packaged_inlib_dirs()
    assert dirs and any((d / "__init__.py").exists() for d in dirs)
    monkeypatch.chdir(tmp_path)
    key, display, text = FileLoader().load("__init__.py", None)
    assert Path(display).parent in dirs


def test_users_own_file_wins_over_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "inlib").write_text("ECHO mine\n")
    monkeypatch.chdir(tmp_path)
    assert [a.text for a in plan("SOURCE inlib", loader=FileLoader())] == ["mine"]


def test_missing_source_lists_search_path() -> None:
    with pytest.raises(ScriptError) as exc:
        plan("SOURCE nope", loader=MemoryLoader({"lib": ""}))
    assert "not found" in exc.value.message and "lib" in exc.value.hint


def test_source_errors_point_into_the_sourced_file() -> None:
    with pytest.raises(ScriptError) as exc:
        plan("SOURCE lib", loader=MemoryLoader({"lib": "WAIT 1\n  WAT 2\n"}))
    err = exc.value
    assert (err.file, err.line, err.column) == ("lib", 2, 3)
    assert err.hint == "did you mean WAIT?"


def test_an_unusable_counter_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    # A counter that is a directory (or unwritable) ended `netesto plan` and
    # `netesto run` in an IsADirectoryError traceback.
    from netesto.errors import UsageError
    from netesto.script.store import read_counter_file

    (tmp_path / "counter").mkdir()
    with pytest.raises(UsageError, match=r"counter.*cannot read"):
        read_counter_file(tmp_path / "counter")
    with pytest.raises(UsageError, match=r"counter.*cannot read"):
        list(Interpreter(counter=FileCounter(tmp_path / "counter")).run_text("DO_SERVER host=a exp=COUNTER"))
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "counter.tmp").mkdir()  # the temporary file the counter is written through cannot be made
    with pytest.raises(UsageError, match=r"counter.*cannot write"):
        FileCounter(ro / "counter").take()
    with pytest.raises(UsageError, match=r"counter.*cannot write"):
        (ro / "counter").write_text("19\n")
        FileCounter(ro / "counter").round_up()


def test_source_of_a_directory_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "SOURCE libs" (a directory) used to say "file 'libs' not found" although it is right there.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libs").mkdir()
    with pytest.raises(ScriptError) as exc:
        plan("SOURCE libs", file=str(tmp_path / "m.nts"), loader=FileLoader(packaged=False))
    assert "is a directory" in exc.value.message and str(tmp_path / "libs") in exc.value.message
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "libs").write_text("ECHO found\n")  # a file further down the path still wins
    acts = plan("SOURCE libs", file=str(tmp_path / "m.nts"), loader=FileLoader([tmp_path / "sub"], packaged=False))
    assert [a.text for a in acts] == ["found"]


@pytest.mark.parametrize("name", ["../../../../../../etc/passwd", "/etc/passwd", "/proc/self/environ"])
def test_source_outside_the_allowed_directories_is_refused_without_leaking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # SOURCE ../../etc/passwd printed "unknown command 'root:x:0:0:...'": a way to read any file.
    (tmp_path / "s").mkdir()
    monkeypatch.chdir(tmp_path / "s")
    with pytest.raises(ScriptError) as exc:
        plan(f"SOURCE {name}", file=str(tmp_path / "s" / "m.nts"), loader=FileLoader())
    text = exc.value.format_message()
    assert "outside the directories SOURCE reads" in text
    assert "root:" not in text and "PATH=" not in text


def test_a_symlink_out_of_the_script_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "secret").write_text("ECHO not yours\n")
    (tmp_path / "s" / "lib").symlink_to(tmp_path / "secret")
    monkeypatch.chdir(tmp_path / "s")
    with pytest.raises(ScriptError, match="outside the directories SOURCE reads"):
        plan("SOURCE lib", file=str(tmp_path / "s" / "m.nts"), loader=FileLoader(packaged=False))


@pytest.mark.parametrize("content", [b"password=SECRET\nECHO x\n", b"\x00\x01SECRET", b"\xff\xfe SECRET"])
def test_a_file_that_is_not_a_script_is_refused_without_showing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").write_bytes(content)
    with pytest.raises(ScriptError) as exc:
        plan("SOURCE notes", file=str(tmp_path / "m.nts"), loader=FileLoader(packaged=False))
    text = exc.value.format_message()
    assert "not a netesto script" in text or "not a script file" in text
    assert "SECRET" not in text


def test_an_absolute_path_inside_a_search_dir_is_read(tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "mine").write_text("# my library\nECHO abs\n")
    acts = plan(f"SOURCE {tmp_path / 'libs' / 'mine'}", loader=FileLoader([tmp_path / "libs"], packaged=False))
    assert [a.text for a in acts] == ["abs"]


def test_python_m_netesto_from_the_folder_holding_the_clone(tmp_path: Path) -> None:
    # From the folder that contains the checkout, `netesto` resolves to a namespace package
    # (netesto.__file__ is None) and SOURCE inlib crashed with a TypeError.
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    script = tmp_path / "one.nts"
    script.write_text("SOURCE inlib\nECHO ok\n")
    out = subprocess.run([sys.executable, "-c", "import netesto.cli, sys; sys.exit(netesto.cli.main(sys.argv[1:]))",
                          "plan", str(script)], cwd=repo, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo.parent)})
    assert out.returncode == 0, out.stderr
    assert "TypeError" not in out.stderr
