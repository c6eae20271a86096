"""Smoke test: the paper's MServerRR shape with a ca list plans into the expected actions."""

from netesto.script import MemoryLoader, plan

from tests.script.examples import LIB


def test_mserverrr_shape() -> None:
    acts = plan(
        "SOURCE lib\nRUN MServerRR servers=h1,h2 clients=h3,h4 reqs=10K,1M ca=cubic,bbr dur=5 "
        "expName=x instances=1 reply=1",
        loader=MemoryLoader({"lib": LIB}),
    )
    kinds = [a.kind for a in acts]
    assert kinds.count("DO_SERVER") == 2 * 4  # start and stop on both servers, per ca
    assert kinds.count("DO_CLIENT") == 16
    assert kinds.count("PROCESS_EXP") == 2
    clients = [a for a in acts if a.kind == "DO_CLIENT"]
    assert [c.ca for c in clients] == ["cubic"] * 8 + ["bbr"] * 8
    assert {c.exp for c in clients} == {1, 2}
