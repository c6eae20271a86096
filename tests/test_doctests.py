"""Every example in a docstring runs and holds: each module with ``>>>`` lines is doctested, all of them."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _modules_with_examples() -> list[str]:
    found = []
    for path in sorted((ROOT / "netesto").rglob("*.py")):
        if any(line.lstrip().startswith(">>> ") for line in path.read_text().splitlines()):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append(".".join(parts))
    return found


MODULES = _modules_with_examples()


def test_the_package_has_examples_to_run():
    assert len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    source = Path(module.__file__ or "").read_text()
    written = sum(1 for line in source.splitlines() if line.lstrip().startswith(">>> "))
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted == written, f"{name}: {written} examples written, {result.attempted} run"
