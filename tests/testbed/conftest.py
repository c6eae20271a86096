"""Testbed tests: whatever a failing test left up is taken down after it."""

from __future__ import annotations

import pytest

from . import tbutil


@pytest.fixture(autouse=True)
def _no_testbed_left_behind():
    # Module-scoped testbeds were named before this runs: they are left to their fixtures.
    since = len(tbutil.ISSUED)
    yield
    tbutil.take_down_leftovers(since)
