"""An RR row's latency part from the interval's values sorted: the same bytes as the interval histogram's."""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from netesto.engine.sampling import flowrecord, records, sampler
from netesto.engine.native import fastloop
from netesto.engine.sampling.flowrecord import FlowRecord
from netesto.engine.sampling.histogram import Histogram
from netesto.engine.sampling.records import LAT, ZERO_LAT, interval_summary
from netesto.engine.sampling.sampler import FILL_CHUNK
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


c_lat = pytest.mark.skipif(fastloop.lat_summary is None, reason="no C extension here")


@c_lat
@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.lists(st.integers(0, 1 << 40), min_size=1, max_size=300),
    st.lists(st.integers(0, 600), min_size=1, max_size=2000),  # many ties, around the exact range
    st.lists(st.sampled_from([0, 255, 256, 257, 1 << 30, (1 << 52) - 1]), min_size=1, max_size=50),
))
def test_the_c_summary_is_the_python_twins(values):
    """fastloop.lat_summary (the C tick's latency part) gives interval_summary's bytes."""
    got = fastloop.lat_summary(array("q", values))
    if sum(values) >= 1 << 53:  # beyond what doubles hold exactly: left to the twin
        assert got is None
    else:
        assert got == interval_summary(array("q", values))


@c_lat
def test_the_c_summary_leaves_what_it_cannot_do_exactly_to_its_twin():
    for values in ([], [5, -1, 7], [1 << 52], [1 << 51] * 5):
        assert fastloop.lat_summary(array("q", values)) is None, values
    rng = random.Random(11)
    for n in (1, 2, 3, 17, 100, 1001, 65536):  # the C selection against Python's sort, big and small
        values = array("q", (int(rng.expovariate(1 / 80_000)) for _ in range(n)))
        assert fastloop.lat_summary(values) == interval_summary(values), n
    with pytest.raises(TypeError):
        fastloop.lat_summary(array("i", [1, 2]))


def test_clustered_latencies_and_the_exact_range():
    rng = random.Random(3)
    for center in (100, 255, 256, 40_000, 85_000, 3_000_000):
        for n in (1, 2, 9, 60, 999, 1000, 5000):
            values = [max(0, int(rng.gauss(center, center / 10))) for _ in range(n)]
            assert interval_summary(array("q", values)) == _by_histogram(values), (center, n)
            assert records.lat_summary(array("q", values)) == _by_histogram(values), (center, n)


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


@pytest.mark.parametrize("path", ["C", "python"])
def test_rr_rows_in_the_file_hold_the_interval_histograms(tmp_path, monkeypatch, path):
    """RR rows through the engine's Sampler, in the file row by row as the interval histograms give
    them. The C tick (records.sample_tick) builds each whole row at once; the Python twin stamps and
    counts every row in the tick and fills the latency parts between the loop's handlers
    (Sampler._fill), a few flow ends at a time, a block due filled in before it is written."""
    from netesto.raw.nflow import read_flow
    from tests.engine.test_sampling import _loopback_ends

    if path == "C" and records.sample_tick is None:
        pytest.skip("the engine samples in Python here")
    if path == "python":
        monkeypatch.setattr(sampler, "sample_tick", None)
        monkeypatch.setattr(flowrecord, "lat_summary", interval_summary)
    rng = random.Random(7)
    with _loopback_ends(tmp_path, 5, "TCP_RR") as (worker, ends):
        sent: dict[str, list[list[int]]] = {end.spec.flow_id: [] for end in ends}
        for end in ends:
            end.begin()
        for _ in range(ends[0].flush_rows + 5):  # past a block
            for end in ends:
                values = [rng.randint(20_000, 2_000_000) for _ in range(rng.choice((0, 3, 40)))]
                end.lat_raw.extend(array("q", values))
                sent[end.spec.flow_id].append(values)
            worker.sampler._tick(0.01)
            if path == "C":  # every row whole in the tick: nothing waits
                assert not worker.sampler.filling and not any(end.lat_pending or end.lat_raw for end in ends)
                continue
            # every row with latencies waits for its part (and a block it completes, for it)
            waiting = [end for end in ends if sent[end.spec.flow_id][-1]]
            assert all(end.lat_pending for end in waiting) and worker.sampler.filling == waiting
            if waiting:
                assert worker.sampler.fill_timer is not None  # due now: runs after the loop's next handler
            fills = 0
            while worker.sampler.filling:  # the timer's runs, FILL_CHUNK flow ends each
                worker.sampler._fill()
                fills += 1
            assert fills == (len(waiting) + FILL_CHUNK - 1) // FILL_CHUNK
            assert not any(end.lat_pending for end in ends) and worker.sampler.fill_timer is None
    for end in ends:
        flow = read_flow(tmp_path / "1" / "flows" / f"{end.spec.flow_id}.client.nflow")
        assert not flow.truncated
        rows = sent[end.spec.flow_id]
        assert flow.rows == len(rows) + 2  # the joining row, the ticks, the last row
        for i, values in enumerate(rows, start=1):
            want = LAT.unpack(_by_histogram(values) if values else ZERO_LAT)
            got = tuple(flow.columns[c][i] for c in ("lat_count", "lat_min", "lat_mean", "lat_max", "lat_p50",
                                                      "lat_p90", "lat_p99", "lat_p999"))
            assert got == want, (end.spec.flow_id, i)
        whole = Histogram()
        whole.record_many(array("q", [v for values in rows for v in values]))
        assert flow.summary["latency_hist"] == whole.to_dict()


@c_lat
def test_the_engine_uses_the_c_summary_where_it_is_built():
    """An extension whose summary disagreed with the twin would be set aside (records._c_lat_agrees)."""
    assert records.lat_summary is fastloop.lat_summary and records.sample_tick is not None
