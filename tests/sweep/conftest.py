"""Fixtures of the sweep tests: the recorded experiments, processed once a session."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.report.experiment import process_experiment

from ..results.conftest import recorded


@pytest.fixture(scope="session")
def processed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of the recorded experiments 1-3, processed (exp.nc, exp.html) once a session: tests
    copy from it or only read it."""
    return recorded(tmp_path_factory.mktemp("processed"), process_experiment)
