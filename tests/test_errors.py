"""The exception tree renders itself and keeps its data."""

from __future__ import annotations

import netesto
from netesto import errors


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
