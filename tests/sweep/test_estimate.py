"""A sweep's point estimates: each point's own run planned once, the overhead learned from the points done."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from netesto.results.manifest import PointRecord
from netesto.sweep import estimate

DECLARED = {"ca": "cubic", "dur": 2, "delay": 0, "flows": 1}


def _point(key: str, status: str = "pending", seconds: float | None = None, **params: object) -> PointRecord:
    return PointRecord(key=key, index=0, rep=0, params=dict(params), dir=key, seed=1, status=status, seconds=seconds)


def test_the_points_left_are_estimated_with_the_overhead_the_points_done_took(monkeypatch: pytest.MonkeyPatch) -> None:
    planned: list[object] = []
    real = estimate._planned
    monkeypatch.setattr(estimate, "_PLANNED", {})
    monkeypatch.setattr(estimate, "_planned", lambda v: planned.append(v) or real(v))
    own = estimate.run_seconds({"ca": "bbr"}, DECLARED)
    assert own is not None and own > 2
    todo = [_point("ca=bbr,rep=1", ca="bbr"), _point("ca=reno", ca="reno")]
    before = estimate.estimates(None, DECLARED, {}, todo, SimpleNamespace(points={}), workers=0)
    assert before["ca=bbr,rep=1"] == pytest.approx(own + estimate.WARM_OVERHEAD)  # nothing done yet: the default
    done = {"ca=bbr,rep=0": _point("ca=bbr,rep=0", "ok", own + 7.0, ca="bbr"),
            "ca=cubic": _point("ca=cubic", "failed", 1.0, ca="cubic")}  # a failed point says nothing of the cost
    after = estimate.estimates(None, DECLARED, {}, todo, SimpleNamespace(points=done), workers=0)
    assert after["ca=bbr,rep=1"] == pytest.approx(own + 7.0)
    assert sorted(str(v["ca"]) for v in planned) == ["bbr", "reno"]  # each mix planned once, however often asked
