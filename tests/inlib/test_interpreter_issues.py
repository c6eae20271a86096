"""Interpreter behaviour the libraries rely on for good messages (script layer issues found here)."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import plan


def test_interpreter_undefined_variable_forwarded_through_run_is_reported_as_missing():
    # Macros forward their arguments to helper macros (servers=$servers). When the
    # user forgets one, the message names the argument at the user's RUN, not an
    # inner variable (and not that it "refers to itself").
    text = ("BEGIN Inner\nECHO $hosts\nEND Inner\n"
            "BEGIN Outer\nRUN Inner hosts=$hosts\nEND Outer\n"
            "RUN Outer\n")
    with pytest.raises(ScriptError) as info:
        plan(text, file="u.nts")
    err = info.value
    assert (err.file, err.line, err.column, err.message) == ("u.nts", 7, 5, "RUN Outer: missing argument hosts")
    assert "Outer reads $hosts at u.nts:5:17" in err.hint
    assert "refers to itself" not in err.format_message()


def test_a_real_self_reference_is_still_reported():
    with pytest.raises(ScriptError) as info:
        plan("ECHO $a\n", defines={"a": "x$a"})  # only -D values keep a $name unexpanded
    assert "refers to itself" in str(info.value)
