"""docs/traces.md: its ``>>>`` examples run (from the repository root, on the recorded trace in tests/data/trace)."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_examples_of_traces_md_run() -> None:
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        result = doctest.testfile(str(ROOT / "docs" / "traces.md"), module_relative=False,
                                  optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    finally:
        os.chdir(here)
    assert result.attempted >= 6 and result.failed == 0
