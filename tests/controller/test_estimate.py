"""A run's estimate: the script's own time plus the flows' start lead, hosts, fetches and processing."""

from __future__ import annotations

import pytest

from netesto.controller.estimate import DEFAULT, Costs, run_seconds
from netesto.controller.plan import make_plan

EXP = """DO_SERVER host=h1 exp=COUNTER start=1
DO_CLIENT host=h2 server=h1 ca=cubic dur=2
RAND_WAIT 0 0
DO_CLIENT host=h3 server=h1 ca=reno dur=2 delay=1
WAIT 3
DO_SERVER host=h1 order=1
GET_DATA host=h1
GET_DATA host=h2
GET_DATA host=h3
PROCESS_EXP
"""


def test_the_run_adds_the_lead_once_per_batch_and_processing_per_experiment() -> None:
    one = make_plan(EXP, counter=0)
    c = DEFAULT
    # flows start lead + 0.2 s for the second client host after the batch; the last ends at 3 s from then
    flows_end = c.start + 3 * c.host + 2 * c.client + c.server + c.lead + c.lead_per_host + 3
    expected = flows_end + 3 * c.fetch + c.process + c.per_flow_second * 4 + c.end
    assert one.run_estimate(imported=True, seasoned=False) == pytest.approx(expected)
    assert one.estimate == 3  # the script's own time: the WAIT, the flows
    assert one.run_estimate(imported=False, seasoned=False) == pytest.approx(expected + c.imports)
    two = make_plan(EXP + EXP, counter=0)
    # the second experiment: hosts known, imports done, leads learned; its own lead, fetches and processing
    assert two.run_estimate(imported=False, seasoned=False) - one.run_estimate(imported=False, seasoned=False) == \
        pytest.approx(c.server + 2 * c.client + c.lead_learned + 3 + 3 * c.fetch + c.process + c.per_flow_second * 4)
    # in a process that learned the leads (a notebook's later cells, a sweep's kept kernel), from the first batch
    assert one.run_estimate(imported=True, seasoned=True) == pytest.approx(expected - c.lead - c.lead_per_host
                                                                           + c.lead_learned)


def test_a_pause_splits_a_batch_and_costs_scale() -> None:
    split = make_plan(EXP.replace("RAND_WAIT 0 0", "WAIT 0.5"), counter=0)
    together = make_plan(EXP, counter=0)
    # two batches of one client host each (neither seen before): the last flow starts 0.5 s later, without
    # the second host's lead
    assert split.run_estimate(imported=True, seasoned=False) - together.run_estimate(imported=True, seasoned=False) == pytest.approx(
        0.5 - DEFAULT.lead_per_host, abs=0.01)
    slow = Costs(process=10.0)
    assert run_seconds(together.actions, slow, imported=True) - together.run_estimate(imported=True, seasoned=False) == \
        pytest.approx(10.0 - DEFAULT.process)


def test_estimates_scale_their_costs_by_what_this_process_runs_cost() -> None:
    from netesto.controller.estimate import LEARNED_RANGE, learn, learned

    plan = make_plan(EXP, counter=0)
    script, model = plan.estimate, plan.run_estimate(imported=True, seasoned=False)
    assert learned() == 1.0 and plan.modelled(imported=True, seasoned=False) == model
    learn(script, model, script + 2 * (model - script))  # a loaded machine: the costs took twice the model
    learn(script, model, script + 1.5 * (model - script))
    learn(script, model, script + 2.5 * (model - script))
    assert learned() == pytest.approx(2.0)
    # the script's own time stays; only what running costs is scaled
    assert plan.run_estimate(imported=True, seasoned=False) == pytest.approx(script + 2 * (model - script))
    for _ in range(8):  # an absurd run or eight are held to the range (an old machine, not a hung one)
        learn(script, model, script + 50 * (model - script))
    assert learned() == LEARNED_RANGE[1]
