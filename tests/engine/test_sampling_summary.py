"""An RR row's latency part from the interval's values sorted: the same bytes as the interval histogram's."""

from __future__ import annotations

import random
from array import array

from hypothesis import given, settings, strategies as st

from netesto.engine.flowrecord import FlowRecord
from netesto.engine.histogram import Histogram
from netesto.engine.records import LAT, ZERO_LAT, interval_summary
from netesto.engine.sampler import FILL_CHUNK
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


def test_rr_rows_get_their_latency_part_between_handlers_and_in_the_file(tmp_path):
    """The tick stamps and counts every RR row at once; the latency parts follow between the loop's
    handlers (Sampler._fill), a few flow ends at a time, and a block due is filled in before it
    is written: the file holds, row by row, what the interval histograms give."""
    from netesto.raw.nflow import read_flow
    from tests.engine.test_sampling import _loopback_ends

    rng = random.Random(7)
    with _loopback_ends(tmp_path, 5, "TCP_RR") as (worker, ends):
        sent: dict[str, list[list[int]]] = {end.spec.flow_id: [] for end in ends}
        for end in ends:
            end.begin()
        for _ in range(25):  # past a block (20 rows at 10 ms)
            for end in ends:
                values = [rng.randint(20_000, 2_000_000) for _ in range(rng.choice((0, 3, 40)))]
                end.lat_raw.extend(array("q", values))
                sent[end.spec.flow_id].append(values)
            worker.sampler._tick(0.01)
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
