"""Fixtures of the results tests: copies of the recorded real-flow experiments."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from netesto.report.experiment import process_experiment as process_with_page
from netesto.results import process_experiment

DATA = Path(__file__).parent / "data"


def recorded(root: Path, process: Callable[..., object] | None = None) -> Path:
    """Copies of the recorded experiments 1-3 in ``root``, each processed by ``process``
    (with OTHER testType=3Stream1) when given."""
    for d in DATA.iterdir():
        if d.is_dir() and d.name.isdigit():
            shutil.copytree(d, root / d.name)
    for exp in (1, 2, 3) if process else ():
        process(root, exp, other="testType=3Stream1")
    return root


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory holding copies of the recorded experiments 1-3."""
    return recorded(tmp_path)


@pytest.fixture(scope="session")
def processed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded experiments 1-3 processed once a session (~1.5 s an experiment): only copied from."""
    return recorded(tmp_path_factory.mktemp("processed-once"), process_experiment)


@pytest.fixture
def processed(workdir: Path, processed_once: Path) -> Path:
    """The recorded experiments processed (exp.csv, exp.nc, summaries), OTHER testType=3Stream1;
    no exp.html (its plots take ~2 s an experiment; test_exp_html and ``processed_pages`` test it).
    A test's own copy of what ``processed_once`` made: it may change or break its files."""
    shutil.copytree(processed_once, workdir, dirs_exist_ok=True)
    return workdir


@pytest.fixture
def processed_pages(workdir: Path) -> Path:
    """As ``processed``, with each experiment's exp.html."""
    for exp in (1, 2, 3):
        process_with_page(workdir, exp, other="testType=3Stream1")
    return workdir
