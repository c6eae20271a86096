"""bench_sampling's within-run estimator on a made-up byte counter: it finds the slowdown put in, and
work the flows do at a fixed phase of each second does not bias it."""

from __future__ import annotations

from typing import Callable

import pytest

from bench.sampling_within import balanced_median, cpu_pairs, duty_ratios, median_ci, window_rates
from netesto.engine.sampling.sampler import bench_window_sampled


def counter(rate: Callable[[float], float], t0: float, t1: float, step: float = 0.05):
    """(time, bytes) read every ``step`` s of a link running at rate(t) bytes/s."""
    points, t, total = [], t0, 0.0
    while t <= t1:
        points.append((t, int(total)))
        total += rate(t) * step
        t = round(t + step, 6)
    return points


def test_one_window_of_each_pair_is_sampled_as_often_the_first_as_the_second():
    firsts = [bench_window_sampled(2 * p * 0.5 + 0.25, 0.5) for p in range(1024)]
    seconds = [bench_window_sampled((2 * p + 1) * 0.5 + 0.25, 0.5) for p in range(1024)]
    assert all(a != b for a, b in zip(firsts, seconds))  # exactly one per pair
    assert sum(firsts) == 512 and sum(firsts[:16]) == 8  # balanced, over short stretches too
    assert firsts[:8] == [True, False, False, True, False, True, True, False]  # Thue-Morse, no period


@pytest.mark.parametrize("window", [0.5, 1.0])
def test_sampled_windows_are_compared_with_their_pairs(window):
    points = counter(lambda t: 0.98e9 if bench_window_sampled(t, window) else 1.0e9, 1000.0, 1030.0)
    rates = window_rates(points, window, 3.0)
    assert rates and all(1000.0 + 3.0 < k * window and (k + 1) * window <= 1030.0 - 3.0 for k, _ in rates)
    got = {bench_window_sampled((k + 0.5) * window, window): round(r / 8e9, 3) for k, r in rates}
    assert got == {True: 0.98, False: 1.0}  # bit/s, edges left out
    ratios = duty_ratios(rates, window)
    measured = {k for k, _ in rates}
    assert len(ratios) == sum(k % 2 == 0 and k + 1 in measured for k in measured) > 10
    assert all(r == pytest.approx(0.98, abs=2e-3) for r in ratios)


def test_work_at_a_fixed_phase_of_each_second_does_not_bias_the_reading():
    # nothing is sampled, but every second's first half is 2 % slower (the flows' progress events)
    points = counter(lambda t: 0.98e9 if t % 1.0 < 0.5 else 1.0e9, 1000.0, 1130.0)
    ratios = duty_ratios(window_rates(points, 0.5, 3.0), 0.5)
    assert len(ratios) > 100 and sum(ratios) / len(ratios) == pytest.approx(1.0, abs=2e-3)
    assert min(ratios) < 0.985 and max(ratios) > 1.015  # each pair sees it: it is noise, not bias


def test_a_pair_missing_a_window_is_left_out():
    window = 0.5
    order = {k: bench_window_sampled((k + 0.5) * window, window) for k in range(8, 16)}
    rates = [(k, 2.0 if order[k] else 1.0) for k in (8, 9, 10, 12, 13, 15)]
    assert duty_ratios(rates, window) == [2.0, 2.0]  # pairs 8-9 and 12-13; 10 lacks 11, 15 lacks 14


def test_the_reading_is_a_median_with_its_interval_and_a_stalled_pair_does_not_move_it():
    ratios = [0.98 + 0.001 * (i % 5 - 2) for i in range(100)]
    mid, lo, hi = median_ci(ratios)
    assert mid == pytest.approx(0.98) and lo <= mid <= hi and hi - lo <= 0.0021
    stalled = ratios[:-1] + [3.0]  # the unsampled window of one pair stalled
    assert median_ci(stalled)[0] == pytest.approx(0.98) and sum(stalled) / 100 > 1.0
    assert median_ci([1.0, 2.0, 3.0]) == (2.0, 1.0, 3.0)  # few pairs: the interval is all of them


def test_the_cpu_check_reads_what_sampling_added_in_each_pair_and_nothing_where_it_added_nothing():
    window = 0.5
    def noise(t: float) -> float:  # a window's own wobble, up to +-0.4 % of a core
        return 0.008e9 * ((int(t / window) * 7919 % 13) / 12 - 0.5)

    # a CPU counter (ns): 30 % of a core, 1.2 % more while sampled, and work at a fixed phase of each second
    busy = counter(lambda t: 0.300e9 + (0.012e9 if bench_window_sampled(t, window) else 0.0) + noise(t)
                   + (0.05e9 if t % 1.0 < 0.5 else 0.0), 1000.0, 1060.0)
    extra = cpu_pairs(busy, window)
    assert len(extra) > 40 and {first for _, first in extra} == {True, False}
    assert median_ci([x for x, _ in extra])[0] > 0.03  # a plain median falls on one side of the phase work
    mid, lo, hi = balanced_median(extra)
    assert mid == pytest.approx(0.012, abs=2e-3) and lo < 0.012 < hi and hi - lo < 0.008  # shares of one core
    flat = counter(lambda t: 0.300e9 + noise(t) + (0.05e9 if t % 1.0 < 0.5 else 0.0), 1000.0, 1060.0)
    mid, lo, hi = balanced_median(cpu_pairs(flat, window))
    assert abs(mid) < 2e-3 and lo <= 0.0 <= hi  # the control: nothing added, nothing read
