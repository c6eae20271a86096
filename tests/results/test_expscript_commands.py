"""exp.py script commands beyond the Figure 8 script: append, PercentTable, a rendered doPlot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from netesto.report.table import run_script
from netesto.results import Table
from tests.plots.browser import painted, show
from tests.results.browser import tag_problems


def _cells(table_html: str) -> list[list[str]]:
    """Text of each row's cells (link text for exp cells)."""
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table_html, re.S):
        rows.append([re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)])
    return rows


def test_append_renumbers_the_second_file(processed: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "exp.csv").write_text((processed / "exp.csv").read_text())
    s = tmp_path / "append.script"
    s.write_text(f"File={processed}/exp\nappend={other}/exp\nSelect=exp[has].0\nCols=exp,rate\ndoTable\n")
    rows = _cells(run_script(s))
    assert rows[0] == ["exp", "rate"]
    exps = [r[0] for r in rows[1:]]
    # The appended experiments come after the first file's, shifted past its hundred.
    assert exps == ["1.0", "2.0", "3.0", "101.0", "102.0", "103.0"]
    rate = {r[0]: r[1] for r in rows[1:]}
    for e in ("1.0", "2.0", "3.0"):
        assert rate[e] == rate[f"10{e}"]


def test_percent_table_is_relative_to_the_first_row(processed: Path, tmp_path: Path) -> None:
    s = tmp_path / "pct.script"
    s.write_text(f"File={processed}/exp\nSelect=exp==2.0;exp==3.0\nCols=exp,rate,cwnd\nPercentTable\n")
    rows = _cells(run_script(s))
    t = Table.read(processed).df.set_index("exp")
    # Cols keeps the table's own column order, as the original.
    assert rows[0] == ["exp", "cwnd", "rate"] and [r[0] for r in rows[1:]] == ["2.0", "3.0"]
    assert float(rows[1][1]) == 0.0 and float(rows[1][2]) == 0.0
    for col, cell in (("cwnd", rows[2][1]), ("rate", rows[2][2])):
        expected = 100 * (t.loc["3.0", col] - t.loc["2.0", col]) / t.loc["2.0", col]
        assert float(cell) == pytest.approx(expected, abs=0.06), col


def test_doplot_page_renders_in_chromium(processed: Path, tmp_path: Path) -> None:
    script = Path(__file__).parent / "data" / "figure8.script"
    page = tmp_path / "fig8.html"
    page.write_text(run_script(script, {"dir": str(processed)}))
    assert tag_problems(page.read_text()) == []
    shown = show(page, tmp_path / "fig8.png")
    assert shown.errors == []
    # Rows 2.0 and 3.0 (1.0 mixes tests): 2 bars, and 2 y2 diamonds on the right axis.
    (fig,) = shown.figures
    assert fig["title"] == "Retransmissions and Fairness" and fig["hover"]
    assert sorted((g["type"], g["n"]) for g in fig["glyphs"]) == [("Scatter", 2), ("VBar", 2)]
    assert painted(shown.png) > 0.02
    dom = page.read_text()
    assert '<div id="plotRate"><div id="' in dom and "Fairness = Fastest/Slowest BW" in dom
    assert "<table" in dom and ">fairness<" in dom
    rows = _cells(dom.split("<table", 1)[1].split("</table>", 1)[0])
    assert [r[0] for r in rows[1:]] == ["2.0", "3.0"]


@pytest.mark.parametrize("lines, what", [
    ("Select=rate<>abc:5", "Select"),
    ("format=x", "format"),
    ("plotX=rate\nplotY1=cwnd\nplotSize=big\ndoPlot", "doPlot"),
    ("plotX=rate\nplotY1=cwnd\nplotXSize=wide\ndoPlot", "doPlot"),
])
def test_a_bad_value_names_the_script_line(processed: Path, tmp_path: Path, lines: str, what: str) -> None:
    """A typo in a script value is a ResultsError at script:line, not a traceback."""
    from netesto.errors import ResultsError

    s = tmp_path / "bad.script"
    s.write_text(f"File={processed}/exp\n{lines}\n")
    line = 1 + len(lines.splitlines())
    with pytest.raises(ResultsError, match=rf"bad\.script:{line}: {what}: "):
        run_script(s)


@pytest.mark.parametrize("line, message", [
    ("doTabel", r"t.script:3: doTabel: unknown command or option 'doTabel'; did you mean 'doTable'\?"),
    ("Select=rtte>1", r"t.script:3: Select: Select: unknown column 'rtte'; did you mean 'rtt'\?"),
    ("Cols=exp,rat", r"t.script:3: Cols: unknown column 'rat'; did you mean 'rate'\?"),
])
def test_unknown_commands_and_columns_are_refused_where_they_are(processed: Path, tmp_path: Path, line: str,
                                                                 message: str) -> None:
    # A misspelled command (doTabel) or column was ignored with exit 0: an empty or unfiltered page.
    from netesto.errors import ResultsError

    s = tmp_path / "t.script"
    s.write_text(f"File={processed}/exp\n# a comment\n{line}\ndoTable\n")
    with pytest.raises(ResultsError, match=message):
        run_script(s)


def test_the_shipped_example_runs_and_its_links_open_the_experiments(processed_pages: Path, tmp_path: Path) -> None:
    # Without relPath the row links were broken; the example table script ships in examples/.
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[2] / "examples" / "rates.table"
    processed = processed_pages
    out = processed / "pages" / "rates.html"
    out.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "netesto", "table", str(example), "-C", str(processed),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    links = re.findall(r'href="([^"]+/exp\.html)"', page)
    assert links and all((out.parent / link).resolve().is_file() for link in links), links
    assert 'id="rates"' in page and tag_problems(page) == []
