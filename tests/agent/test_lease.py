"""Lease bookkeeping: several controllers, one warning, one expiry."""

from __future__ import annotations

from netesto.agent.lease import Lease


def test_lease_expires_only_when_the_last_controller_lapsed():
    lease = Lease(9.0)
    lease.renew(b"runner", now=0.0)
    lease.renew(b"monitor", now=5.0)
    assert lease.tick(now=8.0) is None
    assert lease.tick(now=10.0) is None and lease.holders() == [b"monitor"]  # runner lapsed, monitor holds
    assert lease.tick(now=11.5) == "warning"  # a third of the lease left
    assert lease.tick(now=12.0) is None  # warned once
    assert lease.tick(now=14.0) == "expired"
    assert lease.tick(now=15.0) is None and not lease.active and lease.holder is None


def test_a_request_renews_and_rearms_the_warning():
    lease = Lease(3.0)
    lease.renew(b"c", now=0.0)
    assert lease.tick(now=2.5) == "warning"
    lease.renew(b"c", now=2.6)
    assert lease.tick(now=3.0) is None
    assert lease.tick(now=4.8) == "warning"


def test_zero_means_never():
    lease = Lease(0)
    lease.renew(b"c", now=0.0)
    assert lease.tick(now=1e9) is None
