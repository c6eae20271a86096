"""Interpreter behaviour the libraries rely on for good messages (script layer issues found here)."""

from __future__ import annotations

import pytest

from netesto.errors import ScriptError
from netesto.script import plan


def test_interpreter_undefined_variable_forwarded_through_run_is_reported_as_undefined():
    # inlib's macros forward their arguments to helper macros (servers=$servers).
    # When the user forgets one, the message should say the variable is
    # undefined, not that it "refers to itself".
    text = ("BEGIN Inner\nECHO $hosts\nEND Inner\n"
            "BEGIN Outer\nRUN Inner hosts=$hosts\nEND Outer\n"
            "RUN Outer\n")
    with pytest.raises(ScriptError) as info:
        plan(text)
    message = str(info.value)
    assert "undefined variable $hosts" in message
    assert "refers to itself" not in message


def test_a_real_self_reference_is_still_reported():
    with pytest.raises(ScriptError) as info:
        plan("SET a=x$a\nECHO $a\n")
    assert "refers to itself" in str(info.value)
