"""exp.html of real experiments: every number with a unit says it (RTTs in ms, as the terminal),
and every link opens a file that exists, in the working directory and in a copy of it."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from netesto.report.experiment import KEY_UNITS, NO_UNIT
from netesto.report.experiment import process_experiment as process_with_page
from tests.plots.browser import show
from tests.results.conftest import recorded
from tests.sweep.pages import broken_links, links


@pytest.fixture(scope="module")
def processed_pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded experiments 1-3 processed with their pages, once for this module (read only)."""
    return recorded(tmp_path_factory.mktemp("pages"), process_with_page)


class _Rows(HTMLParser):
    """The key-table rows (cells' text) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._table = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table += 1
        elif tag == "tr" and self._table:
            self.rows.append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(page: Path) -> list[list[str]]:
    parsed = _Rows()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed.rows


def exp_out(path: Path) -> list[dict[str, str]]:
    """The groups of an ``<hsn>.exp.out``-style file (a record per ``exp:`` line)."""
    records: list[dict[str, str]] = []
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "exp":
            records.append({})
        records[-1][key] = value
    return records


def test_every_link_of_every_page_resolves_in_the_workdir_and_in_a_copy(processed_pages: Path, tmp_path: Path) -> None:
    # exp.html's Up went to ../exp.csv; now to the workdir's index, written with each page
    copy = tmp_path / "copied"
    shutil.copytree(processed_pages, copy)
    for root in (processed_pages, copy):
        pages = sorted(root.glob("*/exp.html"))
        assert len(pages) == 3
        for page in [*pages, root / "index.html"]:
            assert broken_links(page) == [], page
        assert sorted(links(root / "2" / "exp.html")) == ["../1/exp.html", "../3/exp.html", "../index.html"]
        # the index links each experiment's page, and each page goes back up to it
        assert sorted(links(root / "index.html")) == ["1/exp.html", "2/exp.html", "3/exp.html"]


def test_every_number_on_the_page_states_its_unit(processed_pages: Path) -> None:
    page = processed_pages / "1" / "exp.html"
    rows = {r[0]: r[1:] for r in table_rows(page) if r}
    groups = exp_out(processed_pages / "1" / "all.exp.out")
    by_hsn = {f"{g['host']}-{g['server']}-{g['group']}": g for g in groups if g.get("group")}
    header = rows.pop("key")
    numeric = re.compile(r"^-?\d+(\.\d+)?$")
    for label, cells in rows.items():
        if not any(numeric.match(c.split(" ")[0].split("/")[0].strip()) for c in cells):
            continue  # names, on/off, blanks
        unit = re.search(r"\(([^)]+)\)$", label)
        key = label.split(" (")[0]
        assert unit or key in NO_UNIT or key.endswith("%"), f"{label}: {cells} has no unit"
        if unit and key in KEY_UNITS:
            assert unit.group(1) == KEY_UNITS[key][0], label
    # RTTs were us under no unit (rtt 32918.8, pingRtt 30802): now ms, the terminal's unit
    for hsn, cell in zip(header, rows["rtt (ms)"]):
        assert float(cell) == round(float(by_hsn[hsn]["rtt"]) / 1000, 3 if float(cell) < 1 else 2 if float(cell) < 10 else 1)
    assert rows["pingRtt (ms)"] and all(float(c) < 1 for c in rows["pingRtt (ms)"])  # 17 us on loopback
    assert "min/avg/max Rates (Mbit/s)" in rows and "p50/p90/p99 Latencies (us)" in rows


def test_chromium_shows_the_units_and_links_that_open(processed_pages: Path, tmp_path: Path) -> None:
    shown = show(processed_pages / "2" / "exp.html", tmp_path / "exp2.png")
    assert shown.errors == []
    for label in ("rtt (ms)", "pingRtt (ms)", "cwnd (packets)", "localCpu (% of a core)", "Rates (Mbit/s)"):
        assert label in shown.text, label
    assert "Up" in shown.text and "Prev" in shown.text and "Next" in shown.text
    for link in shown.links:
        url = urlparse(link)
        assert url.scheme == "file" and Path(unquote(url.path)).is_file(), link
