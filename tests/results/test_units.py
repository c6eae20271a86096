"""Every unit string of the dataset is one UDUNITS (cf-units) and pint both read, and time makes no CF time claim."""

from __future__ import annotations

import pytest

from netesto.results.schema import ALL_VARS, TIME_ATTRS, var_attrs

# read by cf-units 3.3 and pint 0.26 (test_units_parse checks it where they are installed)
ACCEPTED = {"s", "ms", "us", "bit/s", "Mbit/s", "bytes", "1", "1/s", "percent"}
UNITS = sorted({spec.units for spec in ALL_VARS.values() if spec.units})


def test_every_unit_is_one_both_libraries_read() -> None:
    assert set(UNITS) <= ACCEPTED, set(UNITS) - ACCEPTED
    # text coordinates carry no units at all (an empty string is no unit either)
    assert "units" not in var_attrs("host") and var_attrs("cwnd")["units"] == "1"
    assert "packets" in var_attrs("cwnd")["long_name"]


@pytest.mark.parametrize("unit", sorted(ACCEPTED))
def test_units_parse(unit: str) -> None:
    pint = pytest.importorskip("pint")
    cf_units = pytest.importorskip("cf_units")
    pint.UnitRegistry().Unit(unit)
    cf_units.Unit(unit)


def test_time_is_seconds_with_no_cf_time_claim() -> None:
    # a CF time coordinate would need "seconds since <date>", which xarray decodes to datetime64
    assert TIME_ATTRS["units"] == "s" and "standard_name" not in TIME_ATTRS and "axis" not in TIME_ATTRS
