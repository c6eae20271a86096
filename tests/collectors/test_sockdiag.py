"""sock_diag dumps with a kernel filter, and the watcher that samples them, on real sockets in namespaces."""

from __future__ import annotations

import pytest

from netesto.collectors.sockdiag import BC_D_EQ, BC_S_EQ, SocketFilter, assemble
from netesto.errors import TrafficError
from tests.agent.agentproc import run_in_ns

pytestmark = pytest.mark.netns

# A listener on :: (dual stack) and on 127.0.0.2, connections over IPv4 (v4-mapped on the IPv6 listener's
# side), IPv6 and to the second listener; each filter's dump is compared with the filter run in Python.
DUMPS = """
import json, os, socket
from netesto.collectors.sockdiag import SockDiag, SocketFilter
from netesto.collectors.sockowner import cgroup_id, process_cgroup
l6 = socket.socket(socket.AF_INET6); l6.bind(("::", 47100)); l6.listen()
l2 = socket.create_server(("127.0.0.2", 47200))
conns = [socket.create_connection(a) for a in (("127.0.0.1", 47100), ("::1", 47100), ("127.0.0.2", 47200))]
peers = [l6.accept()[0], l6.accept()[0], l2.accept()[0]]
out = {}
filters = {"port": SocketFilter(ports=(47100,)), "lport": SocketFilter(local_ports=(47100,)),
           "rport": SocketFilter(remote_ports=(47100, 47200)), "v4net": SocketFilter(ports=(47100, 47200),
           addresses=("127.0.0.0/24",)), "v6": SocketFilter(addresses=("::1",)),
           "cgroup": SocketFilter(ports=(47200,), cgroup=cgroup_id(process_cgroup(os.getpid()))),
           "other cgroup": SocketFilter(ports=(47200,), cgroup=1234567)}
with SockDiag() as every:
    mine = [s for s in every.dump() if s.local[1] in (47100, 47200) or s.remote[1] in (47100, 47200)]
for name, f in filters.items():
    with SockDiag(f) as d:
        got = sorted((s.local, s.remote) for s in d.dump())
    want = sorted((s.local, s.remote) for s in mine if f.matches(s)) if name != "other cgroup" else []
    out[name] = [got, want]
print(json.dumps(out))
"""


def test_each_filter_runs_in_the_kernel_and_returns_what_it_says(veth_pair) -> None:
    got = run_in_ns(veth_pair.a, DUMPS)
    counts = {name: len(g) for name, (g, _) in got.items()}
    assert counts == {"port": 4, "lport": 2, "rport": 3, "v4net": 4, "v6": 2, "cgroup": 2, "other cgroup": 0}
    for name, (g, want) in got.items():
        assert g == want, name
    # the IPv6 listener's accepted IPv4 socket is reported with its IPv4 addresses
    assert [["127.0.0.1", 47100], ["127.0.0.1", got["lport"][0][0][1][1]]] in got["lport"][0]


def test_the_bytecode_is_laid_out_as_the_kernels_audit_wants() -> None:
    port = bytes(2) + (80).to_bytes(2, "little")  # an op's "no" field carries the port
    # a && b: every "yes" goes to the next op; a's failure jumps past b as well
    assert assemble([[(BC_S_EQ, port)], [(BC_D_EQ, port)]]).hex() == "0b081400" "00005000" "0c080c00" "00005000"
    # a || b: a that holds lands on a jump (JMP always takes "no") over b
    assert assemble([[(BC_S_EQ, port), (BC_D_EQ, port)]]).hex() == ("0b080c00" "00005000" "01040c00"
                                                                    "0c080c00" "00005000")
    with pytest.raises(TrafficError, match="bad port 0"):
        SocketFilter(ports=(0,))
    with pytest.raises(TrafficError, match="bad address"):
        SocketFilter(addresses=("10.0.0.300",))


# A transfer in one namespace watched from inside it: the application's bytes are the kernel's counts
# exactly, to the last row, which the destroyed socket's broadcast gives.
WATCHED = """
import json, socket, threading, time, os, signal
from netesto.collectors.watchspec import WatchSpec
from netesto.collectors.sockwatch import Watcher
from netesto.collectors.sockfiles import finish
from netesto.raw.nflow import read_flow
spec = WatchSpec(exp="3", datadir=%(dir)r, host="h1", name="app", ports=(47300,), interval=0.01)
w = Watcher(spec)
stop = [False]
th = threading.Thread(target=w.run, args=(lambda: stop[0],)); th.start()
srv = socket.create_server(("127.0.0.1", 47300))
got = [0]
def serve():
    c, _ = srv.accept()
    while True:
        d = c.recv(65536)
        if not d: break
        got[0] += len(d)
    c.sendall(b"z" * 777)
    c.close()
t = threading.Thread(target=serve); t.start()
c = socket.create_connection(("127.0.0.1", 47300))
sent = 0
end = time.monotonic() + 0.6
while time.monotonic() < end:
    sent += c.send(b"x" * 10000)
c.shutdown(socket.SHUT_WR)
back = b""
while True:
    d = c.recv(4096)
    if not d: break
    back += d
c.close(); t.join()
time.sleep(0.1)
stop[0] = True; th.join()
w.close()
summary = finish(spec, w.closed, w.cost())
ends = {}
for rel in summary["flow_ends"]:
    f = read_flow(%(dir)r + "/3/" + rel)
    ends[f.header["side"]] = [f.rows, f.columns["app_bytes_tx"][-1], f.columns["app_bytes_rx"][-1],
                              f.header["flow"]["test"], f.summary["ended"], rel]
print(json.dumps({"sent": sent, "got": got[0], "back": len(back), "ends": ends, "left": summary["left"],
                  "cost": summary["cost"]}))
"""


def test_a_watched_transfer_is_sampled_from_outside_to_its_last_byte(veth_pair, tmp_path) -> None:
    out = run_in_ns(veth_pair.a, WATCHED % {"dir": str(tmp_path)})
    client, server = out["ends"]["client"], out["ends"]["server"]
    assert out["got"] == out["sent"] and out["back"] == 777
    # the rows' application counters at the end: exactly what each side wrote and read
    assert client[1:3] == [out["sent"], 777] and server[1:3] == [777, out["sent"]]
    # 10 ms rows over 0.6 s: each grid point a row of each end, or a tick the watcher was late for (a
    # machine busy with other work holds it off the CPU: 14 rows and the rest late on a loaded one)
    late = out["cost"]["late_ticks"]
    assert client[0] + late >= 30 and server[0] + late >= 30 and min(client[0], server[0]) >= 3, (client, server, late)
    assert client[3] == server[3] == "TCP_STREAM"  # the client end sent the data
    assert client[5] == server[5].replace(".server.", ".client.")  # both ends name the flow alike
    assert "destroyed" in (client[4], server[4])
    assert out["left"] == [] and out["cost"]["socket_samples"] + 2 * late >= 60


OWNED = """
import json, socket, subprocess, sys, time
from netesto.collectors.watchspec import WatchSpec
from netesto.collectors.sockwatch import Watcher
srv = socket.create_server(("127.0.0.1", 47310))
child = subprocess.Popen([sys.executable, "-c", "import socket, time; s = socket.create_connection(('127.0.0.1', "
                          "47310)); print(s.getsockname()[1], flush=True); time.sleep(30)"], stdout=subprocess.PIPE,
                         text=True)
child_port = int(child.stdout.readline())
mine = socket.create_connection(("127.0.0.1", 47310))
peers = [srv.accept()[0], srv.accept()[0]]
w = Watcher(WatchSpec(exp="1", datadir=%(dir)r, host="h1", name="own", ports=(47310,), pid=child.pid))
w.tick(); w.tick()
seen = sorted(s.sock.local[1] for s in w.live.values())
w.close()
child.kill()
print(json.dumps({"seen": seen, "child": child_port, "mine": mine.getsockname()[1]}))
"""


def test_a_watch_of_a_process_samples_only_its_sockets(veth_pair, tmp_path) -> None:
    out = run_in_ns(veth_pair.a, OWNED % {"dir": str(tmp_path)})
    # four sockets on the port (two connections, both ends here): the child process holds one
    assert out["seen"] == [out["child"]]
