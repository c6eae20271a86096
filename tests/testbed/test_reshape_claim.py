"""A reshape is an operation on a claimed lab (issue 32), and an experiment records the shape the kernels had."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from netesto.controller import Lab, run
from netesto.controller.claim import LabClaim
from netesto.controller.progress import FlowsScheduled, Notice, RecordingProgress
from netesto.errors import AgentError, TestbedError
from netesto.testbed import reshape
from netesto.testbed.state import load_state, state_path

from . import tbutil

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    with tbutil.testbed_up(tmp_path_factory, hosts=2, bw="100mbit", rtt="10ms", buffer="1bdp") as up:
        yield up


FLOW = """
DO_SERVER host=h2 exp=COUNTER start=1
DO_CLIENT host=h1 server=h2 test=TCP_STREAM req=S dur=$dur exp=PREV ca=cubic
WAIT $dur
GET_DATA host=h1
GET_DATA host=h2
"""


def _rtt(bed) -> float:
    h1, h2 = bed.state["links"]
    return tbutil.median_rtt(h1["ns"], h2["addr"])


def test_a_reshape_takes_the_claim_and_is_refused_while_a_run_holds_the_lab(bed, tmp_path: Path) -> None:
    # A second `netesto sweep --testbed` during another run changed the victim's RTT from 10 to
    # 150 ms mid-flow; the victim ended rc 0 and its exp.nc said 10 ms.
    lab = Lab.from_file(bed.lab)
    with pytest.raises(TestbedError, match=r"has agents: a reshape would change the bottleneck .* LabClaim"):
        reshape(bed.name, rtt="150ms")
    running, done = threading.Event(), threading.Event()
    outcome: list[object] = []

    def progress(event: object) -> None:
        if isinstance(event, FlowsScheduled):
            running.set()

    def victim() -> None:
        try:
            outcome.append(run(FLOW.replace("$dur", "4"), lab=lab, workdir=tmp_path / "victim", progress=progress))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)
        done.set()

    thread = threading.Thread(target=victim)
    thread.start()
    try:
        assert running.wait(30), outcome
        with pytest.raises(AgentError, match=r"lab busy: run '[0-9a-f]{8}' \(calling itself '.*'\), claimed by the "
                                             r"controller with CURVE key \S+ since .*lapses in"):
            with LabClaim(lab, run="intruding sweep", wait=0.0) as claim:
                reshape(bed.name, rtt="150ms", claim=claim)
        assert _rtt(bed) < 40  # the victim's path kept its 10 ms
    finally:
        thread.join(60)
    assert done.is_set() and not isinstance(outcome[0], BaseException), outcome
    meta = json.loads((tmp_path / "victim" / "1" / "experiment.json").read_text())
    assert meta["testbed"]["rtt"] == pytest.approx(10.0)
    # with the run over, the claim is the reshape's: it goes through, and the state says so
    with LabClaim(lab, run="sweep") as claim:
        now = reshape(bed.name, rtt="40ms", claim=claim)
    try:
        assert now["rtt_ms"] == 40.0 and 38 <= _rtt(bed) <= 50
        notes = load_state(state_path(bed.name)).get("notes", [])
        assert any(n.startswith("reshaped at ") and "rtt_ms 40 (configured 10)" in n for n in notes), notes
    finally:
        with LabClaim(lab) as claim:
            back = reshape(bed.name, configured=True, claim=claim)
    assert back["rtt_ms"] == 10.0 and back["bw_bps"] == 100_000_000
    assert not [n for n in load_state(state_path(bed.name)).get("notes", []) if n.startswith("reshaped")]


def test_an_experiment_records_the_shape_the_kernels_had_at_its_start(bed, tmp_path: Path) -> None:
    # The lab file said one shape; the experiment ran under another (a tc change by hand here):
    # experiment.json and exp.nc now say what the router and the delay line had, and the run says so.
    lab = Lab.from_file(bed.lab)
    router = bed.state["router_ns"]
    devs = [lk["router_dev"] for lk in bed.state["links"]]
    for dev in devs:  # the bottleneck at 30 Mbit/s behind the testbed's back
        done = tbutil.ns_run(router, ["tc", "class", "change", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
                                      "rate", "30mbit"])
        assert done.returncode == 0, done.stderr
    rec = RecordingProgress()
    try:
        with LabClaim(lab, run="recorded") as claim:
            result = run(FLOW.replace("$dur", "1") + "PROCESS_EXP\n", lab=lab, workdir=tmp_path / "w", progress=rec,
                         claim=claim)
    finally:
        with LabClaim(lab) as claim:
            reshape(bed.name, configured=True, claim=claim)  # puts the 100 Mbit/s back
    meta = json.loads((tmp_path / "w" / "1" / "experiment.json").read_text())
    assert meta["testbed"]["bw"] == 30_000_000 and meta["testbed"]["rtt"] == pytest.approx(10.0)
    assert meta["hosts"]["h1"]["shape"]["path"]["rate_bps"] == 30_000_000
    assert meta["hosts"]["h2"]["shape"]["path"]["buffer_bytes"] > 0
    said = [e.text for e in rec.of(Notice) if "shaped otherwise than its lab file says" in e.text]
    assert said and "bw 3e+07 bit/s (lab file: 1e+08)" in said[0], [e.text for e in rec.of(Notice)]
    ds = result[1].dataset
    assert json.loads(ds.attrs["testbed"])["bw"] == 30_000_000
