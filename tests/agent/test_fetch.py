"""A real agent's data: fetch in chunks with digests, acknowledgement, deletion, restarts."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from netesto.errors import AgentError, ProtocolError
from tests.agent.agentproc import FAULTY_AGENT, wait_for


def _fill(datadir, exp, files):
    for rel, data in files.items():
        p = datadir / str(exp) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def test_ack_is_refused_while_flows_run_and_nothing_is_deleted(agents, keys, tmp_path):
    agent = agents(keys=keys, extra=("--test-bind", "127.0.0.1"))
    with agent.client() as c:
        port = c.prepare_server(3, "t3").port
        spec = dict(flow_id="h1-h1-1-0", test="TCP_STREAM", server="127.0.0.1", port=port, dur=3.0, token="t3",
                    exp=3, interval=0.05)
        c.start_flows(3, [spec])
        assert wait_for(lambda: c.status(3).running == [] or
                        (agent.datadir / "3" / "flows" / "h1-h1-1-0.client.nflow").exists(), timeout=5)
        with pytest.raises(AgentError, match="still has running flows; not deleting its data") as info:
            c.request("ack", {"exp": 3})
        assert info.value.kind == "Busy"
        assert (agent.datadir / "3" / "flows" / "h1-h1-1-0.client.nflow").exists()
        got = c.fetch(3, tmp_path / "early")  # a fetch during the flow does not acknowledge either
        assert got and (agent.datadir / "3").exists()
        c.stop(3)


def test_fetch_chunks_digests_ack_then_delete(agents, keys, tmp_path):
    agent = agents(keys=keys)
    big = os.urandom(3 * 1024 * 1024 + 17)
    _fill(agent.datadir, 4, {"flows/a.client.nflow": big, "0/h1.snmp": b"Tcp: 1\n", "empty": b""})
    with agent.client() as c:
        assert "4" in c.hello().unfetched
        paths = c.fetch(4, tmp_path / "got" / "4")
    got = {p.relative_to(tmp_path / "got" / "4").as_posix(): p.read_bytes() for p in paths}
    assert got["flows/a.client.nflow"] == big and got["0/h1.snmp"] == b"Tcp: 1\n" and got["empty"] == b""
    assert not (agent.datadir / "4").exists()  # deleted after the ack
    assert not list((tmp_path / "got").rglob("*.part"))


def test_fetch_detects_a_corrupted_chunk_and_keeps_the_agent_copy(agents, keys, tmp_path):
    agent = agents(keys=keys, env={"NETESTO_AGENT_FAULT": "corrupt-chunk"}, module=FAULTY_AGENT)
    data = os.urandom(200_000)
    _fill(agent.datadir, 9, {"flows/x.nflow": data})
    with agent.client() as c:
        with pytest.raises(ProtocolError, match="failed its crc32 check"):
            c.fetch(9, tmp_path / "got")
    assert (agent.datadir / "9" / "flows" / "x.nflow").read_bytes() == data  # not acknowledged, not deleted
    assert not (tmp_path / "got" / "flows" / "x.nflow").exists()


def test_fetch_resumes_from_a_partial_file(agents, keys, tmp_path):
    agent = agents(keys=keys)
    data = os.urandom(2 * 1024 * 1024 + 5)
    _fill(agent.datadir, 11, {"big.bin": data})
    dest = tmp_path / "got"
    dest.mkdir()
    (dest / "big.bin.part").write_bytes(data[:1_500_000])  # an earlier fetch was cut here
    with agent.client() as c:
        [path] = c.fetch(11, dest)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()


def test_agent_killed_and_restarted_offers_unfetched_data(agents, keys, tmp_path):
    agent = agents(keys=keys, tag="first")
    _fill(agent.datadir, 21, {"flows/h1-h2-1-0.server.nflow": b"abc" * 1000})
    with agent.client() as c:
        assert c.hello().unfetched == ["21"]
    agent.kill()  # SIGKILL: no clean shutdown
    again = agents(keys=keys, tag="second", datadir=agent.datadir)
    with again.client() as c:
        assert c.hello().unfetched == ["21"]
        [path] = c.fetch(21, tmp_path / "ctl" / "21")
        assert path.read_bytes() == b"abc" * 1000
        assert c.hello().unfetched == []


@pytest.mark.parametrize("args, text", [
    ({"path": "0/h1.snmp", "offset": 2**63}, r"bad chunk offset 9223372036854775808"),
    ({"path": "0/h1\x00.snmp"}, r"no file '0/h1\\x00.snmp' in experiment 4"),
    ({"path": "0"}, r"no file '0' in experiment 4"),
    ({"path": "/etc/passwd"}, r"no file '/etc/passwd' in experiment 4"),
], ids=["offset-past-off_t", "nul-in-path", "a-directory", "absolute"])
def test_fetch_chunk_refusals_name_the_file_and_experiment(agents, keys, args, text):
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(4, 0, "h1")
        with pytest.raises(AgentError, match=text) as info:
            c.request("fetch_chunk", {"exp": 4, **args})
        assert info.value.kind in ("UsageError", "NotFound") and "internal error" not in str(info.value)
        assert c.request("fetch_chunk", {"exp": 4, "path": "0/h1.snmp"})["data"].startswith(b"Ip:")


def test_ack_refuses_when_files_changed_since_the_listing(agents, keys, tmp_path):
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(11, 0, "h1")
        c.request("fetch_list", {"exp": 11})
        with open(agent.datadir / "11" / "0" / "h1.snmp", "ab") as f:
            f.write(b"written after the listing\n")
        (agent.datadir / "11" / "late.txt").write_text("new\n")
        with pytest.raises(AgentError, match=r"changed since it was listed.*0/h1\.snmp.*late\.txt") as info:
            c.request("ack", {"exp": 11})
        assert info.value.kind == "Busy"
        assert (agent.datadir / "11" / "late.txt").exists()
        got = c.fetch(11, tmp_path / "again")  # a new listing covers them: now it is acknowledged
    assert (tmp_path / "again" / "late.txt").read_text() == "new\n"
    assert (tmp_path / "again" / "0" / "h1.snmp").read_bytes().endswith(b"written after the listing\n")
    assert len(got) > 2 and not (agent.datadir / "11").exists()


def test_an_ack_out_of_order_deletes_nothing(agents, keys, tmp_path):
    # ack means "I stored what fetch_list gave me": without a listing nobody has the data.
    agent = agents(keys=keys)
    with agent.client() as c:
        c.snapshot(16, 0, "h1")
        with pytest.raises(AgentError, match=r"ack of experiment 16 before any fetch_list") as info:
            c.request("ack", {"exp": 16})
        assert info.value.kind == "UsageError"
        assert (agent.datadir / "16" / "0" / "h1.snmp").exists()
        assert c.request("ack", {"exp": 99}) == {"exp": "99", "deleted": False}  # nothing there: nothing to refuse
        got = c.fetch(16, tmp_path / "got")
    assert (tmp_path / "got" / "0" / "h1.snmp") in got and not (agent.datadir / "16").exists()


def test_an_experiment_directory_that_is_a_symlink_is_neither_served_nor_deleted(agents, keys, tmp_path):
    # Only the agent makes experiment directories; a symlink there points outside the
    # data directory: fetch would serve, and ack delete, whatever it points at.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not experiment data\n")
    agent = agents(keys=keys)
    (agent.datadir / "20").symlink_to(outside)
    with agent.client() as c:
        assert "20" not in c.hello().unfetched
        for cmd, args in (("fetch_list", {}), ("fetch_chunk", {"path": "secret"}), ("ack", {})):
            with pytest.raises(AgentError, match=r"experiment 20 is a symbolic link") as info:
                c.request(cmd, {"exp": 20, **args})
            assert info.value.kind == "NotFound"
        with pytest.raises(AgentError, match=r"experiment 20 is a symbolic link"):
            c.snapshot(20, 0, "h1")
    assert (outside / "secret").read_text() == "not experiment data\n" and not (outside / "0").exists()


def test_a_file_that_grows_while_it_is_listed_is_hashed_to_the_size_listed(tmp_path):
    """A running tcpdump's pcap grows between the listing's stat and the end of its read: the listing's
    sha256 is of the size it gives (the client fetches that many bytes and checks them), never of the bytes
    to wherever the read ended (a quiet suite run's fetch during a capture failed its whole-file check)."""
    import threading

    from netesto.agent.store import DataStore

    store = DataStore(tmp_path)
    path = store.exp_dir(1) / "h1-X.pcap"
    path.write_bytes(bytes(4 << 20))
    stop = threading.Event()

    def grow() -> None:
        with open(path, "ab") as f:
            while not stop.is_set():
                f.write(os.urandom(4096))
                f.flush()

    appender = threading.Thread(target=grow)
    appender.start()
    try:
        # listed until it was seen to grow (a loaded machine may not run the appender between ten listings)
        entries = [store.files(1)[0] for _ in range(10)]
        deadline = time.monotonic() + 10
        while len({e.size for e in entries}) < 2 and time.monotonic() < deadline:
            entries.append(store.files(1)[0])
    finally:
        stop.set()
        appender.join()
    data = path.read_bytes()
    assert len({e.size for e in entries}) > 1  # it grew while it was listed
    for e in entries:
        assert hashlib.sha256(data[:e.size]).hexdigest() == e.sha256, e.size
