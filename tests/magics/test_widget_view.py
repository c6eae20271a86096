"""A run's widget view: a Stop button that ends saying how the run ended, a status that never lies about time."""

from __future__ import annotations

import pytest

from netesto.controller.progress import RunFinished
from netesto.magics.widgets import WidgetProgress


@pytest.mark.parametrize("interrupted,state", [(True, "stopped"), (False, "finished")])
def test_the_stop_button_ends_as_the_run_did(interrupted: bool, state: str) -> None:
    stops: list[int] = []
    view = WidgetProgress(5.0)
    view.add_stop(lambda: stops.append(1))
    view.stop_button.click()
    assert stops == [1] and view.stop_button.description == "stopping" and view.stop_button.disabled
    view.handle(RunFinished(experiments=(1,), elapsed=2.0, interrupted=interrupted))
    assert view.stop_button.description == state and view.stop_button.disabled


def test_a_run_that_ended_without_finishing_leaves_its_button_stopped() -> None:
    view = WidgetProgress(5.0)
    view.add_stop(lambda: None)
    view.stop_button.click()
    view.close_run()  # an error before RunFinished
    assert view.stop_button.description == "stopped" and view.stop_button.disabled


def test_past_its_estimate_the_status_says_so_and_never_zero_left() -> None:
    from netesto.controller.live import LiveState

    view = WidgetProgress(5.0)
    view._t0 -= 7.5  # 7.5 s into a run estimated at 5 s
    view._tick("running")
    assert "of an estimated 5" in view.status.value and "/5 s" not in view.status.value, view.status.value
    state = LiveState(estimate=5.0)
    state.t0 -= 7.5
    assert state.left_text() == "finishing (past the 5 s estimate)"
