"""The latency histogram: percentiles within 1 % of exact, bounded size, merging."""

from __future__ import annotations

import math
import random

import pytest

from netesto.raw.histogram import Histogram, bucket_bounds, bucket_index


def exact(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def _lognormal(rng: random.Random, n: int) -> list[int]:
    return [int(rng.lognormvariate(11, 1.2)) for _ in range(n)]  # ~60 us median, long tail


def _bimodal(rng: random.Random, n: int) -> list[int]:
    return [int(rng.gauss(80_000, 2_000)) if rng.random() < 0.9 else int(rng.gauss(5_000_000, 100_000))
            for _ in range(n)]


CASES = [
    ("constant", lambda rng, n: [123_456] * n),
    ("small exact", lambda rng, n: [rng.randrange(0, 256) for _ in range(n)]),
    ("uniform us", lambda rng, n: [rng.randrange(10_000, 1_000_000) for _ in range(n)]),
    ("lognormal", _lognormal),
    ("bimodal", _bimodal),
    ("exponential", lambda rng, n: [int(rng.expovariate(1 / 250_000)) for _ in range(n)]),
    ("huge", lambda rng, n: [rng.randrange(1, 1 << 45) for _ in range(n)]),
]


@pytest.mark.parametrize("name,gen", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("n", [1, 7, 1000, 20000])
def test_percentiles_within_one_percent(name, gen, n):
    rng = random.Random(f"{name}-{n}")
    values = gen(rng, n)
    hist = Histogram()
    for v in values:
        hist.record(v)
    qs = [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0]
    for q, got in zip(qs, hist.percentiles(qs)):
        want = exact(values, q)
        assert abs(got - want) <= 0.01 * want + 1e-9, (q, got, want)
    s = hist.summary()
    assert s.count == n and s.min == min(values) and s.max == max(values)
    assert s.mean == pytest.approx(sum(values) / n)


def test_bucket_error_bound_everywhere():
    for v in list(range(0, 5000)) + [random.Random(1).randrange(1, 1 << 50) for _ in range(20000)]:
        low, high = bucket_bounds(bucket_index(v))
        assert low <= v < high
        mid = (low + high - 1) / 2
        assert abs(mid - v) <= 0.004 * max(v, 1) + 0.5


def test_bounded_memory():
    hist = Histogram()
    rng = random.Random(5)
    for _ in range(100_000):
        hist.record(rng.randrange(0, 1 << 40))
    assert len(hist.counts) <= 128 * 34 + 256


def test_merge_equals_recording_everything():
    rng = random.Random(9)
    a, b, both = Histogram(), Histogram(), Histogram()
    for i in range(5000):
        v = int(rng.lognormvariate(10, 2))
        (a if i % 3 else b).record(v)
        both.record(v)
    a.merge(b)
    assert a.counts == both.counts and a.summary() == both.summary()
    restored = Histogram.from_dict(a.to_dict())
    assert restored.counts == a.counts and restored.summary() == a.summary()


def test_empty():
    hist = Histogram()
    assert hist.summary().count == 0 and hist.percentiles([0.5]) == [0.0]
    hist.merge(Histogram())
    assert hist.count == 0


def test_record_many_equals_record():
    rng = random.Random(3)
    values = [int(rng.lognormvariate(9, 2)) for _ in range(3000)] + [0, -5, 255, 256]
    one, many = Histogram(), Histogram()
    for v in values:
        one.record(v)
    many.record_many(values[:1000])
    many.record_many(values[1000:])
    many.record_many([])
    assert one.counts == many.counts
    assert (one.count, one.total, one.min, one.max) == (many.count, many.total, many.min, many.max)


@pytest.mark.parametrize("low,high", [(5_000, 9_000), (256, 10**9), (0, 2_000), (300, 301)])
def test_a_batch_counts_exactly_like_one_value_at_a_time(low, high):
    import random
    from array import array

    rng = random.Random(low + high)
    values = array("q", [rng.randint(low, high) for _ in range(3000)])
    batch, single = Histogram(), Histogram()
    batch.record(7)  # min/max/count merge with what was there
    single.record(7)
    batch.record_many(values)
    for v in values:
        single.record(v)
    assert batch.counts == single.counts
    assert (batch.count, batch.total, batch.min, batch.max) == (single.count, single.total, single.min, single.max)
