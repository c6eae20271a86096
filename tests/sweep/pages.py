"""Checks of written pages: every relative link resolves to a file."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse


def links(page: Path) -> list[str]:
    """The ``<a href>`` targets of the page's markup (not of the code in its scripts)."""
    text = re.sub(r"<script\b.*?</script>", "", page.read_text(encoding="utf-8"), flags=re.S)
    return re.findall(r'<a [^>]*href="([^"#]+)"', text)


def broken_links(page: Path) -> list[str]:
    """The page's links that lead nowhere (absolute web links count as broken: pages open offline)."""
    bad = []
    for href in links(page):
        url = urlparse(href)
        if url.scheme in ("http", "https") or not (page.parent / unquote(url.path)).is_file():
            bad.append(href)
    return bad
