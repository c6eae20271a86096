"""TcpDiag: another process's TCP connection read by its addresses over sock_diag netlink."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys

import pytest

from netesto.agent.diag import INET_DIAG_INFO, NLMSG_ERROR, SOCK_DIAG_BY_FAMILY, TcpDiag, parse_reply

# A client in another process that sends for a while and prints its addresses.
CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print(*c.getsockname()[:2], *c.getpeername()[:2], flush=True)
end = time.monotonic() + 3
while time.monotonic() < end:
    c.send(b"x" * 65536)
"""


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_cwnd_and_rtt_of_a_connection_another_process_owns(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as srv:
        srv.bind((host, 0))
        srv.listen()
        proc = subprocess.Popen([sys.executable, "-c", CLIENT, host, str(srv.getsockname()[1])],
                                stdout=subprocess.PIPE, text=True)
        try:
            conn, _ = srv.accept()
            lhost, lport, rhost, rport = proc.stdout.readline().split()  # type: ignore[union-attr]
            diag = TcpDiag()
            got = diag.summary((lhost, int(lport)), (rhost, int(rport)))
            while conn.recv(1 << 20) and got.get("cwnd", 0) <= 10:  # leaves slow start's first window
                got = diag.summary((lhost, int(lport)), (rhost, int(rport)))
            assert got["cwnd"] > 10 and got["srtt_us"] > 0
            assert diag.summary((lhost, int(lport)), (rhost, 1)) == {}  # no such connection
            diag.close()
            conn.close()
        finally:
            proc.kill()
            proc.wait()


def test_replies_that_carry_no_tcp_info_read_as_none():
    error = struct.pack("=IHHII", 36, NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -2) + bytes(16)
    assert parse_reply(error) is None and parse_reply(b"") is None
    msg = bytes(72)
    info = b"\x01" * 8
    attr = struct.pack("=HH", 4 + len(info), INET_DIAG_INFO) + info
    other = struct.pack("=HH", 6, 9) + b"ab\0\0"
    body = msg + other + attr
    reply = struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY, 0, 1, 0) + body
    assert parse_reply(reply) == info
    broken = struct.pack("=IHHII", 16 + len(msg) + 4, SOCK_DIAG_BY_FAMILY, 0, 1, 0) + msg + struct.pack("=HH", 0, 2)
    assert parse_reply(broken) is None
