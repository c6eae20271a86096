"""The TCP_CRR close option of a FlowSpec: checked, defaulted, carried to the server."""

from __future__ import annotations

import pytest

from netesto.errors import TrafficError
from netesto.protocol.flowspec import CRR_CLOSES, FlowSpec


def test_crr_close_defaults_to_a_reset_and_refuses_unknown_ways():
    spec = FlowSpec("c-s-1-0", "TCP_CRR", "10.0.0.2", 12867)
    assert spec.crr_close == "rst" and CRR_CLOSES == ("rst", "client", "server")
    assert FlowSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(TrafficError, match="unknown crr_close 'linger'"):
        FlowSpec("c-s-1-0", "TCP_CRR", "10.0.0.2", 12867, crr_close="linger")
