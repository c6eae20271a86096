"""The grid of a sweep, its points, and the notebook's parameters cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from netesto.errors import SweepError
from netesto.sweep.grid import parse_grid, points
from netesto.sweep.notebook import check_names, parameters_of
from netesto.sweep.values import checked

from .nbfiles import write


def test_the_grid_is_the_product_in_the_order_given() -> None:
    g = parse_grid(["ca=cubic,bbr", "bw=10mbit,100mbit,1gbit"])
    pts = points(g, reps=2)
    assert len(pts) == 12
    assert [p.as_dict() for p in pts[:3:2]] == [{"ca": "cubic", "bw": "10mbit"}, {"ca": "cubic", "bw": "100mbit"}]
    assert [p.rep for p in pts[:2]] == [0, 1] and pts[0].index == pts[1].index == 0
    assert len({p.key for p in pts}) == len({p.dirname for p in pts}) == 12
    assert pts[0].seed == points(g, reps=2)[0].seed != pts[1].seed  # stable per point, different per rep


def test_a_mapping_takes_typed_values_and_scalars() -> None:
    assert parse_grid({"dur": [2, 3], "ca": "reno"}) == {"dur": [2, 3], "ca": ["reno"]}


@pytest.mark.parametrize(("items", "message"), [
    (["ca"], "expected NAME=VALUE"),
    (["ca=cubic", "ca=bbr"], "given twice"),
    (["ca=cubic,,bbr"], "empty value"),
    (["ca=cubic,cubic"], "repeats a value"),
    (["rep=1,2"], "taken by the sweep"),
    (["2fast=1"], "a Python name"),
])
def test_bad_grids_are_refused(items: list[str], message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_grid(items)


def test_an_empty_grid_and_no_reps_are_refused() -> None:
    with pytest.raises(SweepError, match="the grid is empty"):
        points({}, 1)
    with pytest.raises(SweepError, match="--reps 0"):
        points({"ca": ["reno"]}, 0)


def test_values_take_the_type_of_the_notebooks_default() -> None:
    assert checked("dur", "2", 3) == 2 and checked("x", "2.5", 3.0) == 2.5 and checked("on", "off", True) is False
    assert checked("ca", "bbr", "cubic") == "bbr" and checked("n", 5, "x") == "5"
    with pytest.raises(SweepError, match=r"dur='fast'.*int"):
        checked("dur", "fast", 3)


def test_parameters_are_read_from_the_tagged_cell(tmp_path: Path) -> None:
    nb = write(tmp_path / "a.ipynb", 'ca = "cubic"  # the cc\ndur = 3\nratio = 0.5\nexpr = 2 * 3', "print(ca)")
    assert parameters_of(nb) == {"ca": "cubic", "dur": 3, "ratio": 0.5, "expr": "2 * 3"}
    check_names(nb, parameters_of(nb), {"ca": 1, "dur": 2})
    with pytest.raises(SweepError, match=r"no parameter 'cca' \(did you mean 'ca'\?\)"):
        check_names(nb, parameters_of(nb), {"cca": 1})


def test_a_notebook_without_a_parameters_cell_or_at_all(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="no cell tagged 'parameters'"):
        parameters_of(write(tmp_path / "b.ipynb", None, "x = 1"))
    with pytest.raises(SweepError, match="no such notebook"):
        parameters_of(tmp_path / "none.ipynb")
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(SweepError, match="not a readable notebook"):
        parameters_of(tmp_path / "bad.ipynb")


def test_the_shipped_notebooks_declare_what_the_docs_say() -> None:
    root = Path(__file__).parents[2] / "notebooks"
    assert list(parameters_of(root / "sweep.ipynb")) == ["ca", "bw", "rtt", "host_rtt", "buffer", "dur", "delay", "flows",
                                                         "steady", "lab", "workdir"]
    assert list(parameters_of(root / "analysis.ipynb")) == ["sweep_dir"]


@pytest.mark.parametrize(("name", "default", "value", "ok"), [
    ("ca", "cubic", "bbr:2+cubic", True), ("ca", "cubic", "bbr,cubic", False), ("ca", "cubic", "bbr+", False),
    ("dur", "3", "30+20", True), ("dur", "3", "30s", False), ("delay", "0", "0+-1", False),
    ("host_rtt", "", "h2:20ms+h3:40ms", True), ("host_rtt", "", "h3", False), ("host_rtt", "", "", True),
])
def test_a_mix_its_times_and_host_rtts_are_kinds_of_their_own(name: str, default: str, value: str, ok: bool) -> None:
    from netesto.sweep.values import checked

    if ok:
        assert checked(name, value, default) == value
    else:
        with pytest.raises(SweepError, match=f"parameter {name}="):
            checked(name, value, default)


def test_the_reports_figures_come_from_the_command_line_else_the_notebooks_metadata(tmp_path: Path) -> None:
    import nbformat

    from netesto.sweep.run import figure_list

    nb = write(tmp_path / "p.ipynb", "ca = 'cubic'", "print(ca)")
    assert figure_list(None, nb) == []  # nothing chosen: the default
    data = nbformat.read(nb, as_version=4)
    data.metadata["netesto"] = {"figures": ["share", "paper:bw"]}
    nbformat.write(data, nb)
    assert figure_list(None, nb) == ["share", "paper:bw"]
    assert figure_list("rate, flows", nb) == ["rate", "flows"]  # the command line wins
    with pytest.raises(SweepError, match=r"figure 'shares' \(did you mean 'share'\?\): one of share, rate"):
        figure_list(["shares"], nb)
