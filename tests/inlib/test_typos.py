"""The typos of netesto issue 30 against the real libraries: each is refused at the user's
line and column, naming what to fix; none becomes another experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.errors import ScriptError
from netesto.script import FileLoader, Interpreter, MemoryCounter

from .planning import experiments, plan

TWO = ("RUN TwoFlowBaseStream server=h1 client1=h2 client2=h3 ca1=cubic ca2=bbr "
       "dur1=10 dur2=5 delay2=2")


def error_of(text: str, file: str = "user.nts") -> ScriptError:
    with pytest.raises(ScriptError) as exc:
        plan(text, file=file)
    return exc.value


def where(err: ScriptError) -> tuple[str, int, int, str]:
    return err.file, err.line, err.column, err.message


@pytest.mark.parametrize("globals_", ["SET dur=20\n", ""])
def test_a_misspelt_variable_is_named_whatever_globals_exist(globals_: str) -> None:
    # SET dur=20 made dur1=$xyz plan as DO_CLIENT dur=20; without it the error named $dur.
    text = "SOURCE inlib\n" + globals_ + TWO.replace("dur1=10", "dur1=$xyz") + "\n"
    err = error_of(text)
    col = TWO.index("dur1=10") + len("dur1=") + 1
    assert where(err) == ("user.nts", 2 + bool(globals_), col, "undefined variable $xyz")


def test_a_misspelt_argument_is_refused_with_did_you_mean() -> None:
    err = error_of("SOURCE inlib\n" + TWO.replace("client1=", "clinet1=") + "\n")
    assert where(err) == ("user.nts", 2, TWO.index("client1=") + 1,
                          "RUN TwoFlowBaseStream: unknown argument 'clinet1'")
    assert err.hint == "did you mean client1?"


def test_a_left_out_argument_is_named_at_the_run() -> None:
    err = error_of("SOURCE inlib\n" + TWO.replace("ca1=cubic ", "") + "\n")
    assert where(err) == ("user.nts", 2, 5, "RUN TwoFlowBaseStream: missing argument ca1")
    assert err.hint.startswith("pass ca1=... (BEGIN TwoFlowBaseStream at ")
    # ca=cubic in its place: refused, pointing at ca1 (it used to say "undefined variable $ca")
    err = error_of("SOURCE inlib\n" + TWO.replace("ca1=cubic", "ca=cubic") + "\n")
    assert where(err) == ("user.nts", 2, TWO.index("ca1=") + 1,
                          "RUN TwoFlowBaseStream: unknown argument 'ca'")
    assert err.hint == "did you mean ca1?"


def test_a_misspelt_flag_of_a_library_is_refused() -> None:
    err = error_of("SOURCE inlib.rateTest\nSET ca=cubic\nSET dur=5\nRUN ExpRate rate3pp=1 servers1=s\n")
    assert where(err) == ("user.nts", 4, 13, "RUN ExpRate: unknown argument 'rate3pp'")
    assert "rate3p" in err.hint


def test_a_library_that_needs_a_global_names_it_at_the_run() -> None:
    err = error_of("SOURCE inlib.vsTest\nSET client1=a\nSET client2=b\nSET dur=5\nRUN ExpVs ca1=cubic\n")
    assert where(err) == ("user.nts", 5, 5, "RUN ExpVs: missing argument ca2 (its default, $ca2, is not set)")


def test_the_explicit_defaults_read_the_globals_they_name() -> None:
    run = "RUN MServerStream servers=s clients=c ca=reno dur=2"
    (exp,) = experiments(plan(f"SOURCE inlib\nSET instances=3\nSET settleWait=1\n{run}\n"))
    assert [c.instances for c in exp.clients] == [3] and exp.waits[:2] == [2.0, 1.0]
    (exp,) = experiments(plan(f"SOURCE inlib\nSET instances=3\n{run} instances=2 delay=4\n"))
    assert [(c.instances, c.delay) for c in exp.clients] == [(2, 4.0)]


def test_a_misspelt_source_file_gets_a_suggestion_and_each_directory_once(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user.nts").write_text("SOURCE inlb\n", encoding="utf-8")
    interp = Interpreter(loader=FileLoader(), counter=MemoryCounter())
    with pytest.raises(ScriptError) as exc:
        list(interp.run_file("user.nts"))  # its folder is the working directory
    err = exc.value
    assert where(err) == ("user.nts", 1, 8, "SOURCE: file 'inlb' not found")
    suggestion, searched = err.hint.split("\n")
    assert suggestion == "did you mean inlib?"
    dirs = searched.strip().removeprefix("searched: ").split(", ")
    resolved = [Path(d).resolve() for d in dirs]
    assert len(set(resolved)) == len(resolved) and tmp_path.resolve() in resolved
