"""The engine loop's sockets served in turn (``Loop.register(..., turns=True)``: many RR flows of one loop)."""

from __future__ import annotations

import os
import socket

import pytest

from netesto.engine.core import loop as loopmod
from netesto.engine.core.loop import IN, Loop


@pytest.fixture
def pairs():
    made = [socket.socketpair() for _ in range(3)]
    yield made
    for a, b in made:
        a.close()
        b.close()


def _reader(seen: list[int], sock: socket.socket, size: int = 1):
    def handler(events: int) -> None:
        sock.recv(size)
        seen.append(sock.fileno())
    return handler


@pytest.mark.skipif(not loopmod.TURNS, reason="NETESTO_LOOP_TURNS=0")
def test_sockets_served_in_turn_go_in_the_order_their_data_came(pairs):
    """Socket 0 is served, then data comes to 1, 2 and 0 in that order: the next poll serves 1, 2, 0.
    (Level-triggered, 0 stays on epoll's ready list after it was served and keeps its early place: 0, 1, 2.)"""
    loop = Loop()
    seen: list[int] = []
    for a, _ in pairs:
        loop.register(a.fileno(), IN, _reader(seen, a), turns=True)
    pairs[0][1].send(b"x")
    loop.run(lambda: len(seen) >= 1)
    for i in (1, 2, 0):
        pairs[i][1].send(b"x")
    loop.run(lambda: len(seen) >= 4)
    assert seen == [pairs[i][0].fileno() for i in (0, 1, 2, 0)]


def test_a_socket_served_in_turn_with_data_left_is_served_again(pairs):
    loop = Loop()
    seen: list[int] = []
    a, b = pairs[0]
    loop.register(a.fileno(), IN, _reader(seen, a), turns=True)
    b.send(b"xyz")  # three handler calls of one byte each, no more data coming
    loop.call_later(2.0, lambda: seen.append(-1))
    loop.run(lambda: len(seen) >= 3)
    assert seen == [a.fileno()] * 3


def test_a_handler_that_closes_its_socket_served_in_turn_ends_it_cleanly(pairs):
    loop = Loop()
    seen: list[int] = []
    a, b = pairs[0]
    fd = a.fileno()

    def handler(events: int) -> None:
        seen.append(fd)
        loop.unregister(fd)
        os.close(os.dup(fd))  # (an fd closed and the number free again must not be re-armed)

    loop.register(fd, IN, handler, turns=True)
    b.send(b"x")
    loop.run(lambda: len(seen) >= 1)
    loop.call_later(0.05, lambda: seen.append(-1))
    loop.run(lambda: len(seen) >= 2)
    assert seen == [fd, -1]
