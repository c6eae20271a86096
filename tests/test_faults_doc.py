"""docs/faults.md: every row names a test that exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_fault_row_names_a_test_that_exists() -> None:
    rows = [line for line in (ROOT / "docs" / "faults.md").read_text().splitlines()
            if line.startswith("| ") and "tests/" in line]
    assert len(rows) >= 10
    for row in rows:
        refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row)
        assert refs, row
        for path, name in refs:
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert name in names, f"{path}::{name} (named in docs/faults.md) does not exist"
