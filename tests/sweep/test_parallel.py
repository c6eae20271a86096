"""Points run in parallel across labs, one at a time on each (two loopback testbeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netesto.sweep.run import sweep
from netesto.testbed import lifecycle
from netesto.testbed.config import TestbedConfig

from ..testbed import tbutil
from .nbfiles import write

BODY = '''import json, shutil, time
t0 = time.time()
time.sleep(1.5)
open("span.json", "w").write(json.dumps({"lab": lab, "start": t0, "end": time.time()}))
shutil.copytree(src, "results/1")  # a recorded experiment: a point without one fails'''


@pytest.fixture
def labs(tmp_path: Path):
    ups = []
    try:
        for _ in range(2):
            name = tbutil.unique_name()
            ups.append(lifecycle.up(TestbedConfig.parse(name=name, hosts=1, dir=tmp_path / name, loopback=True)))
        yield [str(u.lab) for u in ups]
    finally:
        for u in ups:
            lifecycle.down(u.name)


def test_two_labs_share_the_points_one_at_a_time_each(labs: list[str], processed: Path, tmp_path: Path) -> None:
    nb = write(tmp_path / "p.ipynb", 'x = 0\nlab = ""\nsrc = ""', BODY)
    res = sweep(nb, {"x": [1, 2, 3, 4]}, fixed={"src": str(processed / "1")}, out=tmp_path / "out", labs=labs,
                progress=False, report=False)
    assert not res.failed
    spans = [json.loads((res.directory / r.dir / "span.json").read_text()) for r in res.manifest]
    assert sorted({s["lab"] for s in spans}) == sorted(str(Path(lab).resolve()) for lab in labs)
    for lab in labs:  # one point at a time on a lab
        mine = sorted((s["start"], s["end"]) for s in spans if s["lab"] == str(Path(lab).resolve()))
        assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:])), mine
    # ... and the two labs at once: some points overlap in time
    every = sorted((s["start"], s["end"]) for s in spans)
    assert any(b[0] < a[1] for a, b in zip(every, every[1:])), every
    assert all(r.lab for r in res.manifest)
