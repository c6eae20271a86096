"""The exception tree renders itself and keeps its data."""

from __future__ import annotations

import pytest

import netesto
from netesto import errors
from netesto.errors import ScriptError


def test_every_error_derives_from_the_root():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.NetestoError)


def test_script_error_points_at_the_column():
    err = errors.ScriptError(
        "unknown command 'DO_CLIENTT'", file="a.nts", line=3, column=1,
        text="DO_CLIENTT host=h1", hint="did you mean DO_CLIENT?",
    )
    assert err.format_message().splitlines() == [
        "a.nts:3:1: error: unknown command 'DO_CLIENTT'",
        "    DO_CLIENTT host=h1",
        "    ^",
        "    did you mean DO_CLIENT?",
    ]
    assert err.exit_code == 2 and err.where == "a.nts:3:1"


def test_the_caret_stays_under_the_column_when_the_line_has_tabs(tmp_path):
    """The script's tabs are copied into the caret line, so both expand alike in a terminal."""
    import subprocess
    import sys

    script = tmp_path / "t.nts"
    script.write_text("DO_CLIENT\thost=h1\tserver=h2\tdurr=5\n")
    done = subprocess.run([sys.executable, "-m", "netesto", "plan", str(script)], capture_output=True, text=True)
    lines = done.stderr.splitlines()
    assert f"{script}:1:29: error: DO_CLIENT: unknown argument 'durr'" in lines[0], lines
    text, caret = lines[1].expandtabs(8), lines[2].expandtabs(8)
    assert text[caret.index("^"):].startswith("durr=5"), lines


def test_agent_errors_name_the_host_and_versions():
    assert str(errors.AgentUnreachable("no answer in 5 s", host="h1:12870")).startswith("h1:12870: ")
    mismatch = errors.VersionMismatch("1.0", "2.0", host="h3")
    assert "1.0" in str(mismatch) and "2.0" in str(mismatch) and "h3" in str(mismatch)
    cc = errors.CongestionControlError("vegas", ["reno", "cubic"])
    assert "vegas" in str(cc) and "reno, cubic" in str(cc)


def test_package_reexports_the_root():
    assert netesto.NetestoError is errors.NetestoError


def test_a_huge_script_line_is_shown_as_an_excerpt_around_the_column() -> None:
    # A 1,000,000-item FOR with an error printed all 6.9 MB of its line.
    from netesto.script import plan

    items = ",".join(str(i) for i in range(400_000))  # 2.7 MB, under the size limit
    with pytest.raises(ScriptError) as info:
        plan(f"FOR x IN {items} DOO\nDONE\n")
    text = info.value.format_message()
    assert len(text) < 1500, len(text)
    line, caret = text.splitlines()[1:3]
    assert len(line) < 200 and line.rstrip().endswith("...")  # the start of the line, where FOR is wrong


def test_the_excerpt_of_a_long_line_keeps_the_caret_under_the_column() -> None:
    text = "SET " + "a" * 5000 + " BAD " + "b" * 5000
    err = errors.ScriptError("bad", file="f", line=1, column=text.index("BAD") + 1, text=text)
    line, caret = err.format_message().splitlines()[1:3]
    assert len(line) < 200 and line.lstrip().startswith("...") and line.endswith("...")
    assert line[caret.index("^"):].startswith("BAD")


def test_long_messages_are_clipped_saying_how_much() -> None:
    from netesto.errors import MAX_MESSAGE, NetestoError

    text = NetestoError("x" * 10_000_000).format_message()
    assert len(text) < MAX_MESSAGE + 100 and text.endswith(f"({10_000_000 - MAX_MESSAGE} more characters)")
