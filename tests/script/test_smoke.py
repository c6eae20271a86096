"""Smoke test: the paper's MServerRR shape plans into the expected actions."""

from netesto.script import MemoryLoader, plan

LIB = """
SET randDelay=0.1
BEGIN M
SET exp=COUNTER
FOR s IN $servers DO
  DO_SERVER exp=$exp host=$s order=0 expName=$expName start=1
  SET exp=PREV
DONE
FOR c IN $clients DO
  FOR s IN $servers DO
    FOR r IN $reqs DO
      DO_CLIENT host=$c server=$s ca=$ca dur=$dur test=TCP_RR req=$r stats=1
      RAND_WAIT $randDelay
    DONE
  DONE
DONE
WAIT $dur
PROCESS_EXP
END M
"""


def test_mserverrr_shape() -> None:
    acts = plan(
        "SOURCE lib\nRUN M servers=h1,h2 clients=h3,h4 reqs=10K,1M ca=cubic,bbr dur=5 expName=x",
        loader=MemoryLoader({"lib": LIB}),
    )
    kinds = [a.kind for a in acts]
    assert kinds.count("DO_SERVER") == 4
    assert kinds.count("DO_CLIENT") == 16
    assert kinds.count("PROCESS_EXP") == 2
    clients = [a for a in acts if a.kind == "DO_CLIENT"]
    assert [c.ca for c in clients] == ["cubic"] * 8 + ["bbr"] * 8
    assert {c.exp for c in clients} == {1, 2}
