"""The ``>>>`` examples of docs/results.md and docs/traces.md run, from the repository root
(on the recorded experiments, and the recorded trace in tests/data/trace)."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("doc", "at_least"), [("results.md", 8), ("traces.md", 6)])
def test_the_examples_of_the_doc_run(doc: str, at_least: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "docs" / doc), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= at_least and result.failed == 0
