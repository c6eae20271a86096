"""The netperf driver against the real netperf 2.7: netserver and netperf between testbed hosts.

netperf is not in Debian main; ``../shared/peers/build.sh`` builds netperf 2.7.1 (with
``--enable-demo``, as the driver needs) into a cache. The agents find it on PATH. A
netperf flow must give a dataset with the same variables as a built-in flow, numbers
that agree with the bottleneck, and the same per-flow summaries.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ..testbed import tbutil

pytestmark = [pytest.mark.netns]

PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers" / "build.sh"

SCRIPT = """DO_SERVER host=h2 start=1
DO_CLIENT host=h1 server=h2 test={test} req={req} reply=1 dur=1.5 driver={driver} ca=cubic
WAIT 1.5
GET_DATA host=h2
GET_DATA host=h1
"""


@pytest.fixture(scope="module")
def peers_bin() -> str:
    if not PEERS.is_file():
        pytest.skip(f"no peer sources at {PEERS}")
    built = subprocess.run(["bash", str(PEERS)], capture_output=True, text=True, timeout=900)
    if built.returncode != 0:
        pytest.fail(f"building netperf failed: {built.stderr[-2000:]}")
    return built.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def bed(tmp_path_factory, peers_bin):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{peers_bin}{os.pathsep}{os.environ['PATH']}")  # the agents inherit it
        with tbutil.testbed_up(tmp_path_factory, hosts=2, bw="50mbit", rtt="4ms") as up:
            yield up


def _dataset(bed, tmp_path: Path, test: str, driver: str, req: str = "S"):
    from netesto import run

    result = run(SCRIPT.format(test=test, req=req, driver=driver), lab=bed.lab, workdir=tmp_path / driver)
    assert not result.errors
    return result[result.exps[0]].dataset


@pytest.mark.alone
def test_a_netperf_stream_has_the_builtin_variables_and_the_bottleneck_rate(bed, tmp_path):
    builtin = _dataset(bed, tmp_path, "TCP_STREAM", "builtin")
    netperf = _dataset(bed, tmp_path, "TCP_STREAM", "netperf")
    assert set(netperf.data_vars) == set(builtin.data_vars)
    assert set(netperf.coords) == set(builtin.coords)
    assert [str(v) for v in netperf.driver.values] == ["netperf"]
    assert [str(v) for v in builtin.driver.values] == ["builtin"]
    # a 50 Mbit/s bottleneck: neither tool sees more. How much of it a 1.5 s flow gets is the machine's to
    # say (the testbed's delay line is a user-space process: beside the suite's other workers one flow got
    # 31 Mbit/s, netperf's 22 while the builtin's just before got 47), so the floor is loose.
    rates = [float(ds.rate.sum()) for ds in (builtin, netperf)]
    assert all(10 <= r <= 51 for r in rates), rates


@pytest.mark.alone
def test_a_netperf_rr_reports_transactions_and_latency_like_the_engine(bed, tmp_path):
    builtin = _dataset(bed, tmp_path, "TCP_RR", "builtin", req="1")
    netperf = _dataset(bed, tmp_path, "TCP_RR", "netperf", req="1")
    assert set(netperf.data_vars) == set(builtin.data_vars)
    # 4 ms of RTT: at most about 250 transactions a second, whichever tool counts them; a loaded machine
    # (its delay line is a user-space process) gives fewer (138 at load 9 on 2 vCPUs)
    rates = [float(ds.transactions_total.sum() / ds.duration.max()) for ds in (builtin, netperf)]
    assert all(50 <= tps <= 260 for tps in rates), rates
