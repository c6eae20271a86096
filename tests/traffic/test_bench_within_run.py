"""bench_sampling's within-run estimator on a made-up byte counter: it finds the slowdown put in."""

from __future__ import annotations

import pytest

from bench.bench_sampling import duty_ratios, window_rates


def counter(rates: dict[int, float], t0: float, t1: float, window: float, step: float = 0.05):
    """(time, bytes) read every ``step`` s of a link running at rates[window number % 2] bytes/s."""
    points, t, total = [], t0, 0.0
    while t <= t1:
        points.append((t, int(total)))
        total += rates[int(t / window) % 2] * step
        t = round(t + step, 6)
    return points


@pytest.mark.parametrize("window", [0.5, 1.0])
def test_sampled_windows_are_compared_with_their_neighbours(window):
    points = counter({0: 0.98e9, 1: 1.0e9}, 1000.0, 1030.0, window)
    rates = window_rates(points, window, 3.0)
    assert rates and all(1000.0 + 3.0 < k * window and (k + 1) * window <= 1030.0 - 3.0 for k, _ in rates)
    assert {k % 2: round(r / 8e9, 3) for k, r in rates} == {0: 0.98, 1: 1.0}  # bit/s, edges left out
    ratios = duty_ratios(rates)
    assert len(ratios) == sum(k % 2 == 0 for k, _ in rates[1:-1])
    assert all(r == pytest.approx(0.98, abs=2e-3) for r in ratios)


def test_a_window_without_both_neighbours_is_left_out():
    rates = [(9, 2.0), (10, 1.0), (11, 2.0), (12, 1.0), (14, 1.0), (15, 2.0), (16, 1.5), (17, 2.0)]
    assert duty_ratios(rates) == [0.5, 0.75]  # 10 and 16 have both; 12 lacks 13, 14 lacks 13
