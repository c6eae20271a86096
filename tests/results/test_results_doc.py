"""docs/results.md: its ``>>>`` examples run (from the repository root, on the recorded experiments)."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_examples_of_results_md_run() -> None:
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        result = doctest.testfile(str(ROOT / "docs" / "results.md"), module_relative=False,
                                  optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    finally:
        os.chdir(here)
    assert result.attempted >= 8 and result.failed == 0
