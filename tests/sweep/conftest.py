"""Fixtures of the sweep tests: the recorded experiments, processed once a session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from netesto.report.experiment import process_experiment

from ..results.conftest import DATA


@pytest.fixture(scope="session")
def processed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of the recorded experiments 1-3, processed (exp.nc, exp.html) once a session: tests
    copy from it or only read it."""
    root = tmp_path_factory.mktemp("processed")
    for d in DATA.iterdir():
        if d.is_dir() and d.name.isdigit():
            shutil.copytree(d, root / d.name)
    for exp in (1, 2, 3):
        process_experiment(root, exp, other="testType=3Stream1")
    return root
