"""Headless Chromium for the results tests: render a page to PNG and to its DOM."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


@dataclass(frozen=True)
class Rendered:
    """What Chromium made of a page: the DOM after parsing and a screenshot."""

    dom: str
    png: Path


def chromium() -> str:
    """Path of the chromium binary, or skip the calling test saying why."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed: cannot check that the page renders")


def render(page: Path, png: Path, *, size: str = "1400,2000") -> Rendered:
    """Load ``page`` (a file) in headless Chromium: dump its DOM and screenshot it."""
    exe = chromium()
    with tempfile.TemporaryDirectory(prefix="netesto-chromium-") as profile:
        base = [exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size}"]
        url = page.resolve().as_uri()
        dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                             timeout=90, check=True).stdout
        subprocess.run([*base, f"--screenshot={png}", url], capture_output=True, timeout=90,
                       check=True)
    assert png.is_file() and png.stat().st_size > 0, f"no screenshot of {page}"
    return Rendered(dom, png)


_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})


class _Balance(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: object) -> None:
        pass  # <path .../> and friends close themselves

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> at {self.getpos()} but open: {self.stack[-3:]}")
        else:
            self.stack.pop()


def tag_problems(text: str) -> list[str]:
    """Mis-nested or unclosed tags of a page as written (before any browser repairs it)."""
    checker = _Balance()
    checker.feed(text)
    checker.close()
    return checker.problems + [f"<{t}> never closed" for t in checker.stack]
