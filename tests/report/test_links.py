"""Every link a written page holds is a relative file (inside the sweep, for a sweep's report) or http(s).

A directory name is text like any other: one named ``javascript:alert(1)`` must not
become a link that runs script when clicked (netesto issue 32).
"""

from __future__ import annotations

import posixpath
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from netesto.report.compare import write_compare
from netesto.report.experiment import process_experiment
from netesto.report.index import write_index
from netesto.report.sweep import write_report

from tests.results.conftest import recorded
from tests.sweep.test_cube import make_sweep


@pytest.fixture(scope="module")
def pages_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded experiments processed with their pages (exp.html)."""
    return recorded(tmp_path_factory.mktemp("processed"), process_experiment)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("href", "src", "action", "formaction") and v is not None]


def urls(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.urls


def outside(url: str, page: Path, root: Path) -> str:
    """Why ``url`` (on ``page``) is not a relative file under ``root`` nor http(s); "" when it is."""
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        return ""
    if parsed.scheme or parsed.netloc or url.startswith("/"):
        return f"{url!r}: scheme {parsed.scheme!r} or an absolute path"
    target = posixpath.normpath(posixpath.join(page.parent.relative_to(root).as_posix(), unquote(parsed.path)))
    return f"{url!r}: leaves {root}" if target == ".." or target.startswith("../") else ""


def test_every_link_of_the_sweep_compare_and_index_pages_is_relative_or_http(pages_made: Path, tmp_path: Path) -> None:
    root = tmp_path / "pages"
    root.mkdir()
    a = make_sweep(pages_made, root / "javascript:alert(1)")  # a name that reads as a scheme
    b = make_sweep(pages_made, root / "b", fail=None, shift=1)
    pages = [write_report(a), write_report(b), write_compare(a, b, root / "compare.html"), write_compare(a, b)]
    pages.append(write_index(a / next(p for p in a.iterdir() if p.is_dir()) / "results"))
    for page in pages:
        found = urls(page)
        bad = [why for u in found if (why := outside(u, page, root))]
        assert bad == [], page
    # the sweep's report links the points' pages, each a file inside its sweep
    report = urls(pages[0])
    assert report and all(outside(u, pages[0], a) == "" and (a / unquote(u)).is_file() for u in report), report
    # the compare page links both reports, A's by a path that names the directory, not a scheme
    assert any(unquote(u) == "javascript:alert(1)/sweep.html" for u in urls(pages[2])), urls(pages[2])
