"""fields.txt parsing and the aggregation ops (one/all/avg/sum/min/max/sumRateDur)."""

from __future__ import annotations

import pytest

from netesto.errors import ResultsError
from netesto.results.expcsv import aggregate, default_fields_text, load_fields, parse_fields

F = parse_fields(
    "exp:one\ngroup:one\nca:all\ncwnd:avg\nrate:sumRateDur\nrateMin:min\nrateMax:max\n"
    "bytes:sum\nadaptive_rx:avg\ndesc:one\ntestType:one\n"
)


def test_default_fields_txt_has_the_original_58_then_the_limit_shares() -> None:
    fields = parse_fields(default_fields_text())
    assert len(fields) == 61
    assert fields[0].name == "exp" and fields[57].name == "client-rx-packet-len"
    # netesto's own after the original's, so an exp.csv reader that counts columns from the left still works
    assert [(f.name, f.op) for f in fields[58:]] == [("rwndLimited%", "avg"), ("sndbufLimited%", "avg"),
                                                    ("netLimited%", "avg")]
    ops = {f.name: f.op for f in fields}
    assert ops["rate"] == "sumRateDur" and ops["ca"] == "all" and ops["cwnd"] == "avg"
    assert load_fields(None) == fields


@pytest.mark.parametrize(
    "items, expect",
    [
        ([("exp", "5.1"), ("exp", "5.1")], {"exp": "5.1"}),
        ([("group", "1"), ("group", "2"), ("group", "3")], {"group": "1+..."}),
        ([("ca", "cubic"), ("ca", "reno"), ("ca", "cubic"), ("ca", "")], {"ca": "cubic/reno"}),
        ([("cwnd", "10"), ("cwnd", "20"), ("cwnd", "")], {"cwnd": "15.000"}),
        ([("cwnd", "")], {"cwnd": ""}),
        ([("rateMin", "3"), ("rateMin", "1.5"), ("rateMax", "3"), ("rateMax", "7")],
         {"rateMin": "1.5", "rateMax": "7.0"}),
        ([("bytes", "1K"), ("bytes", "2M"), ("bytes", "x")], {"bytes": "2001000.0"}),
        # sumRateDur: 10 Mbit/s for 20 s + 30 Mbit/s for 10 s over the longest 20 s.
        ([("dur", "20"), ("rate", "10"), ("dur", "10"), ("rate", "30")], {"rate": "25.0"}),
        # Two 10 s flows 5 s apart, 75 Mbit/s each on a 100 Mbit/s link: their bits over the 15 s they
        # spanned (the "all" row said 150, over the longest dur, on a 100 Mbit/s link).
        ([("dur", "10"), ("delay", "0"), ("rate", "75"), ("dur", "10"), ("delay", "5"), ("rate", "75")],
         {"rate": "100.0"}),
        ([("adaptive-rx", "1"), ("adaptive-rx", "0")], {"adaptive_rx": "0.500"}),
    ],
)
def test_ops(items, expect) -> None:
    row = aggregate(items, F)
    for k, v in expect.items():
        assert row[k] == v, k
    assert set(row) == {f.name for f in F}


def test_desc_and_other() -> None:
    row = aggregate([("cwnd", "4"), ("testType", "x")], F, desc="d",
                    other="testType=3Stream1,cwnd=99")
    assert row["desc"] == "d" and row["testType"] == "3Stream1"
    assert row["cwnd"] == "4.000"  # other never overrides avg fields
    row = aggregate([], F, other=[("group", "7")])
    assert row["group"] == "7"


@pytest.mark.parametrize("text, msg", [
    ("exp\n", "fields.txt:1: expected 'field:op'"),
    ("exp:one\nrate:avgg\n", "fields.txt:2: unknown op 'avgg'"),
    ("# nothing\n", "no fields"),
])
def test_bad_fields(text, msg) -> None:
    with pytest.raises(ResultsError, match=msg):
        parse_fields(text)
