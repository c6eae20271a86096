"""experiment.json's typed record: the flow id, validation naming the field, the same JSON back."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from netesto.errors import RawDataError
from netesto.raw import experiment
from netesto.raw.experiment import ExperimentRecord, FlowEntry, FlowId, read_experiment

DATA = Path(__file__).resolve().parents[1] / "results" / "data"


def test_doctests() -> None:
    result = doctest.testmod(experiment)
    assert result.failed == 0 and result.attempted > 0


def test_flow_id_composes_and_parses_back() -> None:
    fid = FlowId.of("h1.lab.example", "h2", 12, 3)
    assert str(fid) == "h1-h2-12-3" and FlowId.parse(str(fid)) == fid
    for text in ("h1-h2-x-0", "h1-h2-1", "", "h1-h2-1-0-"):
        assert FlowId.parse(text) is None, text


def _runner_doc() -> dict[str, object]:
    """A recorded experiment.json completed with every key the runner writes."""
    doc = json.loads((DATA / "1" / "experiment.json").read_text())
    doc.update(errors=[], interrupted=False, seed=7, defines={"bw": "10mbit"}, testbed={})
    return {k: doc[k] for k in experiment.RECORD_KEYS}


def test_the_runners_json_comes_back_the_same() -> None:
    doc = _runner_doc()
    record = ExperimentRecord.from_json(doc)
    assert record.to_json() == doc
    assert list(record.to_json()) == list(doc)  # and in the same order
    assert [list(f.to_json()) for f in record.flows] == [list(f) for f in doc["flows"]]  # type: ignore[union-attr]
    assert record.flows[0].id == FlowId("h1", "h2", 1, 0) and record.flows[0].params["test"] == "TCP_STREAM"


def test_unknown_keys_are_kept() -> None:
    doc = {**_runner_doc(), "later": {"x": 1}, "processed": {"desc": "d", "other": []}}
    assert ExperimentRecord.from_json(doc).to_json() == doc


@pytest.mark.parametrize("change, field", [
    ({"hosts": ["h1"]}, "'hosts' must be an object"),
    ({"flows": {"h1-h2-1-0": {}}}, "'flows' must be a list"),
    ({"flows": [{"flow_id": "a-b-1-0"}, {"flow_id": 5}]}, r"'flows\[1\].flow_id'"),
    ({"flows": [{"flow_id": "a-b-1-0", "group": "one"}]}, r"'flows\[0\].group' must be a whole number"),
    ({"flows": [7]}, r"'flows\[0\]' must be an object"),
    ({"hosts": {"h1": 3}}, "'hosts.h1' must be an object"),
    ({"other": [["bw"]]}, "'other'"),
    ({"exp": "seven"}, "'exp'"),
    ({"schema": 2}, "'schema' 2"),
])
def test_a_bad_field_is_named(change: dict[str, object], field: str, tmp_path: Path) -> None:
    p = tmp_path / "experiment.json"
    p.write_text(json.dumps({**_runner_doc(), **change}))
    with pytest.raises(RawDataError, match=field) as info:
        read_experiment(p)
    assert str(p) in str(info.value)


def test_no_file_is_no_record(tmp_path: Path) -> None:
    assert read_experiment(tmp_path / "experiment.json") is None
    (tmp_path / "experiment.json").write_text("{not json")
    with pytest.raises(RawDataError, match="cannot read experiment description"):
        read_experiment(tmp_path / "experiment.json")


def test_an_entry_without_identity_fields() -> None:
    entry = FlowEntry.from_json({"flow_id": "h1-h2-1-0", "test": "TCP_RR"}, "flows[0]")
    assert (entry.host, entry.group, entry.id) == ("", None, FlowId("h1", "h2", 1, 0))
