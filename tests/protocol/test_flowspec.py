"""FlowSpec validation: every field checked on construction, errors naming the flow."""

from __future__ import annotations

import pytest

from netesto.errors import TrafficError
from netesto.protocol.flowspec import FlowSpec
from netesto.vocab import DRIVERS, TEST_TYPES


def test_round_trip_through_dict():
    spec = FlowSpec("h1-h2-1-0", "TCP_RR", "10.0.0.2", 5000, req=100, reply=200, meta=(("group", "1"),))
    assert FlowSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"test": "TCP_FOO"}, "unknown test"),
        ({"dur": 0}, r"dur must be in \(0, 86400\] s, got 0"),
        ({"interval": 0.0001}, "interval"),
        ({"port": 70000}, "bad port"),
        ({"driver": "nuttcp"}, "unknown driver"),
        ({"req": -1}, "req must be >= 0"),
        ({"dur": float("nan")}, "dur must be a finite number"),
        ({"dur": float("inf")}, "dur must be a finite number"),
        ({"interval": float("nan")}, "interval must be a finite number"),
        ({"start_at": float("nan")}, "start_at must be a finite number"),
        ({"dur": "10"}, "dur must be a finite number"),
    ],
)
def test_bad_specs_name_the_flow_and_the_field(kwargs, message):
    base = dict(flow_id="x-y-1-0", test="TCP_STREAM", server="10.0.0.2", port=5000)
    base.update(kwargs)
    with pytest.raises(TrafficError, match=message) as err:
        FlowSpec(**base)
    assert "x-y-1-0" in str(err.value)


def test_unknown_dict_fields_are_rejected():
    with pytest.raises(TrafficError, match="unknown flow spec fields: colour"):
        FlowSpec.from_dict({"flow_id": "a", "test": "TCP_RR", "server": "s", "port": 1, "colour": "red"})


def test_takes_every_test_type_and_driver_of_the_vocabulary():
    for test in TEST_TYPES:
        for driver in DRIVERS:
            assert FlowSpec("h1-h2-1-0", test, "10.0.0.2", 5000, driver=driver).test == test
