"""The shipped delivery traces: reproducible from their generator, packaged, parsed strictly."""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath

import pytest

from netesto.linktrace import builtin_dir, builtin_names, bytes_between, find_trace, parse_trace, read_trace
from netesto.testbed import tracegen

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_traces_are_what_the_generator_makes(tmp_path) -> None:
    assert tracegen.stale(builtin_dir()) == []
    tracegen.write(tmp_path)
    assert tracegen.stale(tmp_path) == []
    (tmp_path / "onoff.trace").write_text("1\n")
    assert tracegen.stale(tmp_path) == ["onoff"]
    assert tracegen.main(["--check", "--out", str(tmp_path)]) == 1


def test_shipped_traces_are_package_data() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["netesto"]
    for path in builtin_dir().iterdir():
        rel = PurePosixPath(path.relative_to(ROOT / "netesto"))
        # as setuptools reads a package-data glob: '*' stops at a '/'
        assert any(len(rel.parts) == len(PurePosixPath(g).parts) and rel.match(g) for g in globs), rel


def test_shipped_traces_offer_what_their_generator_says() -> None:
    assert builtin_names() == ["cellular", "const12", "onoff"]
    const = read_trace(find_trace("const12", []))
    assert const.mean_bps == 12e6 and const.name == "const12"
    onoff = read_trace(find_trace("onoff", []))
    assert bytes_between(onoff, 800, 1200) == 0 and bytes_between(onoff, 0, 700) == 700 * 2 * 1500
    cell = read_trace(find_trace("cellular", []))
    assert 8e6 < cell.mean_bps < 14e6 and cell.peak_bps() <= 48.1e6
    assert min(bytes_between(cell, s, s + 100) for s in range(0, 9900, 10)) == 0  # its outages


@pytest.mark.parametrize("text, where", [
    ("", "no timestamps"),
    ("1\n\n2\n", ":2: an empty line"),
    ("1\n2\nx3\n", ":3: 'x3' is not a timestamp"),
    ("5\n4\n", ":2: 4 comes after 5"),
    ("0\n0\n", "the last timestamp is 0"),
    ("-1\n2\n", ":1: '-1' is not a timestamp"),
])
def test_a_bad_trace_is_refused_with_its_line(text: str, where: str) -> None:
    with pytest.raises(ValueError, match=where.replace("(", r"\(")):
        parse_trace(text, "t.trace")


def test_a_missing_trace_names_where_it_looked_and_the_near_names(tmp_path) -> None:
    (tmp_path / "mine.trace").write_text("1\n")
    assert find_trace("mine.trace", [tmp_path]) == (tmp_path / "mine.trace").resolve()
    with pytest.raises(LookupError, match=r"did you mean cellular\?.*shipped traces: cellular, const12, onoff"):
        find_trace("celular", [tmp_path])
    with pytest.raises(ValueError, match="not ASCII"):
        (tmp_path / "bin.trace").write_bytes(b"\xff\xfe")
        read_trace(tmp_path / "bin.trace")
