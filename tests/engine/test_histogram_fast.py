"""The C histogram counter (``_fastloop.hist_record``) against the pure-Python path: the same histogram, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netesto.engine.sampling import histogram
from netesto.engine.sampling.histogram import Histogram
from netesto.raw.histogram import bucket_index

try:
    from netesto.engine.native import _fastloop  # type: ignore[attr-defined]
except ImportError:  # not built: only the pure-Python path exists
    _fastloop = None

C_RECORD = getattr(_fastloop, "hist_record", None)
needs_c = pytest.mark.skipif(C_RECORD is None, reason="the C extension is not built")

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
EDGES = [0, 1, 255, 256, 257, 511, 512, 1023, 1024, INT64_MAX, -1, INT64_MIN]
EDGES += [v for k in range(8, 63) for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)]

int64s = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from(EDGES), st.integers(0, 300),
                   st.integers(10_000, 10_000_000))


def state(hist: Histogram) -> tuple:
    return hist.counts, hist.count, hist.total, hist.min, hist.max


def built(batches: list[list[int]], fast, monkeypatch: pytest.MonkeyPatch, start: list[int] = ()) -> Histogram:
    """A histogram of ``start`` (one at a time) then each batch as one array('q'), on the path ``fast``."""
    monkeypatch.setattr(histogram, "_fast_record", fast)
    hist = Histogram()
    for v in start:
        hist.record(v)
    for batch in batches:
        hist.record_many(array("q", batch))
    return hist


def reference(batches: list[list[int]], start: list[int] = ()) -> Histogram:
    """The definition: every value through :meth:`Histogram.record`, bucketed by ``bucket_index``."""
    hist = Histogram()
    for v in [*start, *(v for b in batches for v in b)]:
        hist.record(v)
    return hist


@needs_c
@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.lists(int64s, max_size=200), max_size=4), start=st.lists(int64s, max_size=3))
def test_c_and_python_paths_build_the_same_histogram(batches, start):
    with pytest.MonkeyPatch.context() as mp:
        c = built(batches, C_RECORD, mp, start)
        py = built(batches, None, mp, start)
    ref = reference(batches, start)
    assert state(c) == state(py) == state(ref)
    assert c.to_dict() == py.to_dict() == ref.to_dict()
    assert c.summary(0.001) == py.summary(0.001)
    assert Histogram.from_dict(c.to_dict()).to_dict() == c.to_dict()


@needs_c
@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(256, 1 << 40), min_size=64, max_size=3000))
def test_python_batch_trick_agrees_with_c(values):
    # values of 256 and up in batches of 64 or more take the Python Counter shortcut, not the plain loop
    with pytest.MonkeyPatch.context() as mp:
        assert state(built([values], C_RECORD, mp)) == state(built([values], None, mp))


@needs_c
def test_every_int64_edge_lands_in_its_bucket_and_in_range():
    counts: dict[int, int] = {}
    got = C_RECORD(array("q", EDGES), counts)
    want: dict[int, int] = {}
    for v in EDGES:
        want[bucket_index(max(v, 0))] = want.get(bucket_index(max(v, 0)), 0) + 1
    assert counts == want
    assert max(counts) == bucket_index(INT64_MAX) == _fastloop.HIST_BUCKETS - 1
    assert got == (0, INT64_MAX, sum(max(v, 0) for v in EDGES))


@needs_c
def test_the_total_does_not_wrap_past_int64():
    values = array("q", [INT64_MAX]) * 1000
    counts: dict[int, int] = {}
    assert C_RECORD(values, counts) == (INT64_MAX, INT64_MAX, INT64_MAX * 1000)
    assert counts == {bucket_index(INT64_MAX): 1000}


@needs_c
def test_negative_values_count_as_zero_like_python():
    counts: dict[int, int] = {}
    assert C_RECORD(array("q", [-1, INT64_MIN, -300, 5]), counts) == (0, 5, 5)
    assert counts == {0: 3, 5: 1}


@needs_c
def test_empty_batch_changes_nothing(monkeypatch):
    counts = {7: 2}
    assert C_RECORD(array("q"), counts) is None and counts == {7: 2}
    for fast in (C_RECORD, None):
        hist = built([[]], fast, monkeypatch)
        assert state(hist) == ({}, 0, 0, 0, 0) and hist.summary().count == 0
        hist = built([[]], fast, monkeypatch, start=[9])
        assert state(hist) == ({9: 1}, 1, 9, 9, 9)


@needs_c
def test_counts_add_to_what_the_dict_holds_even_beyond_int64():
    b300 = bucket_index(300)
    counts = {b300: 1 << 70, 5: 1}
    C_RECORD(array("q", [300, 300, 5, 6]), counts)
    assert counts == {b300: (1 << 70) + 2, 5: 2, 6: 1}


@needs_c
@pytest.mark.parametrize("typecode", ["i", "Q", "d", "b"])
def test_other_element_types_are_refused_not_misread(typecode):
    with pytest.raises(TypeError):
        C_RECORD(array(typecode, [1, 2, 3]), {})


@needs_c
def test_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        C_RECORD(array("q", [1]), [0] * 10)  # counts must be a dict
    with pytest.raises(TypeError):
        C_RECORD([1, 2, 3], {})  # no buffer
    with pytest.raises(BufferError):
        C_RECORD(memoryview(array("q", range(10)))[::2], {})  # not contiguous
    counts: dict[int, int] = {}
    assert C_RECORD(memoryview(array("q", range(300, 310)))[2:5], counts) == (302, 304, 909)
    assert counts == {bucket_index(302): 2, bucket_index(304): 1}


@pytest.mark.parametrize("fast", ["C", "python"])
def test_record_many_takes_other_arrays_on_the_python_path(fast, monkeypatch):
    if fast == "C" and C_RECORD is None:
        pytest.skip("the C extension is not built")
    big = [(1 << 64) - 1, 1 << 63, 1000]  # unsigned values beyond int64: never handed to C
    for typecode, values in (("Q", big), ("i", [-4, 0, 70_000, 255]), ("I", [256, 257])):
        hist = built([], C_RECORD if fast == "C" else None, monkeypatch)
        hist.record_many(array(typecode, values))
        assert state(hist) == state(reference([values]))


def test_pure_python_switch_and_existing_tests_on_both_paths():
    """NETESTO_PURE_PYTHON=1 turns the C counter off; the histogram tests pass that way too."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, NETESTO_PURE_PYTHON="1", PYTHONPATH=str(root))
    probe = subprocess.run([sys.executable, "-c", "from netesto.engine.native import fastloop; "
                            "from netesto.engine.sampling import histogram; "
                            "print(histogram._fast_record is None, fastloop.hist_record is None)"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert probe.stdout.split() == ["True", "True"], probe.stderr
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(root / "tests" / "raw" / "test_histogram.py")],
                         env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:]


@needs_c
@pytest.mark.skipif(os.environ.get("NETESTO_PURE_PYTHON", "") not in ("", "0"), reason="pure Python asked for")
def test_record_many_counts_in_c_when_built():
    assert histogram._fast_record is C_RECORD
