"""Plan every library test from an empty directory, so no stray ``inlib`` file interferes."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
