"""How an interrupted or failed cell ends: the held results warnings and the one line."""

from __future__ import annotations

import sys
from pathlib import Path

from netesto.controller.result import RunResult
from netesto.errors import RunInterrupted
from netesto.magics.outcome import CellInterrupted, held_warnings, interrupted_line


def test_results_warnings_are_held_and_everything_else_passes(capsys):
    with held_warnings() as held:
        print("netesto results: warning: f.nflow: ended in error: stopped by SIGTERM", file=sys.stderr)
        print("something else", file=sys.stderr)
        sys.stderr.write("netesto results: warning: second\n")
        print("on stdout")
    out = capsys.readouterr()
    assert out.err == "something else\n" and out.out == "on stdout\n"
    assert held.held == ["netesto results: warning: f.nflow: ended in error: stopped by SIGTERM\n",
                         "netesto results: warning: second\n"]
    assert sys.stderr is not held


def test_the_interrupted_line_names_the_data_and_the_variable():
    result = RunResult(workdir=Path("/tmp/w"), experiments=(), elapsed=3.25, interrupted=True)
    line = interrupted_line(RunInterrupted("x", result=result), "res")
    assert line == ("netesto: run interrupted after 3.2 s: flows stopped, hosts restored; "
                    "partial experiments none kept in /tmp/w; result in `res`")
    exc = CellInterrupted(line, result=result)
    assert exc._render_traceback_() == [line] and isinstance(exc, RunInterrupted)


def test_an_interrupt_before_the_run_says_nothing_ran():
    assert interrupted_line(RunInterrupted("x"), "res") == (
        "netesto: interrupted before the run started; nothing ran, nothing bound to `res`")
