"""An RR row's latency part from the interval's values sorted: the same bytes as the interval histogram's."""

from __future__ import annotations

import random
from array import array

from hypothesis import given, settings, strategies as st

from netesto.engine.flowrecord import FlowRecord
from netesto.engine.histogram import Histogram
from netesto.engine.records import LAT, ZERO_LAT, interval_summary
from netesto.protocol.flowspec import FlowSpec


def _by_histogram(values: list[int]) -> bytes:
    h = Histogram()
    h.record_many(array("q", values))
    s = h.summary(0.001)
    return LAT.pack(s.count, s.min, s.mean, s.max, s.p50, s.p90, s.p99, s.p999)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1 << 40), min_size=1, max_size=300))
def test_sorted_summary_is_the_histograms(values):
    assert interval_summary(array("q", values)) == _by_histogram(values)


def test_clustered_latencies_and_the_exact_range():
    rng = random.Random(3)
    for center in (100, 255, 256, 40_000, 85_000, 3_000_000):
        for n in (1, 2, 9, 60, 999, 1000, 5000):
            values = [max(0, int(rng.gauss(center, center / 10))) for _ in range(n)]
            assert interval_summary(array("q", values)) == _by_histogram(values), (center, n)


def test_negative_or_no_values_leave_it_to_the_histogram():
    assert interval_summary(array("q")) is None
    assert interval_summary(array("q", [5, -1, 7])) is None


def _rr() -> FlowRecord:
    return FlowRecord(FlowSpec(flow_id="f", test="TCP_RR", server="127.0.0.1", port=1, interval=0.01, exp=1))


def test_rows_and_the_flow_histogram_match_the_histogram_path():
    """Ticks with latencies, one folded early (the histogram path), one without any: the rows'
    latency parts and the flow's histogram are what counting every value would give."""
    rng = random.Random(5)
    rec, whole = _rr(), Histogram()
    for tick in range(30):
        values = [rng.randint(30_000, 900_000) for _ in range(rng.choice((0, 1, 7, 60)))]
        for v in values:
            rec.lat_raw.append(v)
        if tick == 11 and values:
            rec.fold_latency()  # as the RR loops do when lat_raw is full
        got = rec._latency_record()
        assert got == (_by_histogram(values) if values else ZERO_LAT), tick
        whole.record_many(array("q", values))
        if tick % 7 == 0:
            rec.flush()  # no writer: only folds the summarized latencies into the histogram
    assert rec.hist.to_dict() == whole.to_dict()
    assert not rec.lat_done and not rec.lat_raw and rec.ihist.count == 0
