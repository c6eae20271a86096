"""BackgroundRun: a run's thread, its stop, its result or error, its callbacks."""

from __future__ import annotations

import threading

import pytest

from netesto.controller.background import BackgroundRun
from netesto.errors import AgentError, RunInterrupted


def _until_cancelled(cancel: threading.Event) -> str:
    if cancel.wait(10):
        raise RunInterrupted("stopped", result="partial")
    return "full"


def test_stop_gives_the_partial_result_and_calls_back():
    seen = []
    handle = BackgroundRun(_until_cancelled)
    assert not handle.done and "running" in repr(handle)
    with pytest.raises(TimeoutError):
        handle.wait(0.05)
    handle.on_done(lambda h: seen.append(h.result))
    handle.stop()
    assert handle.wait(5) == "partial" and isinstance(handle.error, RunInterrupted)
    assert seen == ["partial"] and "stopped" in repr(handle)
    handle.on_done(lambda h: seen.append("late"))  # after the end: called at once
    assert seen == ["partial", "late"]


def test_an_error_is_raised_by_wait_with_what_the_run_kept():
    def fails(cancel: threading.Event) -> None:
        raise AgentError("flow failed", host="h2", detail="kept")

    handle = BackgroundRun(fails)
    with pytest.raises(AgentError, match="flow failed"):
        handle.wait(5)
    assert handle.result == "kept" and "failed" in repr(handle)
    assert BackgroundRun(lambda cancel: "full").wait(5) == "full"
