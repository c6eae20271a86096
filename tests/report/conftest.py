"""Fixtures of the report tests: the results tests' copies of the recorded experiments."""

from __future__ import annotations

from tests.results.conftest import workdir

__all__ = ["workdir"]
