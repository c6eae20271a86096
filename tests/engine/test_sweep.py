"""The Sampler's sweep in C (``fastloop.sweep``): one whole sweep, from the clocks to the next grid point,
with the rows ``sample_tick`` takes; it leaves to Python only what sample_tick does (blocks it could not
write, rows it could not build, rows whose latency part waits), and the Sampler's files come out as its
Python sweep writes them."""

from __future__ import annotations

import math
import time
from array import array
from pathlib import Path

import pytest

from netesto.engine.sampling import records, sampler
from netesto.engine.native import fastloop
from netesto.engine.sampling.grid import backlog
from netesto.engine.kinds.client import StreamClient
from netesto.engine.kinds.flowend import Worker
from netesto.engine.core.loop import Loop
from netesto.engine.sampling.records import HEAD
from netesto.protocol.flowspec import FlowSpec
from netesto.raw.nflow import read_flow
from tests.engine.test_sample_hot import _done, _rr_end

c_sweep = pytest.mark.skipif(fastloop.sweep is None or records.sample_tick is None,
                             reason="the engine samples in Python here")


def _acc() -> array[int]:
    return array("q", [0] * fastloop.SWEEP_FIELDS)


def _stream_ends(worker: Worker, n: int, prefix: str) -> list[StreamClient]:
    made = []
    for i in range(n):
        end = StreamClient(worker, FlowSpec(flow_id=f"{prefix}-{i}", test="TCP_STREAM", server="127.0.0.1", port=1,
                                            interval=0.01, exp=1))
        end.begin()
        made.append(end)
    return made


@c_sweep
def test_a_sweep_with_nothing_left_to_python_returns_the_next_grid_point_owed_or_ahead(tmp_path):
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    made = _stream_ends(worker, 3, "s")
    acc = _acc()
    # on time; late by part of a point and by 25 (the next point, owed: already past); by 300, more than
    # the backlog (the first point ahead: the points passed given up)
    for behind, owed in ((0.0, False), (0.0123, True), (0.25, True), (0.01 * (backlog(0.01) + 236), False)):
        point = time.monotonic() - behind
        before = time.monotonic()
        when = fastloop.sweep(made, [], point, 0.01, acc)
        after = time.monotonic()
        assert type(when) is float
        if owed:
            assert when == point + 0.01 and when < before, behind
        else:
            assert before < when <= after + 0.01 + 1e-9, behind
        steps = (when - point) / 0.01
        assert round(steps) >= 1 and abs(steps - round(steps)) < 1e-6  # on the grid, a step on at least
    assert acc[1] == 12 and acc[0] > 0  # its rows, its thread CPU
    assert [end.samples + end.nrows for end in made] == [5, 5, 5]  # each end's row of begin, and one a sweep
    wall, mono = HEAD.unpack_from(made[0].b_rec, (made[0].nrows - 1) * made[0].rec_len)[:2]
    assert abs(wall - time.time()) < 1 and mono <= time.monotonic()
    _done(worker, made)


@c_sweep
def test_hot_ends_get_a_row_when_still_due_and_are_due_at_the_next_grid_point(tmp_path):
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    late, took, idle = made = [_rr_end(worker, i) for i in range(3)]
    point = time.monotonic() - 0.001
    late.due_at = point - 0.01  # its idle point did not come: the sweep takes its row, and the one it owes
    took.due_at = point + 0.01  # it took its row at its idle point: not due
    idle.due_at = math.inf  # not yet gridded
    rows = [end.samples + end.nrows for end in made]
    when = fastloop.sweep([], made, point, 0.01, _acc())
    assert [end.samples + end.nrows - n for end, n in zip(made, rows)] == [2, 0, 0]
    stamps = [HEAD.unpack_from(late.b_rec, i * late.rec_len)[1] for i in range(late.nrows - 2, late.nrows)]
    assert stamps[0] < stamps[1]  # the owed row at its own instant
    # all caught up: each is due at the next point; the idle one joins there
    assert late.due_at == pytest.approx(point + 0.01, abs=1e-9) and idle.due_at == when == point + 0.01
    assert took.due_at == point + 0.01
    _done(worker, made)


@c_sweep
def test_a_sweep_reads_every_row_before_it_writes_the_due_blocks(tmp_path):
    """A block written between two rows would put its write (~40-100 us) between the sweep's stamps and the
    later flow ends' readings."""
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    a, b = made = _stream_ends(worker, 2, "s")
    assert a.writer is not None
    seen = []
    direct_fd = a.writer.direct_fd

    def watched(record_length: int) -> int | None:  # how many rows b has when a's block goes out
        seen.append(b.samples + b.nrows)
        return direct_fd(record_length)

    a.writer.direct_fd = watched  # type: ignore[method-assign]
    a.flush_at = a.nrows + 1  # a's block is due in this sweep
    rows, b_rows = a.samples + a.nrows, b.samples + b.nrows
    fastloop.sweep(made, [], time.monotonic(), 0.01, _acc())
    assert seen == [b_rows + 1] and a.nrows == 0 and a.samples == rows + 1
    _done(worker, made)


@c_sweep
def test_what_the_sweep_leaves_to_python_comes_back_with_its_stamps(tmp_path):
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    a, b = made = _stream_ends(worker, 2, "s")
    b.b_rec = bytes(b.rec_len)  # not a bytearray: its row fails
    got = fastloop.sweep(made, [], time.monotonic(), 0.01, _acc())
    when, mono, wall, due, failed, python = got
    assert (due, python) == ([], []) and [(f, type(e)) for f, e in failed] == [(b, TypeError)]
    assert (wall, mono) == HEAD.unpack_from(a.b_rec, (a.nrows - 1) * a.rec_len)[:2] and mono < when
    b.b_rec = bytearray(b.rec_len * (b.flush_rows + 1))
    _done(worker, made)


@c_sweep
@pytest.mark.parametrize("args, error", [
    (([], [], 1.0, 0.0), ValueError),  # an interval of 0
    (((), [], 1.0, 0.01), TypeError),  # not a list
    (([], [], "x", 0.01), TypeError),
])
def test_bad_arguments_raise(args, error):
    with pytest.raises(error):
        fastloop.sweep(*args, _acc())
    with pytest.raises((ValueError, TypeError)):
        fastloop.sweep([], [], 1.0, 0.01, array("q", [0]))  # an acc of one value


@c_sweep
def test_the_c_and_python_sweeps_write_the_same_files(tmp_path):
    """The same ticks through Sampler._tick with the C sweep and with the Python one (sample_tick): the same
    rows in the same blocks, counted alike, for stream ends and hot ends (one of them stalled)."""
    def ticks(where: Path, python: bool) -> tuple[tuple, bool]:
        """The counts after the same ticks on one path, and whether every tick served the next grid point
        (a process held past a grid point skips the points it missed, in either path: a loaded machine's)."""
        worker = Worker(Loop(), str(where), lambda event: None)
        if python:
            worker.sampler.c_sweep = None
        made = _stream_ends(worker, 11, "s") + [_rr_end(worker, i) for i in range(2)]
        stalled = made[-1]
        steady = True
        for tick in range(2 * made[0].flush_rows + 3):
            for end in made[:11]:
                end.tx += 1000
            point = worker.sampler.next[0.01]
            worker.sampler._tick(0.01)
            steady = steady and worker.sampler.next[0.01] == pytest.approx(point + 0.01)
            assert stalled.due_at == pytest.approx(worker.sampler.next[0.01])  # due again at the next point
        got = ([end.samples for end in made], [end.nrows for end in made], worker.sampler.swept,
               worker.sampler.cpu_ns > 0)
        _done(worker, made)
        return got, steady

    for attempt in range(5):  # the comparison holds for ticks that skipped nothing: taken again if one did
        base = tmp_path / str(attempt)
        (c_counts, c_steady), (p_counts, p_steady) = ticks(base / "C", False), ticks(base / "python", True)
        if c_steady and p_steady:
            break
    assert c_steady and p_steady, "every attempt was held past a grid point"
    assert c_counts == p_counts
    for i in range(11):
        c, p = (read_flow(base / path / "1" / "flows" / f"s-{i}.client.nflow") for path in ("C", "python"))
        assert c.rows == p.rows and list(c.columns["app_bytes_tx"]) == list(p.columns["app_bytes_tx"])


def test_without_the_extension_the_sampler_sweeps_in_python(tmp_path, monkeypatch):
    monkeypatch.setattr(sampler, "sample_tick", None)
    worker = Worker(Loop(), str(tmp_path), lambda event: None)
    assert worker.sampler.c_sweep is None
    made = _stream_ends(worker, 2, "s")
    worker.sampler._tick(0.01)
    assert [end.samples + end.nrows for end in made] == [2, 2] and worker.sampler.swept == 2
    _done(worker, made)

