"""Fixtures of the results tests: copies of the recorded real-flow experiments."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory holding copies of the recorded experiments 1-3."""
    for d in DATA.iterdir():
        if d.is_dir() and d.name.isdigit():
            shutil.copytree(d, tmp_path / d.name)
    return tmp_path
