"""``python -m bench.crr_timeline``: a CRR transaction's chain, split from a trace of both ends' system calls."""

from __future__ import annotations

import pytest

from bench import crr_timeline


def _transaction(t0: float, *, wake: float, server: float, client: float) -> list[str]:
    """One transaction's calls from the client's request at ``t0`` (seconds): the server answers ``server`` us
    after it, the client has the reply ``wake`` us after that, and sends the next request ``client`` us later."""
    us = 1e-6
    reply = t0 + server * us
    woke = reply + wake * us
    return [
        f"client {t0:.9f} enter sendto", f"client {t0 + 2 * us:.9f} exit sendto",
        f"client {t0 + 3 * us:.9f} enter poll",
        f"server {t0 + 4 * us:.9f} exit accept4", f"server {t0 + 5 * us:.9f} enter recvfrom",
        f"server {t0 + 6 * us:.9f} exit recvfrom",
        f"server {reply:.9f} enter sendto", f"server {reply + 5 * us:.9f} exit sendto",
        f"server {reply + 6 * us:.9f} enter close", f"server {reply + 8 * us:.9f} exit close",
        f"server {reply + 9 * us:.9f} enter accept4",
        f"client {woke:.9f} exit poll",
        f"client {woke + 1 * us:.9f} enter close", f"client {woke + 11 * us:.9f} exit close",
        f"client {woke + 12 * us:.9f} enter connect", f"client {woke + 22 * us:.9f} exit connect",
    ]


def test_the_chain_is_split_where_one_end_hands_it_to_the_other():
    lines: list[str] = []
    t = 100.0
    for k in range(60):
        server, wake, client = 20.0 + (k % 3), 15.0, 30.0
        lines += _transaction(t, wake=wake, server=server, client=client)
        t += (server + wake + client) * 1e-6
    got = crr_timeline.analyse("\n".join(lines))
    assert got["transactions"] == 59  # the last request has no next one
    assert got["request out -> reply out"] == pytest.approx(21.0, abs=0.01)
    assert got["reply out -> client has it"] == pytest.approx(15.0, abs=0.01)
    assert got["client: reply in -> next request"] == pytest.approx(30.0, abs=0.01)
    assert got["period"] == pytest.approx(66.0, abs=0.01)
    assert got["in client close"] == pytest.approx(10.0, abs=0.01)
    assert got["in client connect"] == pytest.approx(10.0, abs=0.01)
    assert got["in server sendto"] == pytest.approx(5.0, abs=0.01)
    assert got["in client sendto"] == pytest.approx(2.0, abs=0.01)


def test_a_reply_never_seen_leaves_the_transaction_out_of_the_chain():
    lines = _transaction(1.0, wake=10, server=10, client=10)
    lines = [line for line in lines if not line.startswith("server")]  # (the server's calls were not traced)
    lines += _transaction(1.001, wake=10, server=10, client=10)
    got = crr_timeline.analyse("\n".join(lines))
    assert got["transactions"] == 0 and "period" not in got
